//! From a call and its tensors to a [`Problem`]: every size, per-batch length, flag and view the
//! evaluation needs, validated so that evaluation itself cannot index out of range.

use super::mask::{self, ContextParallel, Mask, MaskRequest, StaticSizes};
use super::{Precision, RefError, Stack};
use crate::call::{BoundArgs, Dims, Dtype, KvCacheCall, LseLayout, Param, PyValue};
use crate::mate::{self, ResolvedMask, Tiles};
use crate::numeric::round_to;
use crate::tensor::{HostTensor, Tensors};
use ndarray::{Array2, Array3, ArrayD, ArrayView2, ArrayView3, ArrayView4, Ix2, Ix3, Ix4, s};

fn unevaluable(msg: impl Into<String>) -> RefError {
    RefError::Unevaluable(msg.into())
}

/// Lengths and places of one batch (cuda-fa3.md D.11).
#[derive(Clone, Debug, PartialEq)]
pub struct BatchPlan {
    /// First row of this batch in the `(total_q, h, d)` view of `q`.
    pub q_start: usize,
    pub seqlen_q: usize,
    pub leftpad: usize,
    /// Valid old keys (`cache_seqlens[b] − leftpad[b]`).
    pub old_keys: usize,
    /// First row of this batch's new tokens in the `(total_new, hk, d)` view of `k`.
    pub new_start: usize,
    pub new_keys: usize,
    /// Cache row (or page-table row) of this batch.
    pub kv_row: usize,
    /// Rotary position of the first new token (and of query row 0).
    pub rotary_start: usize,
}

impl BatchPlan {
    pub fn seqlen_k(&self) -> usize {
        self.old_keys + self.new_keys
    }

    /// Cache position of new token `t` (`cache_seqlens[b] + t`).
    pub fn append_position(&self, t: usize) -> usize {
        self.leftpad + self.old_keys + t
    }
}

pub struct Rotary<'a> {
    pub cos: ArrayView2<'a, f64>,
    pub sin: ArrayView2<'a, f64>,
    pub interleaved: bool,
    /// Query rows use positions `rotary_start + i` (else all use `rotary_start`).
    pub positions_advance: bool,
}

impl<'a> Rotary<'a> {
    /// The tables, checked to fit `head_size` and to have a row for every position `batches` use.
    fn new(
        cos: &'a HostTensor,
        sin: &'a HostTensor,
        interleaved: bool,
        positions_advance: bool,
        head_size: usize,
        batches: &[BatchPlan],
    ) -> Result<Rotary<'a>, RefError> {
        let table = |t: &'a HostTensor, name: &str| {
            t.data
                .view()
                .into_dimensionality::<Ix2>()
                .map_err(|_| unevaluable(format!("{name} must be 2-D")))
        };
        let (cos, sin) = (table(cos, "rotary_cos")?, table(sin, "rotary_sin")?);
        if sin.dim() != cos.dim() || 2 * cos.ncols() > head_size {
            return Err(unevaluable(format!(
                "rotary_cos {:?} / rotary_sin {:?} do not fit head_size {head_size}",
                cos.dim(),
                sin.dim()
            )));
        }
        for (i, batch) in batches.iter().enumerate() {
            let query_rows = if positions_advance { batch.seqlen_q } else { 1 };
            let end = batch.rotary_start + query_rows.max(batch.new_keys);
            if end > cos.nrows() {
                return Err(unevaluable(format!(
                    "batch {i} needs rotary rows up to {end}, rotary_cos has {}",
                    cos.nrows()
                )));
            }
        }
        Ok(Rotary {
            cos,
            sin,
            interleaved,
            positions_advance,
        })
    }

    /// Rotates the first `rotary_dim` elements of `x` by the angles of row `position`
    /// (cuda-fa3.md D.14), in f64.
    pub fn rotate(&self, x: &mut [f64], position: usize) {
        let half = self.cos.ncols();
        for i in 0..half {
            let (a, b) = if self.interleaved {
                (2 * i, 2 * i + 1)
            } else {
                (i, i + half)
            };
            let (c, s) = (self.cos[[position, i]], self.sin[[position, i]]);
            let (x0, x1) = (x[a], x[b]);
            x[a] = x0 * c - x1 * s;
            x[b] = x0 * s + x1 * c;
        }
    }
}

