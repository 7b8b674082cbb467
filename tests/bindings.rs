//! The committed bindings (src/kernel/bindings.rs) are what bindgen generates from the header
//! today. Compiled only with `--features regen-bindings` (needs libclang); regenerate with
//! scripts/regen-bindings.sh.
#![cfg(feature = "regen-bindings")]

#[test]
fn bindings_are_current() {
    let generated = include_str!(concat!(env!("OUT_DIR"), "/bindings.rs"));
    let committed = include_str!("../src/kernel/bindings.rs");
    assert!(
        generated == committed,
        "src/kernel/bindings.rs differs from bindgen's output; run scripts/regen-bindings.sh"
    );
}
