#![no_main]

use libfuzzer_sys::{Corpus, fuzz_target};

fuzz_target!(|data: &[u8]| -> Corpus {
    if fa3conform::fuzzing::harness::bundle(data) { Corpus::Keep } else { Corpus::Reject }
});