/// fp8 descale factors, `(b, hk)` each (missing ones are 1).
pub struct Descale {
    pub q: Array2<f64>,
    pub k: Array2<f64>,
    pub v: Array2<f64>,
}

impl Descale {
    /// The call's descale factors; missing ones are 1.
    fn read(args: &BoundArgs, tensors: &Tensors, b: usize, hk: usize) -> Result<Descale, RefError> {
        let factor = |param: Param| -> Result<Array2<f64>, RefError> {
            match tensors.get(param.name()) {
                Some(t) if args.tensor(param).is_some() => {
                    expect_shape(t, param.name(), &[b, hk])?;
                    Ok(t.data.clone().into_dimensionality::<Ix2>().expect("2-D"))
                }
                _ => Ok(Array2::ones((b, hk))),
            }
        };
        Ok(Descale {
            q: factor(Param::QDescale)?,
            k: factor(Param::KDescale)?,
            v: factor(Param::VDescale)?,
        })
    }
}

/// Where the keys live.
pub enum KeyStore {
    Contiguous,
    Paged {
        page_table: Array2<i64>,
        page_size: usize,
    },
}

impl KeyStore {
    /// Paged through the call's page table (pages of `page_size` rows), else contiguous.
    fn of(tensors: &Tensors, paged: bool, page_size: usize) -> Result<KeyStore, RefError> {
        if !paged {
            return Ok(KeyStore::Contiguous);
        }
        let page_table = materialised(tensors, "page_table")?
            .data
            .mapv(|x| x as i64)
            .into_dimensionality::<Ix2>()
            .map_err(|_| unevaluable("page_table must be 2-D"))?;
        Ok(KeyStore::Paged {
            page_table,
            page_size,
        })
    }
}

pub struct Problem<'a> {
    pub precision: Precision,
    pub dtype: Dtype,
    pub cache_dtype: Dtype,
    pub num_heads: usize,
    pub num_heads_k: usize,
    pub head_dim: usize,
    pub head_dim_v: usize,
    /// Static `seqlen_q` (`q.shape[1]` or `max_seqlen_q`).
    pub seqlen_q: usize,
    pub total_q: usize,
    pub lse_layout: LseLayout,
    pub batches: Vec<BatchPlan>,
    pub q: ArrayView3<'a, f64>,
    pub qv: Option<ArrayView3<'a, f64>>,
    pub k_cache: ArrayView4<'a, f64>,
    pub v_cache: ArrayView4<'a, f64>,
    pub k_cache_full: &'a ArrayD<f64>,
    pub v_cache_full: &'a ArrayD<f64>,
    pub k_new: Option<ArrayView3<'a, f64>>,
    pub v_new: Option<ArrayView3<'a, f64>>,
    pub new_kv: bool,
    pub store: KeyStore,
    pub scale: f64,
    pub softcap: Option<f64>,
    pub sinks: Option<Vec<f64>>,
    pub descale: Option<Descale>,
    pub rotary: Option<Rotary<'a>>,
    pub mask: Mask,
    /// FA3/sgl-kernel: a call with no keys at all returns `lse = +inf` (cuda-fa3.md D.16).
    pub empty_kv: bool,
    /// MUSA: mate's tiling, which decides the lse of fully masked rows with a sink and which query
    /// rows no tile writes (docs/musa-device.md D1, D5). `None` for other stacks, mate's MLA branch
    /// and head dims mate has no kernel for.
    pub tiles: Option<Tiles>,
    /// One rank of a context-parallel call through mate's FA3 wrapper (`None` on the MLA branch,
    /// which ignores it).
    pub context_parallel: Option<ContextParallel>,
}

/// `(k_cache, v_cache)` after the append.
pub type Caches = (ArrayD<f64>, ArrayD<f64>);

/// New keys and values per batch, `(new_b, hk, d)`, rotated and rounded to the cache dtype.
pub struct NewTokens {
    pub keys: Vec<Array3<f64>>,
    pub values: Vec<Array3<f64>>,
}

fn view3<'a>(t: &'a HostTensor, name: &str) -> Result<ArrayView3<'a, f64>, RefError> {
    t.data
        .view()
        .into_dimensionality::<Ix3>()
        .map_err(|_| unevaluable(format!("{name} must be 3-D here, got {:?}", t.shape())))
}

