//! Property tests of the kernel path over random valid calls at small shapes, covering every
//! feature and their combinations: the kernel against the f64 reference under the tolerance rule
//! (caches after an append bit for bit), split counts agreeing on the LSE and the caches and each
//! meeting the tolerance rule, pack-GQA changing no bit, paged and contiguous caches agreeing bit
//! for bit.
//!
//! `cargo test` runs the C with its index checks on (build.rs: FA3_HOST_CHECKED follows Rust's
//! debug assertions).

use fa3conform::call::{Dtype, KvCacheCall, PyValue};
use fa3conform::cases::{self, Options};
use fa3conform::fuzzing::oracles::differential::kernel_vs_reference;
use fa3conform::kernel::{self, KernelOptions, KernelOutput, MetadataSource};
use fa3conform::reference::Stack;
use fa3conform::tensor::{DEFAULT_MEMORY_CAP, HostTensor, Tensors, materialise};
use ndarray::{ArrayD, IxDyn};
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The kernel's result of a generated call of `stack`, judged against the reference by the
/// differential oracle (a mismatch panics with the call as JSON).
fn check_against_reference(
    stack: Stack,
    seed: u64,
    metadata: MetadataSource,
) -> Result<(), TestCaseError> {
    let options = Options {
        mla: false,
        ..Options::small(stack)
    };
    let call = cases::random_call(&mut ChaCha8Rng::seed_from_u64(seed), &options);
    kernel_vs_reference(&call, stack, &[metadata])
        .map_err(|skip| TestCaseError::reject(format!("{skip:?}")))
}

/// The shape and feature choices of one generated call.
#[derive(Clone, Debug)]
struct Case {
    seed: u64,
    dtype: Dtype,
    batch: usize,
    heads_k: usize,
    group: usize,
    head_dim: usize,
    seqlen_q: usize,
    varlen_q: bool,
    /// Page size, or `None` for a contiguous cache.
    page_size: Option<usize>,
    capacity_blocks: usize,
    cache_seqlens: bool,
    leftpad: bool,
    batch_idx: bool,
    /// New keys per batch (append-KV), with `cu_seqlens_k_new` when varlen.
    new_keys: Option<(usize, bool)>,
    /// Rotary dim and interleaving (only with new keys).
    rotary: Option<(usize, bool)>,
    causal: bool,
    window: Option<(i64, i64)>,
    chunk: i64,
    softcap: f64,
    sinks: bool,
}

fn case() -> impl Strategy<Value = Case> {
    let shape = (
        any::<u64>(),
        prop_oneof![Just(Dtype::Bfloat16), Just(Dtype::Float16)],
        1usize..=3,
        1usize..=2,
        prop_oneof![Just(1usize), Just(2), Just(4)],
        prop_oneof![Just(64usize), Just(128)],
        1usize..=12,
        any::<bool>(),
        prop_oneof![Just(None), Just(Some(16usize)), Just(Some(64))],
        1usize..=3,
    );
    let features = (
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        prop::option::of((1usize..=4, any::<bool>())),
        prop::option::of((prop_oneof![Just(16usize), Just(32)], any::<bool>())),
        any::<bool>(),
        prop::option::of((-1i64..40, -1i64..8)),
        prop_oneof![3 => Just(0i64), 1 => 1i64..48],
        prop_oneof![3 => Just(0.0), 1 => Just(5.0)],
        prop::bool::weighted(0.2),
    );
    (shape, features).prop_map(|(s, f)| Case {
        seed: s.0,
        dtype: s.1,
        batch: s.2,
        heads_k: s.3,
        group: s.4,
        head_dim: s.5,
        seqlen_q: s.6,
        varlen_q: s.7,
        page_size: s.8,
        capacity_blocks: s.9,
        cache_seqlens: f.0 || f.3.is_some() || s.8.is_some(),
        leftpad: f.1,
        batch_idx: f.2,
        new_keys: f.3,
        rotary: f.3.and(f.4),
        causal: f.5,
        window: f.6,
        chunk: f.7,
        softcap: f.8,
        sinks: f.9,
    })
}

impl Case {
    fn capacity(&self) -> usize {
        self.capacity_blocks * self.page_size.unwrap_or(40)
    }

