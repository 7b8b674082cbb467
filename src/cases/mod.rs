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
//!
//! [`device_quirk_call`] builds valid MUSA calls that meet the device's departures from clean
//! attention, which these small random calls never reach.
//!
//! [`Mutation`]s then move a valid call towards an error site (the `validation` suite and the
//! `validate` fuzz target).

mod device;
mod mutation;

pub use device::device_quirk_call;
pub use mutation::{Mutation, ShapeChange};

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
    /// Largest head dim (`d` and `dv`) of the drawn pairs; `qv`'s `dv` of 256 aside.
    pub max_head_dim: usize,
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
            max_head_dim: usize::MAX,
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

/// `(d, dv)` pairs the stack has kernels for, raw (mate rounds them up, musa-fa3.md §6.3), with
/// neither above `max_head_dim`.
fn head_dims<R: Rng + ?Sized>(
    rng: &mut R,
    stack: Stack,
    fp8: bool,
    max_head_dim: usize,
) -> (usize, usize) {
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
    let fitting: Vec<(usize, usize)> = pairs
        .iter()
        .copied()
        .filter(|&(d, dv)| d.max(dv) <= max_head_dim)
        .collect();
    *fitting
        .choose(rng)
        .expect("max_head_dim admits the smallest pair, 32")
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
    // Every draw happens in this order, so a seed (or a fuzz input) keeps meaning the same call.
    let sizes = Sizes::draw(rng, options);
    let queries = Queries::draw(rng, sizes.b, options.max_seqlen_q);
    let cache = Cache::draw(rng, sizes.b, options.max_seqlen_k);
    let append = Append::draw(rng, sizes.b, queries.seqlen, cache.capacity);
    let lengths = Lengths::draw(rng, stack, &queries, &cache, &append);

    let q_shape = queries.shape(&sizes);
    call.set("q", PyValue::tensor(sizes.dtype, &q_shape));
    cache.set_tensors(rng, &mut call, &sizes);
    append.set_tensors(&mut call, &sizes);
    if sizes.qv {
        let shape: Vec<usize> = q_shape[..q_shape.len() - 1]
            .iter()
            .copied()
            .chain([sizes.dv])
            .collect();
        call.set("qv", PyValue::tensor(sizes.dtype, &shape));
    }
    set_rotary(rng, &mut call, &sizes, &queries, &cache, &append);
    lengths.set_tensors(&mut call);
    cache.set_batch_idx(rng, &mut call, sizes.b);
    queries.set_varlen(&mut call);
    set_mask(rng, &mut call, cache.capacity);
    set_score_options(rng, &mut call, stack, &sizes);
    set_scheduling(rng, &mut call);
    call.set("return_softmax_lse", PyValue::Bool(true));
    call
}

/// Element type, head dims, batch and head counts.
struct Sizes {
    dtype: Dtype,
    fp8: bool,
    /// `qv` is passed (FA3 and sgl-kernel: d ≤ 64, dv = 256).
    qv: bool,
    d: usize,
    dv: usize,
    b: usize,
    hk: usize,
    h: usize,
}

impl Sizes {
    fn draw<R: Rng + ?Sized>(rng: &mut R, options: &Options) -> Sizes {
        let stack = options.stack;
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
            head_dims(rng, stack, fp8, options.max_head_dim)
        };
        let b = rng.gen_range(1..=options.max_batch);
        let hk = rng.gen_range(1..=options.max_heads_k);
        let h = hk * rng.gen_range(1..=options.max_group);
        Sizes {
            dtype,
            fp8,
            qv,
            d,
            dv,
            b,
            hk,
            h,
        }
    }
}

/// Query rows per batch: one fixed length, or packed with `cu_seqlens_q`; every batch has at least
/// one row.
struct Queries {
    varlen: bool,
    lens: Vec<usize>,
    /// The longest (`max_seqlen_q`).
    seqlen: usize,
    total: usize,
}

impl Queries {
    fn draw<R: Rng + ?Sized>(rng: &mut R, b: usize, max_seqlen_q: usize) -> Queries {
        let varlen = rng.gen_bool(0.3);
        let lens: Vec<usize> = if varlen {
            (0..b).map(|_| rng.gen_range(1..=max_seqlen_q)).collect()
        } else {
            vec![rng.gen_range(1..=max_seqlen_q); b]
        };
        Queries {
            varlen,
            seqlen: lens.iter().copied().max().unwrap_or(1),
            total: lens.iter().sum(),
            lens,
        }
    }

    /// `q`'s shape: `(total_q, h, d)` packed, else `(b, seqlen_q, h, d)`.
    fn shape(&self, sizes: &Sizes) -> Vec<usize> {
        if self.varlen {
            vec![self.total, sizes.h, sizes.d]
        } else {
            vec![sizes.b, self.seqlen, sizes.h, sizes.d]
        }
    }

