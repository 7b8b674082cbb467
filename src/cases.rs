//! Seeded random *valid* calls of `flash_attn_with_kvcache`, small enough to evaluate in
//! milliseconds, covering every feature and their combinations.
//!
//! [`random_call`] is deterministic in the rng. Every call it makes passes the checks of the stack
//! named in [`Options::stack`] (musa-fa3.md §5, cuda-fa3.md B): for MUSA that means f16/bf16,
//! head-dim pairs mate has kernels for, `qv` only in the MLA shape, bf16 `sinks` of shape `(h,)`;
//! FA3 and sgl-kernel calls may also use fp8 with descales and `qv` (d ≤ 64, dv ≥ 256).
//! Floating-point tensors are given by shape only (the materialiser draws their data from the
//! call's seed); index tensors carry values that describe a consistent call: cache lengths within
//! capacity, page tables that are permutations of distinct pages, distinct `cache_batch_idx`.
//! Every batch has at least one query, so every appended token is attended and written.

use crate::call::{Dtype, KvCacheCall, PyValue, TensorArg};
use crate::reference::Stack;
use rand::Rng;
use rand::seq::SliceRandom;

/// What calls to generate.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    pub stack: Stack,
    pub max_batch: usize,
    pub max_seqlen_q: usize,
    /// Largest cache capacity per sequence.
    pub max_seqlen_k: usize,
    pub max_heads_k: usize,
    /// Largest number of query heads per KV head.
    pub max_group: usize,
    /// fp8 inputs (FA3 and sgl-kernel only).
    pub fp8: bool,
    /// MUSA's MLA shape (`q` 64, `qv` 512, page size 64). The call carries no `scheduler_metadata`:
    /// its workspace depends on the device, so kernel harnesses add it.
    pub mla: bool,
}

impl Options {
    /// Small calls (at most a few thousand scores per head) for `stack`, with every feature it has.
    pub fn small(stack: Stack) -> Options {
        Options {
            stack,
            max_batch: 3,
            max_seqlen_q: 8,
            max_seqlen_k: 24,
            max_heads_k: 3,
            max_group: 4,
            fp8: stack != Stack::Musa,
            mla: stack == Stack::Musa,
        }
    }
}

fn int32(shape: &[usize], values: Vec<i64>) -> PyValue {
    PyValue::Tensor(TensorArg::with_ints(Dtype::Int32, shape, values))
}

fn offsets(lengths: &[usize]) -> Vec<i64> {
    let mut cu = vec![0i64];
    for &len in lengths {
        cu.push(cu.last().copied().unwrap_or(0) + len as i64);
    }
    cu
}

/// `(d, dv)` pairs the stack has kernels for, raw (mate rounds them up, musa-fa3.md §6.3).
fn head_dims<R: Rng + ?Sized>(rng: &mut R, stack: Stack, fp8: bool) -> (usize, usize) {
    const MUSA: [(usize, usize); 7] = [
        (32, 32),
        (64, 64),
        (40, 56),
        (128, 128),
        (96, 112),
        (192, 128),
        (160, 192),
    ];
    const CUDA: [(usize, usize); 6] = [
        (32, 32),
        (64, 64),
        (40, 40),
        (128, 128),
        (192, 128),
        (96, 96),
    ];
    const CUDA_FP8: [(usize, usize); 3] = [(32, 32), (64, 64), (128, 128)];
    let pairs: &[(usize, usize)] = match (stack, fp8) {
        (Stack::Musa, _) => &MUSA,
        (_, true) => &CUDA_FP8,
        (_, false) => &CUDA,
    };
    *pairs.choose(rng).expect("non-empty")
}