    fn call(&self) -> KvCacheCall {
        let (b, hk, d) = (self.batch, self.heads_k, self.head_dim);
        let h = hk * self.group;
        let mut call = KvCacheCall {
            seed: self.seed,
            ..KvCacheCall::default()
        };
        if self.varlen_q {
            let total = (b * self.seqlen_q).div_ceil(2).max(1);
            call.set("q", PyValue::tensor(self.dtype, &[total, h, d]))
                .set("cu_seqlens_q", PyValue::tensor(Dtype::Int32, &[b + 1]))
                .set("max_seqlen_q", PyValue::Int(self.seqlen_q as i64));
        } else {
            call.set("q", PyValue::tensor(self.dtype, &[b, self.seqlen_q, h, d]));
        }
        // A spare cache row when cache_batch_idx picks the rows (so that it has a choice); mate
        // asserts batch_size == batch_size_k without it (musa-fa3.md F-17). The materialiser draws
        // cache_batch_idx from k_cache.shape[0], which is the page count when paged: only
        // contiguous caches get one.
        let batch_idx = self.batch_idx && self.page_size.is_none();
        let rows = b + usize::from(batch_idx);
        let capacity = self.capacity();
        let cache_shape = match self.page_size {
            Some(page) => {
                let per_seq = capacity / page;
                call.set(
                    "page_table",
                    PyValue::tensor(Dtype::Int32, &[rows, per_seq]),
                );
                [rows * per_seq, page, hk, d]
            }
            None => [rows, capacity, hk, d],
        };
        call.set("k_cache", PyValue::tensor(self.dtype, &cache_shape))
            .set("v_cache", PyValue::tensor(self.dtype, &cache_shape));
        if self.cache_seqlens {
            call.set("cache_seqlens", PyValue::tensor(Dtype::Int32, &[b]));
        }
        if self.leftpad && self.cache_seqlens {
            call.set("cache_leftpad", PyValue::tensor(Dtype::Int32, &[b]));
        }
        if batch_idx {
            call.set("cache_batch_idx", PyValue::tensor(Dtype::Int32, &[b]));
        }
        if let Some((new, varlen)) = self.new_keys {
            let rows: &[usize] = if varlen { &[b * new] } else { &[b, new] };
            call.set("k", PyValue::tensor(self.dtype, &[rows, &[hk, d]].concat()))
                .set("v", PyValue::tensor(self.dtype, &[rows, &[hk, d]].concat()));
            if varlen {
                call.set("cu_seqlens_k_new", PyValue::tensor(Dtype::Int32, &[b + 1]));
            }
            if let Some((rotary_dim, interleaved)) = self.rotary {
                let rows = capacity + self.seqlen_q + new;
                call.set(
                    "rotary_cos",
                    PyValue::tensor(self.dtype, &[rows, rotary_dim / 2]),
                )
                .set(
                    "rotary_sin",
                    PyValue::tensor(self.dtype, &[rows, rotary_dim / 2]),
                )
                .set("rotary_interleaved", PyValue::Bool(interleaved));
            }
        }
        call.set("causal", PyValue::Bool(self.causal));
        if let Some((left, right)) = self.window {
            call.set(
                "window_size",
                PyValue::Tuple(vec![PyValue::Int(left), PyValue::Int(right)]),
            );
        }
        call.set("attention_chunk", PyValue::Int(self.chunk))
            .set("softcap", PyValue::Float(self.softcap));
        if self.sinks {
            call.set("sinks", PyValue::tensor(Dtype::Bfloat16, &[h]));
        }
        call
    }
}

fn run(call: &KvCacheCall, tensors: &Tensors, metadata: MetadataSource) -> KernelOutput {
    let options = KernelOptions {
        metadata,
        ..KernelOptions::default()
    };
    kernel::run(call, tensors, &options).expect("a valid call runs")
}

fn bits_equal(a: &HostTensor, b: &HostTensor) -> bool {
    a.shape() == b.shape()
        && a.data
            .iter()
            .zip(b.data.iter())
            .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}

/// Two kernel results of the same call that differ only in how the KV range was partitioned:
/// LSE within f32 noise (row sums keep P in f32), caches bit for bit. `out` is not compared here:
/// P is rounded to the input dtype against each split's own running maximum, as on the device,
/// so split counts move `out` by more than a few units in the last place; each result meets the
/// tolerance rule against the reference instead.
fn assert_same_lse_and_caches(a: &KernelOutput, b: &KernelOutput, what: &str) {
    for (x, y) in a.lse.data.iter().zip(b.lse.data.iter()) {
        let same_infinity = x.is_infinite() && x == y;
        assert!(
            same_infinity || (x - y).abs() <= 1e-4 * (1.0 + x.abs()),
            "{what}: lse {x} vs {y}"
        );
    }
    for (x, y, cache) in [
        (&a.k_cache, &b.k_cache, "k_cache"),
        (&a.v_cache, &b.v_cache, "v_cache"),
    ] {
        let same = match (x, y) {
            (Some(x), Some(y)) => bits_equal(x, y),
            (x, y) => x.is_none() && y.is_none(),
        };
        assert!(same, "{what}: {cache}");
    }
}

