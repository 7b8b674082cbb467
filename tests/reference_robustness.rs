//! The reference never panics: calls whose shapes or index values disagree are errors.

use fa3conform::cases::{Mutation, Options, random_call};
use fa3conform::reference::{Precision, Stack, run};
use fa3conform::tensor::materialise;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[test]
fn broken_calls_are_errors_not_panics() {
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    let (mut evaluated, mut refused) = (0, 0);
    for i in 0..400 {
        let stack = Stack::ALL[i % 3];
        let mut call = random_call(&mut rng, &Options::small(stack));
        for _ in 0..rng.gen_range(1..=2) {
            Mutation::draw(&mut rng, &call).apply(&mut call);
        }
        // Small calls stay far below the cap; mutated shapes that grow past it are skipped.
        let Ok(tensors) = materialise(&call, 1 << 22) else {
            continue;
        };
        for precision in [Precision::Exact, Precision::LowPrecision] {
            match run(&call, &tensors, stack, precision) {
                Ok(_) => evaluated += 1,
                Err(_) => refused += 1,
            }
        }
    }
    // Both outcomes occur: some breakages are harmless (e.g. a spare page), most are refused.
    assert!(
        evaluated > 0 && refused > 0,
        "{evaluated} evaluated, {refused} refused"
    );
}