    fn set_varlen(&self, call: &mut KvCacheCall) {
        if self.varlen {
            call.set(
                "cu_seqlens_q",
                int32(&[self.lens.len() + 1], offsets(&self.lens)),
            )
            .set("max_seqlen_q", PyValue::Int(self.seqlen as i64));
        }
    }
}

/// The KV cache: contiguous rows or pages of any size (1, non-powers of two), possibly with more
/// rows than batches, addressed through `cache_batch_idx`.
struct Cache {
    paged: bool,
    batch_idx: bool,
    /// Rows of the cache (sequences it holds).
    kv_rows: usize,
    /// Keys per sequence.
    capacity: usize,
    page_size: usize,
    pages_per_seq: usize,
}

impl Cache {
    fn draw<R: Rng + ?Sized>(rng: &mut R, b: usize, max_seqlen_k: usize) -> Cache {
        let paged = rng.gen_bool(0.4);
        let batch_idx = rng.gen_bool(0.25);
        let kv_rows = if batch_idx {
            b + rng.gen_range(0..=2)
        } else {
            b
        };
        let (capacity, page_size, pages_per_seq) = if paged {
            let page = *[1, 2, 3, 5, 8, 16].choose(rng).expect("non-empty");
            let per = rng.gen_range(1..=(max_seqlen_k / page).max(1));
            (page * per, page, per)
        } else {
            (rng.gen_range(1..=max_seqlen_k), 1, 0)
        };
        Cache {
            paged,
            batch_idx,
            kv_rows,
            capacity,
            page_size,
            pages_per_seq,
        }
    }

    /// `k_cache`, `v_cache` and, paged, a `page_table` of distinct pages in random order with a few
    /// spare pages nobody uses.
    fn set_tensors<R: Rng + ?Sized>(&self, rng: &mut R, call: &mut KvCacheCall, sizes: &Sizes) {
        let (dtype, hk, d, dv) = (sizes.dtype, sizes.hk, sizes.d, sizes.dv);
        if self.paged {
            let used = self.kv_rows * self.pages_per_seq;
            let num_pages = used + rng.gen_range(0..=3);
            let mut pages: Vec<i64> = (0..num_pages as i64).collect();
            pages.shuffle(rng);
            pages.truncate(used);
            call.set(
                "k_cache",
                PyValue::tensor(dtype, &[num_pages, self.page_size, hk, d]),
            )
            .set(
                "v_cache",
                PyValue::tensor(dtype, &[num_pages, self.page_size, hk, dv]),
            )
            .set(
                "page_table",
                int32(&[self.kv_rows, self.pages_per_seq], pages),
            );
        } else {
            call.set(
                "k_cache",
                PyValue::tensor(dtype, &[self.kv_rows, self.capacity, hk, d]),
            )
            .set(
                "v_cache",
                PyValue::tensor(dtype, &[self.kv_rows, self.capacity, hk, dv]),
            );
        }
    }

    /// `cache_batch_idx`: distinct rows in random order.
    fn set_batch_idx<R: Rng + ?Sized>(&self, rng: &mut R, call: &mut KvCacheCall, b: usize) {
        if self.batch_idx {
            let mut rows: Vec<i64> = (0..self.kv_rows as i64).collect();
            rows.shuffle(rng);
            rows.truncate(b);
            call.set("cache_batch_idx", int32(&[b], rows));
        }
    }
}

/// The keys and values the call appends (`k`, `v`), when it `appends`.
struct Append {
    appends: bool,
    /// New keys per batch (zeros without an append).
    lens: Vec<usize>,
    /// Packed with `cu_seqlens_k_new`.
    varlen: bool,
}