/// The same call with the paged cache gathered into a contiguous one (row r of the new cache is
/// page-table row r's pages in order).
fn contiguous_equivalent(call: &KvCacheCall, tensors: &Tensors) -> (KvCacheCall, Tensors) {
    let table = &tensors["page_table"];
    let (rows, per_seq) = (table.shape()[0], table.shape()[1]);
    let pages = table.ints();
    let mut call = call.clone();
    let mut tensors = tensors.clone();
    for name in ["k_cache", "v_cache"] {
        let paged = &tensors[name];
        let [_, page, heads, dim] = paged.shape().try_into().expect("4-D cache");
        let gathered = ArrayD::from_shape_fn(IxDyn(&[rows, per_seq * page, heads, dim]), |i| {
            let page_index = pages[i[0] * per_seq + i[1] / page] as usize;
            paged.data[[page_index, i[1] % page, i[2], i[3]]]
        });
        call.set(name, PyValue::tensor(paged.dtype, gathered.shape()));
        tensors.insert(
            name.to_string(),
            HostTensor {
                dtype: paged.dtype,
                data: gathered,
            },
        );
    }
    call.unset("page_table");
    tensors.remove("page_table");
    (call, tensors)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn musa_calls_match_the_reference(seed in any::<u64>(), computed in any::<bool>()) {
        let metadata = if computed { MetadataSource::Computed } else { MetadataSource::None };
        check_against_reference(Stack::Musa, seed, metadata)?;
    }

    #[test]
    fn cuda_calls_with_fp8_and_qv_match_the_reference(seed in any::<u64>(), computed in any::<bool>()) {
        let metadata = if computed { MetadataSource::Computed } else { MetadataSource::None };
        check_against_reference(Stack::Fa3, seed, metadata.clone())?;
        check_against_reference(Stack::SglKernel, seed, metadata)?;
    }

    #[test]
    fn one_split_is_bit_identical_and_every_split_count_meets_the_tolerance(case in case(), splits in 2i64..=16) {
        let call = case.call();
        let tensors = materialise(&call, DEFAULT_MEMORY_CAP).unwrap();
        let unsplit = run(&call, &tensors, MetadataSource::None);
        let mut with_one = call.clone();
        with_one.set("num_splits", PyValue::Int(1));
        let one = run(&with_one, &tensors, MetadataSource::Computed);
        prop_assert!(bits_equal(&one.out, &unsplit.out), "num_splits=1 with metadata");
        prop_assert!(bits_equal(&one.lse, &unsplit.lse));
        let mut split = call.clone();
        split.set("num_splits", PyValue::Int(splits));
        let split_out = run(&split, &tensors, MetadataSource::Computed);
        assert_same_lse_and_caches(&split_out, &unsplit, &format!("num_splits={splits}"));
        // The heuristic's own choice (num_splits = 0).
        let heuristic = run(&call, &tensors, MetadataSource::Computed);
        assert_same_lse_and_caches(&heuristic, &unsplit, "heuristic splits");
        for call in [&split, &call] {
            kernel_vs_reference(call, Stack::Musa, &[MetadataSource::Computed])
                .map_err(|skip| TestCaseError::reject(format!("{skip:?}")))?;
        }
    }

    #[test]
    fn pack_gqa_does_not_change_a_bit(case in case()) {
        let call = case.call();
        let tensors = materialise(&call, DEFAULT_MEMORY_CAP).unwrap();
        let mut packed = call.clone();
        packed.set("pack_gqa", PyValue::Bool(true));
        let mut unpacked = call.clone();
        unpacked.set("pack_gqa", PyValue::Bool(false));
        let a = run(&packed, &tensors, MetadataSource::None);
        let b = run(&unpacked, &tensors, MetadataSource::None);
        prop_assert!(bits_equal(&a.out, &b.out));
        prop_assert!(bits_equal(&a.lse, &b.lse));
    }

    #[test]
    fn paged_and_contiguous_caches_agree_bit_for_bit(case in case(), page in prop_oneof![Just(16usize), Just(64)]) {
        let case = Case { page_size: Some(page), cache_seqlens: true, ..case };
        let call = case.call();
        let tensors = materialise(&call, DEFAULT_MEMORY_CAP).unwrap();
        let paged = run(&call, &tensors, MetadataSource::None);
        let (flat_call, flat_tensors) = contiguous_equivalent(&call, &tensors);
        let flat = run(&flat_call, &flat_tensors, MetadataSource::None);
        prop_assert!(bits_equal(&paged.out, &flat.out));
        prop_assert!(bits_equal(&paged.lse, &flat.lse));
    }
}