fn view4<'a>(t: &'a HostTensor, name: &str) -> Result<ArrayView4<'a, f64>, RefError> {
    t.data
        .view()
        .into_dimensionality::<Ix4>()
        .map_err(|_| unevaluable(format!("{name} must be 4-D, got {:?}", t.shape())))
}

/// Rows of a 3-D or 4-D token tensor as `(rows, heads, dim)`.
fn token_rows<'a>(t: &'a HostTensor, name: &str) -> Result<ArrayView3<'a, f64>, RefError> {
    match t.shape() {
        [_, _, _] => view3(t, name),
        &[b, s, h, d] => t
            .data
            .view()
            .into_shape_with_order((b * s, h, d))
            .map_err(|e| unevaluable(format!("{name}: {e}"))),
        other => Err(unevaluable(format!("{name} has shape {other:?}"))),
    }
}

fn expect_shape(t: &HostTensor, name: &str, shape: &[usize]) -> Result<(), RefError> {
    if t.shape() == shape {
        Ok(())
    } else {
        Err(unevaluable(format!(
            "{name} has shape {:?}, expected {shape:?}",
            t.shape()
        )))
    }
}

/// Integer values of a 1-D index tensor of length `len`.
fn index_vector(tensors: &Tensors, name: &str, len: usize) -> Result<Option<Vec<i64>>, RefError> {
    match tensors.get(name) {
        None => Ok(None),
        Some(t) => {
            expect_shape(t, name, &[len])?;
            Ok(Some(t.ints()))
        }
    }
}

fn nonneg(value: i64, what: &str) -> Result<usize, RefError> {
    usize::try_from(value).map_err(|_| unevaluable(format!("{what} is negative ({value})")))
}

/// A Python int argument, also as a one-element tensor (the dispatcher converts those).
fn int_arg(args: &BoundArgs, tensors: &Tensors, name: Param) -> Result<Option<i64>, RefError> {
    match args.get(name) {
        PyValue::None => Ok(None),
        PyValue::Tensor(_) => match tensors.get(name.name()).map(HostTensor::ints).as_deref() {
            Some([v]) => Ok(Some(*v)),
            _ => Err(unevaluable(format!("{name} must be a one-element tensor"))),
        },
        v => v
            .as_int()
            .map(Some)
            .ok_or_else(|| unevaluable(format!("{name} must be an int, got {v}"))),
    }
}

/// `window_size` as the stack reads it: mate's `_resolve_mask` takes a `None` side as no window
/// (-1); the CUDA stacks' int conversion refuses it before any kernel runs.
fn window(args: &BoundArgs, stack: Stack) -> Result<(i64, i64), RefError> {
    let side = |v: &PyValue| match v {
        PyValue::None if stack == Stack::Musa => Ok(-1),
        PyValue::Tensor(t) => t
            .int_values()
            .and_then(|v| (v.len() == 1).then(|| v[0]))
            .ok_or_else(|| unevaluable("window_size entries must be ints")),
        v => v
            .as_int()
            .ok_or_else(|| unevaluable(format!("window_size entries must be ints, got {v}"))),
    };
    match args.get(Param::WindowSize) {
        PyValue::None => Ok((-1, -1)),
        PyValue::Tensor(t) => match t.int_values().as_deref() {
            Some([l, r, ..]) => Ok((*l, *r)),
            _ => Err(unevaluable("window_size tensor needs two values")),
        },
        v => match v.as_sequence() {
            Some([l, r, ..]) => Ok((side(l)?, side(r)?)),
            _ => Err(unevaluable(format!("window_size must be a pair, got {v}"))),
        },
    }
}

fn number(args: &BoundArgs, name: Param) -> Result<Option<f64>, RefError> {
    match args.get(name) {
        PyValue::None => Ok(None),
        v => v
            .as_number()
            .map(Some)
            .ok_or_else(|| unevaluable(format!("{name} must be a number, got {v}"))),
    }
}

