//! Metamorphic invariants of the reference (filled in below).
