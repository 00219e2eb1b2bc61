#![no_main]
//! See tensor_compiler::selfcheck::readers.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tensor_compiler::selfcheck::readers(data);
});