/// The `cache_seqlens` values: a tensor's, or an int expanded as `stack` expands it (mate and
/// sgl-kernel 0.3.21: `k_cache.shape[0]` entries; FA3: `q.shape[0]`).
fn cache_seqlens(
    args: &BoundArgs,
    tensors: &Tensors,
    stack: Stack,
    batch: usize,
) -> Result<Option<Vec<i64>>, RefError> {
    match args.get(Param::CacheSeqlens) {
        PyValue::None => Ok(None),
        PyValue::Tensor(_) => index_vector(tensors, "cache_seqlens", batch),
        v => {
            let value = v
                .as_int()
                .ok_or_else(|| unevaluable(format!("cache_seqlens must be an int, got {v}")))?;
            let source = match stack {
                Stack::Fa3 => "q",
                Stack::Musa | Stack::SglKernel => "k_cache",
            };
            let len = tensors
                .get(source)
                .and_then(|t| t.shape().first().copied())
                .ok_or_else(|| unevaluable(format!("{source} is missing")))?;
            if len != batch {
                return Err(unevaluable(format!(
                    "int cache_seqlens expands to {len} entries ({source}.shape[0]), batch is {batch}"
                )));
            }
            Ok(Some(vec![value; len]))
        }
    }
}

/// Cumulative offsets `cu` of length `batch + 1`, each segment within `[0, total]`.
fn segments(
    tensors: &Tensors,
    name: &str,
    batch: usize,
    total: usize,
) -> Result<Option<Vec<(usize, usize)>>, RefError> {
    let Some(cu) = index_vector(tensors, name, batch + 1)? else {
        return Ok(None);
    };
    cu.windows(2)
        .map(|w| {
            let start = nonneg(w[0], name)?;
            let end = nonneg(w[1], name)?;
            if start > end || end > total {
                return Err(unevaluable(format!(
                    "{name} segment [{start}, {end}) is not within [0, {total}]"
                )));
            }
            Ok((start, end - start))
        })
        .collect::<Result<_, _>>()
        .map(Some)
}

/// The tensor materialised for `name`.
fn materialised<'a>(tensors: &'a Tensors, name: &str) -> Result<&'a HostTensor, RefError> {
    tensors
        .get(name)
        .ok_or_else(|| unevaluable(format!("{name} was not materialised")))
}

/// The attended tensors as views of the evaluation's shapes, checked against the call's sizes.
struct Operands<'a> {
    q_t: &'a HostTensor,
    k_cache_t: &'a HostTensor,
    v_cache_t: &'a HostTensor,
    q: ArrayView3<'a, f64>,
    qv: Option<ArrayView3<'a, f64>>,
    k_cache: ArrayView4<'a, f64>,
    v_cache: ArrayView4<'a, f64>,
    k_new: Option<ArrayView3<'a, f64>>,
    v_new: Option<ArrayView3<'a, f64>>,
    /// MUSA routes `qv` of width 512 with `q` of width 64 to its MLA kernel, which ignores append,
    /// rotary, window, chunk, softcap, sinks, leftpad and batch_idx (musa-fa3.md §6.12).
    mla: bool,
    /// The call appends keys (never on the MLA branch).
    new_kv: bool,
}

impl<'a> Operands<'a> {
    fn of(
        args: &BoundArgs,
        tensors: &'a Tensors,
        dims: &Dims,
        stack: Stack,
    ) -> Result<Operands<'a>, RefError> {
        let q_t = materialised(tensors, "q")?;
        let k_cache_t = materialised(tensors, "k_cache")?;
        let v_cache_t = materialised(tensors, "v_cache")?;
        let qv_t = if args.tensor(Param::Qv).is_some() {
            Some(materialised(tensors, "qv")?)
        } else {
            None
        };
        let mla = stack == Stack::Musa
            && qv_t.is_some_and(|t| t.shape().last() == Some(&512))
            && dims.head_size == 64;
        let (h, hk, d, dv) = (
            dims.num_heads,
            dims.num_heads_k,
            dims.head_size,
            dims.head_size_v,
        );
        if hk == 0 || h % hk != 0 {
            return Err(unevaluable(format!(
                "{h} query heads cannot be grouped over {hk} KV heads"
            )));
        }
        let q = token_rows(q_t, "q")?;
        if q.dim() != (dims.total_q, h, d) {
            return Err(unevaluable(format!("q has shape {:?}", q_t.shape())));
        }
        let k_cache = view4(k_cache_t, "k_cache")?;
        let v_cache = view4(v_cache_t, "v_cache")?;
        let (rows, cap, _, _) = k_cache.dim();
        if k_cache.dim().2 != hk || k_cache.dim().3 != d {
            return Err(unevaluable(format!(
                "k_cache has shape {:?}",
                k_cache_t.shape()
            )));
        }
        if v_cache.dim() != (rows, cap, hk, dv) {
            return Err(unevaluable(format!(
                "v_cache has shape {:?}, k_cache {:?}",
                v_cache_t.shape(),
                k_cache_t.shape()
            )));
        }
        let qv = match qv_t {
            Some(t) => {
                let qv = token_rows(t, "qv")?;
                if qv.dim() != (dims.total_q, h, dv) {
                    return Err(unevaluable(format!("qv has shape {:?}", t.shape())));
                }
                Some(qv)
            }
            None => None,
        };
        let new_kv = dims.new_kv && !mla;
        let (k_new, v_new) = if new_kv {
            let (k_t, v_t) = (materialised(tensors, "k")?, materialised(tensors, "v")?);
            let (k, v) = (token_rows(k_t, "k")?, token_rows(v_t, "v")?);
            if k.dim() != (dims.total_new, hk, d) || v.dim() != (dims.total_new, hk, dv) {
                return Err(unevaluable(format!(
                    "k/v have shapes {:?}/{:?}",
                    k_t.shape(),
                    v_t.shape()
                )));
            }
            (Some(k), Some(v))
        } else {
            (None, None)
        };
        Ok(Operands {
            q_t,
            k_cache_t,
            v_cache_t,
            q,
            qv,
            k_cache,
            v_cache,
            k_new,
            v_new,
            mla,
            new_kv,
        })
    }
}