/// A random call for `options.stack`.
pub fn random_call<R: Rng + ?Sized>(rng: &mut R, options: &Options) -> KvCacheCall {
    let stack = options.stack;
    if stack == Stack::Musa && options.mla && rng.gen_bool(0.1) {
        return mla_call(rng, options);
    }
    let mut call = KvCacheCall {
        seed: rng.r#gen(),
        ..KvCacheCall::default()
    };
    let fp8 = options.fp8 && stack != Stack::Musa && rng.gen_bool(0.2);
    let dtype = if fp8 {
        Dtype::Float8E4m3fn
    } else if rng.gen_bool(0.5) {
        Dtype::Bfloat16
    } else {
        Dtype::Float16
    };
    let qv = stack != Stack::Musa && !fp8 && rng.gen_bool(0.1);
    let (d, dv) = if qv {
        (*[32, 64].choose(rng).expect("non-empty"), 256)
    } else {
        head_dims(rng, stack, fp8)
    };
    let b = rng.gen_range(1..=options.max_batch);
    let hk = rng.gen_range(1..=options.max_heads_k);
    let h = hk * rng.gen_range(1..=options.max_group);

    // Queries: fixed length or packed with cu_seqlens_q; every batch has at least one row.
    let varlen_q = rng.gen_bool(0.3);
    let q_lens: Vec<usize> = if varlen_q {
        (0..b)
            .map(|_| rng.gen_range(1..=options.max_seqlen_q))
            .collect()
    } else {
        vec![rng.gen_range(1..=options.max_seqlen_q); b]
    };
    let seqlen_q = q_lens.iter().copied().max().unwrap_or(1);
    let total_q: usize = q_lens.iter().sum();

    // Cache: contiguous rows or pages of any size (1, non-powers of two).
    let paged = rng.gen_bool(0.4);
    let batch_idx = rng.gen_bool(0.25);
    let kv_rows = if batch_idx {
        b + rng.gen_range(0..=2)
    } else {
        b
    };
    let (capacity, page_size, pages_per_seq) = if paged {
        let page = *[1, 2, 3, 5, 8, 16].choose(rng).expect("non-empty");
        let per = rng.gen_range(1..=(options.max_seqlen_k / page).max(1));
        (page * per, page, per)
    } else {
        (rng.gen_range(1..=options.max_seqlen_k), 1, 0)
    };
    // Append needs the queries to fit in the cache (cuda-fa3.md B.27c).
    let new_kv = seqlen_q <= capacity && rng.gen_bool(0.4);
    let new_lens: Vec<usize> = if new_kv {
        if rng.gen_bool(0.3) {
            (0..b)
                .map(|_| rng.gen_range(0..=capacity.min(seqlen_q + 2)))
                .collect()
        } else {
            vec![rng.gen_range(1..=capacity.min(seqlen_q + 2)); b]
        }
    } else {
        vec![0; b]
    };
    let varlen_new = new_kv && (new_lens.windows(2).any(|w| w[0] != w[1]) || rng.gen_bool(0.2));

    // Lengths: cache_seqlens (tensor or int), leftpad. Appends need cache_seqlens.
    let use_seqlens = new_kv || rng.gen_bool(0.7);
    let seqused: Vec<usize> = (0..b)
        .map(|i| rng.gen_range(0..=capacity - new_lens[i]))
        .collect();
    let int_expansion_ok = match stack {
        Stack::Fa3 => !varlen_q,
        Stack::Musa | Stack::SglKernel => !paged && kv_rows == b,
    };
    let int_seqlens = use_seqlens && int_expansion_ok && rng.gen_bool(0.15);
    let seqused = if int_seqlens {
        let common = *seqused.iter().min().expect("b ≥ 1");
        vec![common; b]
    } else {
        seqused
    };
    let leftpad: Option<Vec<usize>> = (use_seqlens && rng.gen_bool(0.25))
        .then(|| seqused.iter().map(|&s| rng.gen_range(0..=s)).collect());

    let q_shape: Vec<usize> = if varlen_q {
        vec![total_q, h, d]
    } else {
        vec![b, seqlen_q, h, d]
    };
    call.set("q", PyValue::tensor(dtype, &q_shape));
    if paged {
        // Distinct pages in random order, with a few spare pages nobody uses.
        let num_pages = kv_rows * pages_per_seq + rng.gen_range(0..=3);
        let mut pages: Vec<i64> = (0..num_pages as i64).collect();
        pages.shuffle(rng);
        pages.truncate(kv_rows * pages_per_seq);
        call.set(
            "k_cache",
            PyValue::tensor(dtype, &[num_pages, page_size, hk, d]),
        )
        .set(
            "v_cache",
            PyValue::tensor(dtype, &[num_pages, page_size, hk, dv]),
        )
        .set("page_table", int32(&[kv_rows, pages_per_seq], pages));
    } else {
        call.set(
            "k_cache",
            PyValue::tensor(dtype, &[kv_rows, capacity, hk, d]),
        )
        .set(
            "v_cache",
            PyValue::tensor(dtype, &[kv_rows, capacity, hk, dv]),
        );
    }
    if new_kv {
        let total_new: usize = new_lens.iter().sum();
        if varlen_new {
            call.set("k", PyValue::tensor(dtype, &[total_new, hk, d]))
                .set("v", PyValue::tensor(dtype, &[total_new, hk, dv]))
                .set("cu_seqlens_k_new", int32(&[b + 1], offsets(&new_lens)));
        } else {
            call.set("k", PyValue::tensor(dtype, &[b, new_lens[0], hk, d]))
                .set("v", PyValue::tensor(dtype, &[b, new_lens[0], hk, dv]));
        }
    }
    if qv {
        let shape: Vec<usize> = q_shape[..q_shape.len() - 1]
            .iter()
            .copied()
            .chain([dv])
            .collect();
        call.set("qv", PyValue::tensor(dtype, &shape));
    }
    if new_kv && d >= 16 && rng.gen_bool(0.5) {
        let rotary_dim = 16 * rng.gen_range(1..=d / 16);
        // Rows for every new token and advancing query row from any start ≤ capacity.
        let longest = seqlen_q.max(new_lens.iter().copied().max().unwrap_or(0));
        let seqlen_ro = capacity + longest + rng.gen_range(0..=2);
        call.set(
            "rotary_cos",
            PyValue::tensor(dtype, &[seqlen_ro, rotary_dim / 2]),
        )
        .set(
            "rotary_sin",
            PyValue::tensor(dtype, &[seqlen_ro, rotary_dim / 2]),
        )
        .set("rotary_interleaved", PyValue::Bool(rng.gen_bool(0.5)));
        if rng.gen_bool(0.3) {
            let starts = (0..b).map(|_| rng.gen_range(0..=capacity) as i64).collect();
            call.set("rotary_seqlens", int32(&[b], starts));
        }
    }
    if use_seqlens {
        let value = if int_seqlens {
            PyValue::Int(seqused[0] as i64)
        } else {
            int32(&[b], seqused.iter().map(|&s| s as i64).collect())
        };
        call.set("cache_seqlens", value);
    }
    if let Some(leftpad) = leftpad {
        call.set(
            "cache_leftpad",
            int32(&[b], leftpad.iter().map(|&l| l as i64).collect()),
        );
    }
    if batch_idx {
        let mut rows: Vec<i64> = (0..kv_rows as i64).collect();
        rows.shuffle(rng);
        rows.truncate(b);
        call.set("cache_batch_idx", int32(&[b], rows));
    }
    if varlen_q {
        call.set("cu_seqlens_q", int32(&[b + 1], offsets(&q_lens)))
            .set("max_seqlen_q", PyValue::Int(seqlen_q as i64));
    }
    set_mask(rng, &mut call, capacity);
    if rng.gen_bool(0.25) {
        call.set(
            "softcap",
            PyValue::Float(rng.gen_range(1..=40) as f64 / 2.0),
        );
    }
    if stack != Stack::Fa3 && rng.gen_bool(0.25) {
        call.set("sinks", PyValue::tensor(Dtype::Bfloat16, &[h]));
    }
    if fp8 {
        for name in ["q_descale", "k_descale", "v_descale"] {
            if rng.gen_bool(0.7) {
                call.set(name, PyValue::tensor(Dtype::Float32, &[b, hk]));
            }
        }
    }
    if rng.gen_bool(0.2) {
        call.set("softmax_scale", PyValue::Float(rng.gen_range(0.05..0.5)));
    }
    set_scheduling(rng, &mut call);
    call.set("return_softmax_lse", PyValue::Bool(true));
    call
}