impl Append {
    fn draw<R: Rng + ?Sized>(rng: &mut R, b: usize, seqlen_q: usize, capacity: usize) -> Append {
        // Append needs the queries to fit in the cache (cuda-fa3.md B.27c).
        let appends = seqlen_q <= capacity && rng.gen_bool(0.4);
        let lens: Vec<usize> = if appends {
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
        let varlen = appends && (lens.windows(2).any(|w| w[0] != w[1]) || rng.gen_bool(0.2));
        Append {
            appends,
            lens,
            varlen,
        }
    }

    fn set_tensors(&self, call: &mut KvCacheCall, sizes: &Sizes) {
        if !self.appends {
            return;
        }
        let (dtype, b, hk, d, dv) = (sizes.dtype, sizes.b, sizes.hk, sizes.d, sizes.dv);
        if self.varlen {
            let total: usize = self.lens.iter().sum();
            call.set("k", PyValue::tensor(dtype, &[total, hk, d]))
                .set("v", PyValue::tensor(dtype, &[total, hk, dv]))
                .set("cu_seqlens_k_new", int32(&[b + 1], offsets(&self.lens)));
        } else {
            call.set("k", PyValue::tensor(dtype, &[b, self.lens[0], hk, d]))
                .set("v", PyValue::tensor(dtype, &[b, self.lens[0], hk, dv]));
        }
    }
}

/// `cache_seqlens` (a tensor, or an int where the stack expands one) and `cache_leftpad`. Appends
/// need `cache_seqlens`.
struct Lengths {
    /// Cached keys per batch; `None` when `cache_seqlens` is not passed.
    seqused: Option<Vec<usize>>,
    /// Passed as one int.
    as_int: bool,
    leftpad: Option<Vec<usize>>,
}

impl Lengths {
    fn draw<R: Rng + ?Sized>(
        rng: &mut R,
        stack: Stack,
        queries: &Queries,
        cache: &Cache,
        append: &Append,
    ) -> Lengths {
        let b = queries.lens.len();
        let passed = append.appends || rng.gen_bool(0.7);
        let seqused: Vec<usize> = (0..b)
            .map(|i| rng.gen_range(0..=cache.capacity - append.lens[i]))
            .collect();
        let int_expansion_ok = match stack {
            Stack::Fa3 => !queries.varlen,
            Stack::Musa | Stack::SglKernel => !cache.paged && cache.kv_rows == b,
        };
        let as_int = passed && int_expansion_ok && rng.gen_bool(0.15);
        let seqused = if as_int {
            let common = *seqused.iter().min().expect("b ≥ 1");
            vec![common; b]
        } else {
            seqused
        };
        let leftpad = (passed && rng.gen_bool(0.25))
            .then(|| seqused.iter().map(|&s| rng.gen_range(0..=s)).collect());
        Lengths {
            seqused: passed.then_some(seqused),
            as_int,
            leftpad,
        }
    }

    fn set_tensors(&self, call: &mut KvCacheCall) {
        if let Some(seqused) = &self.seqused {
            let value = if self.as_int {
                PyValue::Int(seqused[0] as i64)
            } else {
                int32(
                    &[seqused.len()],
                    seqused.iter().map(|&s| s as i64).collect(),
                )
            };
            call.set("cache_seqlens", value);
        }
        if let Some(leftpad) = &self.leftpad {
            call.set(
                "cache_leftpad",
                int32(
                    &[leftpad.len()],
                    leftpad.iter().map(|&l| l as i64).collect(),
                ),
            );
        }
    }
}

/// Rotary embedding of the appended keys (and queries): rows for every new token and advancing
/// query row from any start ≤ capacity, possibly with explicit `rotary_seqlens`.
fn set_rotary<R: Rng + ?Sized>(
    rng: &mut R,
    call: &mut KvCacheCall,
    sizes: &Sizes,
    queries: &Queries,
    cache: &Cache,
    append: &Append,
) {
    let (dtype, b, d) = (sizes.dtype, sizes.b, sizes.d);
    if !(append.appends && d >= 16 && rng.gen_bool(0.5)) {
        return;
    }
    let rotary_dim = 16 * rng.gen_range(1..=d / 16);
    let longest = queries
        .seqlen
        .max(append.lens.iter().copied().max().unwrap_or(0));
    let seqlen_ro = cache.capacity + longest + rng.gen_range(0..=2);
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
        let starts = (0..b)
            .map(|_| rng.gen_range(0..=cache.capacity) as i64)
            .collect();
        call.set("rotary_seqlens", int32(&[b], starts));
    }
}

/// What changes the scores: softcap, sinks (not FA3), fp8 descales, softmax_scale.
fn set_score_options<R: Rng + ?Sized>(
    rng: &mut R,
    call: &mut KvCacheCall,
    stack: Stack,
    sizes: &Sizes,
) {
    if rng.gen_bool(0.25) {
        call.set(
            "softcap",
            PyValue::Float(rng.gen_range(1..=40) as f64 / 2.0),
        );
    }
    if stack != Stack::Fa3 && rng.gen_bool(0.25) {
        call.set("sinks", PyValue::tensor(Dtype::Bfloat16, &[sizes.h]));
    }
    if sizes.fp8 {
        for name in ["q_descale", "k_descale", "v_descale"] {
            if rng.gen_bool(0.7) {
                call.set(name, PyValue::tensor(Dtype::Float32, &[sizes.b, sizes.hk]));
            }
        }
    }
    if rng.gen_bool(0.2) {
        call.set("softmax_scale", PyValue::Float(rng.gen_range(0.05..0.5)));
    }
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