/// The mask the stack resolves from the call's arguments and static sizes (the MLA branch: causal
/// only).
fn resolve_mask(
    args: &BoundArgs,
    tensors: &Tensors,
    stack: Stack,
    dims: &Dims,
    mla: bool,
) -> Result<mask::Resolved, RefError> {
    let causal = args.get(Param::Causal).truthy().unwrap_or(false);
    let request = if mla {
        MaskRequest {
            causal,
            window_left: -1,
            window_right: -1,
            attention_chunk: 0,
        }
    } else {
        let (window_left, window_right) = window(args, stack)?;
        MaskRequest {
            causal,
            window_left,
            window_right,
            attention_chunk: int_arg(args, tensors, Param::AttentionChunk)?.unwrap_or(0),
        }
    };
    let fixed_length = [
        Param::CuSeqlensQ,
        Param::CacheSeqlens,
        Param::CacheLeftpad,
        Param::PageTable,
        Param::K,
    ]
    .iter()
    .all(|&p| args.get(p).is_none());
    Ok(mask::resolve(
        stack,
        request,
        StaticSizes {
            seqlen_q: dims.seqlen_q as i64,
            seqlen_k: dims.seqlen_k as i64,
            head_size: dims.head_size as i64,
            paged: dims.paged,
            fixed_length,
        },
    ))
}

/// The per-batch index vectors of a call, each `None` when not given.
struct Lengths {
    seqused: Option<Vec<i64>>,
    leftpad: Option<Vec<i64>>,
    batch_idx: Option<Vec<i64>>,
    q_segments: Option<Vec<(usize, usize)>>,
    new_segments: Option<Vec<(usize, usize)>>,
    rotary_seqlens: Option<Vec<i64>>,
}

impl Lengths {
    /// The call's index vectors, checked against the batch; `rotary_seqlens` is read once the
    /// rotary tables are known.
    fn read(
        args: &BoundArgs,
        tensors: &Tensors,
        stack: Stack,
        dims: &Dims,
        mla: bool,
        new_kv: bool,
    ) -> Result<Lengths, RefError> {
        let b = dims.batch_size;
        let seqused = cache_seqlens(args, tensors, stack, b)?;
        let leftpad = if mla {
            None
        } else {
            index_vector(tensors, "cache_leftpad", b)?
        };
        let batch_idx = if mla {
            None
        } else {
            index_vector(tensors, "cache_batch_idx", b)?
        };
        let q_segments = segments(tensors, "cu_seqlens_q", b, dims.total_q)?;
        let new_segments = if new_kv && dims.varlen_new {
            segments(tensors, "cu_seqlens_k_new", b, dims.total_new)?
        } else {
            None
        };
        Ok(Lengths {
            seqused,
            leftpad,
            batch_idx,
            q_segments,
            new_segments,
            rotary_seqlens: None,
        })
    }