/// causal, local windows (either side, possibly larger than the cache) and attention_chunk.
fn set_mask<R: Rng + ?Sized>(rng: &mut R, call: &mut KvCacheCall, capacity: usize) {
    let causal = rng.gen_bool(0.4);
    if causal {
        call.set("causal", PyValue::Bool(true));
    }
    if rng.gen_bool(0.3) {
        let side = |rng: &mut R| {
            if rng.gen_bool(0.3) {
                -1
            } else {
                rng.gen_range(0..=capacity as i64 + 1)
            }
        };
        let window = PyValue::Tuple(vec![PyValue::Int(side(rng)), PyValue::Int(side(rng))]);
        call.set("window_size", window);
    }
    if rng.gen_bool(0.2) {
        call.set(
            "attention_chunk",
            PyValue::Int(rng.gen_range(1..=2 * capacity as i64)),
        );
    }
}

/// Knobs that change how the work is split, never the result.
fn set_scheduling<R: Rng + ?Sized>(rng: &mut R, call: &mut KvCacheCall) {
    if rng.gen_bool(0.3) {
        call.set("num_splits", PyValue::Int(rng.gen_range(0..=4)));
    }
    if rng.gen_bool(0.3) {
        call.set("pack_gqa", PyValue::Bool(rng.gen_bool(0.5)));
    }
}

