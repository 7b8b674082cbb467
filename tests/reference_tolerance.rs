//! The tolerance rule on real reference results: the low-precision baseline is close to the f64
//! reference but not equal to it, so the rule admits a faithful kernel and rejects a sloppy one.

use fa3conform::cases::{Options, random_call};
use fa3conform::reference::{Precision, RefOutput, Stack, run};
use fa3conform::tensor::materialise;
use fa3conform::tolerance::compare;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

fn evaluate(stack: Stack, seed: u64) -> (RefOutput, RefOutput) {
    let call = random_call(&mut ChaCha8Rng::seed_from_u64(seed), &Options::small(stack));
    let tensors = materialise(&call, 1 << 28).expect("materialises");
    let exact = run(&call, &tensors, stack, Precision::Exact).expect("evaluates");
    let low = run(&call, &tensors, stack, Precision::LowPrecision).expect("evaluates");
    (exact, low)
}

#[test]
fn low_precision_is_close_but_not_equal() {
    let mut differing = 0;
    let total = 120;
    for seed in 0..total {
        let stack = Stack::ALL[seed as usize % 3];
        let (exact, low) = evaluate(stack, seed);
        // Same masked rows.
        for (e, l) in exact.lse.iter().zip(&low.lse) {
            assert_eq!(e.is_finite(), l.is_finite(), "seed {seed}");
        }
        let scale = exact.out.iter().fold(1.0f64, |m, x| m.max(x.abs()));
        let worst = exact
            .out
            .iter()
            .zip(&low.out)
            .fold(0.0f64, |m, (e, l)| m.max((e - l).abs()));
        // A few bf16/fp8 roundings of probabilities and scores: far below the output's size.
        assert!(worst <= 0.25 * scale, "seed {seed}: {worst} vs {scale}");
        differing += usize::from(worst > 0.0);
        assert!(compare(&low, &exact, &low).is_ok(), "seed {seed}");
        assert!(compare(&exact, &exact, &low).is_ok(), "seed {seed}");
    }
    assert!(
        differing * 10 >= total as usize * 9,
        "{differing} of {total} differ"
    );
}

#[test]
fn an_output_five_baselines_away_fails() {
    let (exact, low) = evaluate(Stack::Fa3, 5);
    let mut sloppy = exact.clone();
    // Every element five times as far from the reference as the baseline (the multipliers are
    // at most 4).
    sloppy
        .out
        .zip_mut_with(&low.out, |s, &l| *s += 5.0 * (l - *s));
    let err = compare(&sloppy, &exact, &low).unwrap_err();
    assert_eq!(err.tensor, "out");
}