    /// Batch `i`'s lengths and places (cuda-fa3.md D.11), checked against the cache: every read
    /// and append stays within the capacity and the KV row exists.
    fn plan(
        &self,
        i: usize,
        dims: &Dims,
        kv_rows: usize,
        new_kv: bool,
        stack: Stack,
    ) -> Result<BatchPlan, RefError> {
        let (q_start, seqlen_q) = match &self.q_segments {
            Some(segs) => segs[i],
            None => (i * dims.seqlen_q, dims.seqlen_q),
        };
        // mate gives a longer segment a meaning (its rows past the grid's m-blocks are unwritten,
        // docs/musa-device.md D5).
        if seqlen_q > dims.seqlen_q && stack != Stack::Musa {
            return Err(unevaluable(format!(
                "batch {i} has {seqlen_q} queries, more than max_seqlen_q = {}",
                dims.seqlen_q
            )));
        }
        let lp = match &self.leftpad {
            Some(v) => nonneg(v[i], "cache_leftpad")?,
            None => 0,
        };
        let used = match &self.seqused {
            Some(v) => nonneg(v[i], "cache_seqlens")?,
            None => dims.seqlen_k,
        };
        let old_keys = used.checked_sub(lp).ok_or_else(|| {
            unevaluable(format!(
                "batch {i}: cache_leftpad {lp} exceeds cache_seqlens {used}"
            ))
        })?;
        let (new_start, new_keys) = match (&self.new_segments, new_kv) {
            (Some(segs), _) => segs[i],
            (None, true) => (i * dims.seqlen_new, dims.seqlen_new),
            (None, false) => (0, 0),
        };
        if used + new_keys > dims.seqlen_k {
            return Err(unevaluable(format!(
                "batch {i}: {used} cached + {new_keys} new keys exceed the capacity {}",
                dims.seqlen_k
            )));
        }
        let kv_row = match &self.batch_idx {
            Some(v) => nonneg(v[i], "cache_batch_idx")?,
            None => i,
        };
        if kv_row >= kv_rows {
            return Err(unevaluable(format!(
                "batch {i} uses KV row {kv_row}, there are {kv_rows}"
            )));
        }
        let rotary_start = match &self.rotary_seqlens {
            Some(v) => nonneg(v[i], "rotary_seqlens")?,
            None => used,
        };
        Ok(BatchPlan {
            q_start,
            seqlen_q,
            leftpad: lp,
            old_keys,
            new_start,
            new_keys,
            kv_row,
            rotary_start,
        })
    }
}

/// mate's tiling of the call: its kernel configuration (§6.3, §6.4) and resolved mask.
fn mate_tiles(args: &BoundArgs, dims: &Dims, mask: Mask) -> Option<Tiles> {
    let group = dims.num_heads / dims.num_heads_k;
    let pack_gqa = match args.get(Param::PackGqa) {
        PyValue::None => None,
        v => v.truthy(),
    };
    let config = mate::kernel_config(
        dims.head_size,
        dims.head_size_v,
        dims.seqlen_q as i64,
        group as i64,
        pack_gqa,
    )
    .ok()?;
    let (sq, sk) = (dims.seqlen_q as i64, dims.seqlen_k as i64);
    let resolved = match mask {
        Mask::Full => ResolvedMask {
            is_causal: false,
            is_local: false,
            window_left: sk - 1,
            window_right: sq - 1,
            attention_chunk: 0,
        },
        Mask::Causal => ResolvedMask {
            is_causal: true,
            is_local: false,
            window_left: sk - 1,
            window_right: 0,
            attention_chunk: 0,
        },
        Mask::Local { left, right, chunk } => ResolvedMask {
            is_causal: false,
            is_local: true,
            window_left: left,
            window_right: right,
            attention_chunk: chunk,
        },
    };
    Some(Tiles::new(&config, group, resolved))
}

impl<'a> Problem<'a> {
    pub fn resolve(
        call: &KvCacheCall,
        tensors: &'a Tensors,
        stack: Stack,
        precision: Precision,
        context_parallel: Option<&ContextParallel>,
    ) -> Result<Problem<'a>, RefError> {
        let args = call.bind_canonical().map_err(RefError::Binding)?;
        let dims = Dims::of(&args).map_err(|e| unevaluable(e.0))?;
        // Each step checks what the next one indexes with, so they run in this order.
        let operands = Operands::of(&args, tensors, &dims, stack)?;
        let (mla, new_kv) = (operands.mla, operands.new_kv);
        let (b, h, hk, d) = (
            dims.batch_size,
            dims.num_heads,
            dims.num_heads_k,
            dims.head_size,
        );
        let (rows, cap, _, _) = operands.k_cache.dim();
        let store = KeyStore::of(tensors, dims.paged, cap)?;
        let kv_rows = match &store {
            KeyStore::Paged { page_table, .. } => page_table.nrows(),
            KeyStore::Contiguous => rows,
        };

