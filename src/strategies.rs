//! proptest strategies over the seeded call generator (feature `internal-testing`).
//!
//! A call is drawn from a `u64` seed through [`cases::random_call`], so the strategies make exactly
//! the calls the `conform` suites and the kernel differential tests make. Shrinking shrinks the
//! seed, which does not make calls smaller; a failure is reproduced from the printed seed.

use crate::call::KvCacheCall;
use crate::cases::{self, Options};
use crate::reference::Stack;
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Any of the stacks.
pub fn stack() -> impl Strategy<Value = Stack> {
    prop_oneof![Just(Stack::Musa), Just(Stack::SglKernel), Just(Stack::Fa3)]
}

/// A valid call under `options` and the seed it was made from.
pub fn call(options: Options) -> impl Strategy<Value = (u64, KvCacheCall)> {
    any::<u64>().prop_map(move |seed| {
        let call = cases::random_call(&mut ChaCha8Rng::seed_from_u64(seed), &options);
        (seed, call)
    })
}

/// A stack with a small valid call for it, and the call's seed.
pub fn stack_and_call() -> impl Strategy<Value = (Stack, u64, KvCacheCall)> {
    stack().prop_flat_map(|stack| {
        call(Options::small(stack)).prop_map(move |(seed, call)| (stack, seed, call))
    })
}
