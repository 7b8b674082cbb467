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

/// `tolerance-calibration` (the README's tolerance figures): on a few hundred calls the kernel path
/// is within the rule everywhere and the kernel 0.2 % off is refused on a good share.
#[test]
fn calibration_admits_the_kernel_path_and_refuses_a_biased_one() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_tolerance-calibration"))
        .args(["300", "small"])
        .output()
        .expect("runs");
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(output.status.success(), "{stdout}");
    let refused = |line: &str| -> usize {
        let line = stdout
            .lines()
            .find(|l| l.trim_start().starts_with(line))
            .unwrap_or_else(|| panic!("no line for {line}: {stdout}"));
        line.rsplit("refused ").next().unwrap().parse().unwrap()
    };
    assert_eq!(refused("the kernel path: "), 0, "{stdout}");
    assert!(
        refused("the kernel path, out 0.2 % too large: ") >= 100,
        "{stdout}"
    );
    let usage = std::process::Command::new(env!("CARGO_BIN_EXE_tolerance-calibration"))
        .output()
        .expect("runs");
    assert_eq!(usage.status.code(), Some(2));
}