        let mut lengths = Lengths::read(&args, tensors, stack, &dims, mla, new_kv)?;
        let rotary_tables = if new_kv && args.tensor(Param::RotaryCos).is_some() {
            Some((
                materialised(tensors, "rotary_cos")?,
                materialised(tensors, "rotary_sin")?,
            ))
        } else {
            None
        };
        if rotary_tables.is_some() {
            lengths.rotary_seqlens = index_vector(tensors, "rotary_seqlens", b)?;
        }
        let batches = (0..b)
            .map(|i| lengths.plan(i, &dims, kv_rows, new_kv, stack))
            .collect::<Result<Vec<_>, _>>()?;

        let resolved = resolve_mask(&args, tensors, stack, &dims, mla)?;
        let rotary = match rotary_tables {
            Some((cos, sin)) => Some(Rotary::new(
                cos,
                sin,
                args.get(Param::RotaryInterleaved).truthy().unwrap_or(true),
                resolved.rotary_positions_advance,
                d,
                &batches,
            )?),
            None => None,
        };
        let fp8 = operands.q_t.dtype == Dtype::Float8E4m3fn;
        let descale = if fp8 && stack != Stack::Musa {
            Some(Descale::read(&args, tensors, b, hk)?)
        } else {
            None
        };
        let sinks = if stack.has_sinks() && !mla && args.tensor(Param::Sinks).is_some() {
            let t = materialised(tensors, "sinks")?;
            expect_shape(t, "sinks", &[h])?;
            Some(t.data.iter().copied().collect())
        } else {
            None
        };
        let softcap = if mla {
            None
        } else {
            number(&args, Param::Softcap)?.filter(|&c| stack.softcap_enabled(c))
        };
        let qv_dim = operands.qv.map_or(0, |qv| qv.dim().2);
        let scale =
            number(&args, Param::SoftmaxScale)?.unwrap_or_else(|| ((d + qv_dim) as f64).powf(-0.5));
        let total_knew = if new_kv { dims.total_new } else { 0 };
        let empty_kv = stack != Stack::Musa && b * cap + total_knew == 0;
        let tiles = match (stack, mla) {
            (Stack::Musa, false) => mate_tiles(&args, &dims, resolved.mask),
            _ => None,
        };
        let context_parallel = match context_parallel {
            Some(cp) if !mla => cp
                .applied(matches!(resolved.mask, Mask::Local { .. }), b)
                .map_err(unevaluable)?
                .cloned(),
            _ => None,
        };
        let lse_layout = match (dims.varlen_q, mla) {
            (true, _) => LseLayout::HeadTotal,
            (false, true) => LseLayout::BatchSeqHead,
            (false, false) => LseLayout::BatchHeadSeq,
        };

