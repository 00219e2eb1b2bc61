#![no_main]
//! See tensor_compiler::selfcheck::expression.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        tensor_compiler::selfcheck::expression(text);
    }
});