/// MUSA's MLA decode shape: `q` (rope) 64, `qv` (latent) 512, one KV head, paged with 64-token pages.
fn mla_call<R: Rng + ?Sized>(rng: &mut R, options: &Options) -> KvCacheCall {
    let mut call = KvCacheCall {
        seed: rng.r#gen(),
        ..KvCacheCall::default()
    };
    let dtype = if rng.gen_bool(0.5) {
        Dtype::Bfloat16
    } else {
        Dtype::Float16
    };
    let b = rng.gen_range(1..=options.max_batch);
    let h = rng.gen_range(1..=options.max_heads_k * options.max_group);
    let sq = rng.gen_range(1..=options.max_seqlen_q.min(2));
    let pages_per_seq = rng.gen_range(1..=2);
    let num_pages = b * pages_per_seq;
    let mut pages: Vec<i64> = (0..num_pages as i64).collect();
    pages.shuffle(rng);
    let seqused = (0..b)
        .map(|_| rng.gen_range(1..=64 * pages_per_seq) as i64)
        .collect();
    call.set("q", PyValue::tensor(dtype, &[b, sq, h, 64]))
        .set("k_cache", PyValue::tensor(dtype, &[num_pages, 64, 1, 64]))
        .set("v_cache", PyValue::tensor(dtype, &[num_pages, 64, 1, 512]))
        .set("qv", PyValue::tensor(dtype, &[b, sq, h, 512]))
        .set("page_table", int32(&[b, pages_per_seq], pages))
        .set("cache_seqlens", int32(&[b], seqused));
    if rng.gen_bool(0.5) {
        call.set("causal", PyValue::Bool(true));
    }
    call.set("return_softmax_lse", PyValue::Bool(true));
    call
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::{Precision, run};
    use crate::tensor::materialise;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn deterministic_in_the_rng() {
        let options = Options::small(Stack::Fa3);
        let a = random_call(&mut ChaCha8Rng::seed_from_u64(9), &options);
        let b = random_call(&mut ChaCha8Rng::seed_from_u64(9), &options);
        assert_eq!(a, b);
    }

    #[test]
    fn calls_bind_and_evaluate_on_every_stack() {
        for stack in Stack::ALL {
            let options = Options::small(stack);
            let mut rng = ChaCha8Rng::seed_from_u64(stack as u64);
            for _ in 0..200 {
                let call = random_call(&mut rng, &options);
                let tensors = materialise(&call, 1 << 28).expect("materialises");
                if let Err(e) = run(&call, &tensors, stack, Precision::Exact) {
                    panic!("{e}: {}", crate::spec::call_to_json(&call));
                }
            }
        }
    }

    #[test]
    fn musa_calls_stay_within_what_mate_accepts() {
        let options = Options::small(Stack::Musa);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let round = |x: usize| {
            [64, 128, 192, 256]
                .into_iter()
                .find(|&r| x <= r)
                .unwrap_or(512)
        };
        for _ in 0..300 {
            let call = random_call(&mut rng, &options);
            let q = call.passed("q").and_then(PyValue::as_tensor).unwrap();
            assert!(matches!(q.dtype, Dtype::Float16 | Dtype::Bfloat16));
            let v = call.passed("v_cache").and_then(PyValue::as_tensor).unwrap();
            let (d, dv) = (*q.shape.last().unwrap(), *v.shape.last().unwrap());
            if let Some(qv) = call.passed("qv").and_then(PyValue::as_tensor) {
                assert_eq!((d, *qv.shape.last().unwrap()), (64, 512));
                continue;
            }
            let pair = (round(d), round(dv));
            assert!(
                [(64, 64), (128, 128), (192, 128), (192, 192), (256, 256)].contains(&pair),
                "{pair:?}"
            );
            if let Some(sinks) = call.passed("sinks").and_then(PyValue::as_tensor) {
                assert_eq!(sinks.dtype, Dtype::Bfloat16);
                assert_eq!(sinks.shape, [q.shape[q.shape.len() - 2]]);
            }
            for name in ["q_descale", "k_descale", "v_descale"] {
                assert!(call.passed(name).is_none());
            }
        }
    }
}
