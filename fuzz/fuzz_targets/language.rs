#![no_main]
//! See tensor_compiler::selfcheck::language.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        tensor_compiler::selfcheck::language(text);
    }
});
