#![no_main]

use libfuzzer_sys::{Corpus, fuzz_target};

fuzz_target!(init: fa3conform::fuzzing::harness::init(), |data: &[u8]| -> Corpus {
    if fa3conform::fuzzing::harness::scan(data) { Corpus::Keep } else { Corpus::Reject }
});