        Ok(Problem {
            precision,
            dtype: operands.q_t.dtype,
            cache_dtype: operands.k_cache_t.dtype,
            num_heads: h,
            num_heads_k: hk,
            head_dim: d,
            head_dim_v: dims.head_size_v,
            seqlen_q: dims.seqlen_q,
            total_q: dims.total_q,
            lse_layout,
            batches,
            q: operands.q,
            qv: operands.qv,
            k_cache: operands.k_cache,
            v_cache: operands.v_cache,
            k_cache_full: &operands.k_cache_t.data,
            v_cache_full: &operands.v_cache_t.data,
            k_new: operands.k_new,
            v_new: operands.v_new,
            new_kv,
            store,
            scale,
            softcap,
            sinks,
            descale,
            rotary,
            mask: resolved.mask,
            empty_kv,
            tiles,
            context_parallel,
        })
    }

    /// The keys `[lo, hi)` row `i` of batch `b` attends to.
    pub fn key_range(&self, b: usize, i: usize) -> (usize, usize) {
        let batch = &self.batches[b];
        let (sq, sk) = (batch.seqlen_q, batch.seqlen_k());
        match &self.context_parallel {
            Some(cp) => cp.key_range(self.mask, b, i, sq, sk),
            None => self.mask.key_range(i, sq, sk),
        }
    }

    pub fn group_size(&self) -> usize {
        self.num_heads / self.num_heads_k
    }

    /// The dtype low-precision math runs in: the input dtype, bf16 for fp8 inputs.
    pub fn work_dtype(&self) -> Dtype {
        if self.dtype == Dtype::Float8E4m3fn {
            Dtype::Bfloat16
        } else {
            self.dtype
        }
    }

    pub fn empty_kv_is_plus_inf(&self) -> bool {
        self.empty_kv && self.total_q > 0
    }

    /// Cache slot `(row, offset)` of logical position `p` of KV row `kv_row` (cuda-fa3.md D.13b).
    pub fn slot(&self, kv_row: usize, p: usize) -> Result<(usize, usize), RefError> {
        match &self.store {
            KeyStore::Contiguous => Ok((kv_row, p)),
            KeyStore::Paged {
                page_table,
                page_size,
            } => {
                let page = page_table[[kv_row, p / page_size]];
                let num_pages = self.k_cache.dim().0;
                match usize::try_from(page) {
                    Ok(page) if page < num_pages => Ok((page, p % page_size)),
                    _ => Err(unevaluable(format!(
                        "page_table[{kv_row}, {}] = {page} is not one of the {num_pages} pages",
                        p / page_size
                    ))),
                }
            }
        }
    }

    /// Positions from cache offset `offset` on that lie in the same page (or cache row).
    pub fn run_length(&self, offset: usize) -> usize {
        match &self.store {
            KeyStore::Contiguous => self.k_cache.dim().1 - offset,
            KeyStore::Paged { page_size, .. } => page_size - offset,
        }
    }

    /// The appended keys (rotated) and values of every batch, in the cache dtype.
    pub fn new_tokens(&self) -> Result<NewTokens, RefError> {
        let (Some(k_new), Some(v_new)) = (self.k_new, self.v_new) else {
            return Ok(NewTokens {
                keys: vec![Array3::zeros((0, self.num_heads_k, self.head_dim)); self.batches.len()],
                values: vec![
                    Array3::zeros((0, self.num_heads_k, self.head_dim_v));
                    self.batches.len()
                ],
            });
        };
        let round = |x: f64| round_to(self.cache_dtype, x);
        let mut keys = Vec::with_capacity(self.batches.len());
        let mut values = Vec::with_capacity(self.batches.len());
        for batch in &self.batches {
            let span = batch.new_start..batch.new_start + batch.new_keys;
            let mut k = k_new.slice(s![span.clone(), .., ..]).to_owned();
            if let Some(rotary) = &self.rotary {
                for (t, mut token) in k.outer_iter_mut().enumerate() {
                    for mut head in token.outer_iter_mut() {
                        let x = head.as_slice_mut().expect("owned rows are contiguous");
                        rotary.rotate(x, batch.rotary_start + t);
                    }
                }
            }
            k.mapv_inplace(round);
            keys.push(k);
            values.push(v_new.slice(s![span, .., ..]).mapv(round));
        }
        Ok(NewTokens { keys, values })
    }

    /// The caches after writing every batch's new tokens at `cache_seqlens[b] + t`, in batch order.
    pub fn appended_caches(&self, new: &NewTokens) -> Result<Option<Caches>, RefError> {
        if !self.new_kv {
            return Ok(None);
        }
        let mut k_cache = self.k_cache_full.clone();
        let mut v_cache = self.v_cache_full.clone();
        {
            let mut k4 = k_cache
                .view_mut()
                .into_dimensionality::<Ix4>()
                .expect("checked 4-D");
            let mut v4 = v_cache
                .view_mut()
                .into_dimensionality::<Ix4>()
                .expect("checked 4-D");
            for (b, batch) in self.batches.iter().enumerate() {
                for t in 0..batch.new_keys {
                    let (row, offset) = self.slot(batch.kv_row, batch.append_position(t))?;
                    k4.slice_mut(s![row, offset, .., ..])
                        .assign(&new.keys[b].slice(s![t, .., ..]));
                    v4.slice_mut(s![row, offset, .., ..])
                        .assign(&new.values[b].slice(s![t, .., ..]));
                }
            }
        }
        Ok(Some((k_cache, v_cache)))
    }
}
