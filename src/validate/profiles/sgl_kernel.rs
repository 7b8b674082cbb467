//! sgl-kernel 0.3.21 (sgl-project/sglang@b5493f65b), the CUDA `flash_attn_with_kvcache` SGLang
//! called on NVIDIA: `ver == 4` runs the FA4 path (its asserts, then the FA4 interface's);
//! any other `ver` silently runs FA3: the Python wrapper, `sgl_kernel::fwd`, and the `mha_fwd` of
//! sgl-flash-attn@f866ec34 (upstream's checks plus a sinks block). sgl-kernel-cuda.md §B.2–B.4,
//! §C, §E.
//!
//! Assumed installation: a wheel with FA4 (`flash_attn_varlen_func_v4` importable, so assert
//! FA4-1 `FA4 is not available, ...` cannot fire) on one Hopper GPU.

use super::cuda_op::{
    OP_CALL, SGL_FWD_OP, SeqlensLength, WINDOW_INDEX_SITES, assert_last_stride, binding_rejection,
    default_scale, expand_int_seqlens, index_window, maybe_contiguous_all, profile_sites,
};
use super::cuda_state::{
    Arg, CudaState, Flavour, ensure, python_shape, python_stride_last, python_tensor,
};
use super::mha_fwd::{LAUNCH, MHA_FWD, SINKS, op_int, render, resolved};
use crate::call::{
    Device, Dtype, KvCacheCall, LseLayout, Param, PyValue, TensorArg, python_int_from_str,
    signature,
};
use crate::validate::engine::{At, Check, Fail, HazardLog, Layer, run_layers};
use crate::validate::registry::cuda::*;
use crate::validate::{Outcome, Profile, Resolved, Verdict};
use std::sync::OnceLock;

/// The FA3 branch of `flash_attn_with_kvcache` (`flash_attn.py:L203-267`).
static FA3_PYTHON: Layer<CudaState> = Layer {
    name: "sgl_kernel.flash_attn.flash_attn_with_kvcache (FA3 path)",
    checks: &[
        Check {
            name: "what the FA3 path ignores",
            sites: &[],
            run: |s| {
                let ver = s.py(Param::Ver);
                if !ver.eq_int(3) {
                    let shown = ver.to_string();
                    s.hazard(H_SGL_VER_RUNS_FA3, &[&shown]);
                }
                for param in [Param::ScoreMod, Param::AuxTensors] {
                    if !s.py(param).is_none() {
                        s.hazard(H_SGL_ARG_DROPPED, &[param.name()]);
                    }
                }
                Ok(())
            },
        },
        Check {
            name: "k_cache last stride",
            sites: &[PY_NO_ATTRIBUTE, ATEN_DIM_NO_DIMS, SGL_B3_1],
            run: |s| assert_last_stride(s, Param::KCache).at(SGL_B3_1),
        },
        Check {
            name: "v_cache last stride",
            sites: &[PY_NO_ATTRIBUTE, ATEN_DIM_NO_DIMS, SGL_B3_2],
            run: |s| assert_last_stride(s, Param::VCache).at(SGL_B3_2),
        },
        Check {
            name: "default softmax_scale",
            sites: &[PY_NO_ATTRIBUTE, PY_TUPLE_INDEX, PY_ZERO_POWER],
            run: default_scale,
        },
        Check {
            name: "int cache_seqlens",
            sites: &[PY_NO_ATTRIBUTE, PY_TUPLE_INDEX, ATEN_FULL_OVERFLOW],
            run: |s| expand_int_seqlens(s, SeqlensLength::CacheRows),
        },
        Check {
            // L215-228: a tensor cache_seqlens is not among them.
            name: "maybe_contiguous",
            sites: &[PY_NO_ATTRIBUTE, ATEN_DIM_NO_DIMS],
            run: |s| {
                maybe_contiguous_all(
                    s,
                    &[
                        Arg::Q,
                        Arg::K,
                        Arg::KNew,
                        Arg::VNew,
                        Arg::CuSeqlensQ,
                        Arg::CuSeqlensKNew,
                        Arg::PageTable,
                        Arg::KvBatchIdx,
                        Arg::LeftpadK,
                        Arg::RotaryCos,
                        Arg::RotarySin,
                        Arg::SeqlensRotary,
                    ],
                )
            },
        },
        Check {
            name: "int(attention_chunk)",
            sites: &[
                PY_INT_LITERAL,
                PY_INT_NAN,
                PY_INT_INF,
                PY_INT_TYPE,
                ATEN_TENSOR_TO_SCALAR,
            ],
            run: |s| {
                s.attention_chunk = python_int(s.py(Param::AttentionChunk))?;
                Ok(())
            },
        },
        Check {
            name: "window_size[0], window_size[1]",
            sites: WINDOW_INDEX_SITES,
            run: index_window,
        },
    ],
};

/// `0 if attention_chunk is None else int(attention_chunk)` (`flash_attn.py:L229`).
fn python_int(value: &PyValue) -> Result<PyValue, Fail> {
    match value {
        PyValue::None => Ok(PyValue::Int(0)),
        PyValue::Int(i) => Ok(PyValue::Int(*i)),
        PyValue::Bool(b) => Ok(PyValue::Int(*b as i64)),
        PyValue::Float(f) if f.is_nan() => Err(Fail::new().at(PY_INT_NAN)),
        PyValue::Float(f) if f.is_infinite() => Err(Fail::new().at(PY_INT_INF)),
        PyValue::Float(f) => Ok(PyValue::Int(f.trunc() as i64)),
        PyValue::Str(text) => python_int_from_str(text)
            .map(PyValue::Int)
            .ok_or_else(|| Fail::with([value.to_string()]).at(PY_INT_LITERAL)),
        PyValue::Tensor(t) => match t.numel() {
            Some(1) => Ok(PyValue::Int(op_int(value))),
            n => Err(Fail::with([n.unwrap_or(usize::MAX).to_string()]).at(ATEN_TENSOR_TO_SCALAR)),
        },
        other => Err(Fail::with([other.type_name().to_string()]).at(PY_INT_TYPE)),
    }
}

static FA3_LAYERS: [&Layer<CudaState>; 5] = [&FA3_PYTHON, &OP_CALL, &MHA_FWD, &SINKS, &LAUNCH];

/// The `ver == 4` branch of `flash_attn_with_kvcache` (`flash_attn.py:L163-201`).
static FA4_WRAPPER: Layer<CudaState> = Layer {
    name: "sgl_kernel.flash_attn.flash_attn_with_kvcache (ver == 4)",
    checks: &[
        Check {
            name: "FA4 asserts",
            sites: &[SGL_FA4_2, SGL_FA4_3, SGL_FA4_4, SGL_FA4_5],
            run: |s| {
                let none = |params: &[Param]| params.iter().all(|&p| s.py(p).is_none());
                ensure(none(&[Param::K, Param::V])).at(SGL_FA4_2)?;
                ensure(none(&[
                    Param::RotaryCos,
                    Param::RotarySin,
                    Param::RotarySeqlens,
                ]))
                .at(SGL_FA4_3)?;
                ensure(none(&[Param::CacheBatchIdx, Param::CacheLeftpad])).at(SGL_FA4_4)?;
                ensure(none(&[Param::QDescale, Param::KDescale, Param::VDescale])).at(SGL_FA4_5)
            },
        },
        Check {
            name: "what the FA4 call drops",
            sites: &[],
            run: |s| {
                if !s.py(Param::Qv).is_none() {
                    s.hazard(H_SGL_FA4_QV_DROPPED, &[]);
                }
                let dropped = [
                    ("cu_seqlens_k_new", s.py(Param::CuSeqlensKNew).is_none()),
                    ("max_seqlen_q", s.py(Param::MaxSeqlenQ).is_none()),
                    ("attention_chunk", {
                        let c = s.py(Param::AttentionChunk);
                        c.is_none() || c.eq_int(0)
                    }),
                    (
                        "scheduler_metadata",
                        s.py(Param::SchedulerMetadata).is_none(),
                    ),
                    ("sm_margin", s.py(Param::SmMargin).eq_int(0)),
                ];
                for (name, harmless) in dropped {
                    if !harmless {
                        s.hazard(H_SGL_FA4_ARG_DROPPED, &[name]);
                    }
                }
                Ok(())
            },
        },
        Check {
            // `(-1, -1)` becomes `(None, None)` (tuple equality: a list does not match), then
            // flash_attn_varlen_func indexes it.
            name: "window_size",
            sites: WINDOW_INDEX_SITES,
            run: |s| match s.py(Param::WindowSize) {
                PyValue::Tuple(w) if w.len() == 2 && w.iter().all(|x| x.eq_int(-1)) => {
                    s.window = [PyValue::None, PyValue::None];
                    Ok(())
                }
                _ => index_window(s),
            },
        },
    ],
};

/// Sizes the FA4 interface reads, kept for its later asserts.
#[derive(Default)]
struct Fa4Sizes {
    batch: usize,
    seqlen_q: usize,
    total_q: usize,
    heads: usize,
    head_dim: usize,
    heads_kv: usize,
    head_dim_v: usize,
    seqlen_k: usize,
    page_size: usize,
}

/// `_flash_attn_fwd` of `_fa4_interface.py` up to the compile-time asserts (L131-214, L359,
/// L474-476). Sizes are recomputed per check: they are cheap and keep each check self-contained.
static FA4_INTERFACE: Layer<CudaState> = Layer {
    name: "sgl_kernel._fa4_interface._flash_attn_fwd",
    checks: &[
        Check {
            name: "maybe_contiguous q, k, v",
            sites: &[PY_NO_ATTRIBUTE, ATEN_DIM_NO_DIMS],
            run: |s| {
                for param in [Param::Q, Param::KCache, Param::VCache] {
                    python_stride_last(s.py(param))?;
                }
                Ok(())
            },
        },
        Check {
            name: "sizes and page_table",
            sites: &[
                PY_UNPACK,
                PY_NO_ATTRIBUTE,
                PY_TUPLE_INDEX,
                ATEN_DIM_NO_DIMS,
                SGL_FA4I_1,
                SGL_FA4I_2,
                SGL_FA4I_3,
            ],
            run: |s| fa4_sizes(s).map(|_| ()),
        },
        Check {
            name: "k/v shapes",
            sites: &[SGL_FA4I_4, SGL_FA4I_5, SGL_FA4I_6, SGL_FA4I_7],
            run: |s| {
                let z = fa4_sizes(s)?;
                let (k, v) = (fa4_tensor(s, Param::KCache), fa4_tensor(s, Param::VCache));
                let (lead, sites) = if s.py(Param::PageTable).is_none() {
                    ([z.batch, z.seqlen_k], [SGL_FA4I_4, SGL_FA4I_5])
                } else {
                    ([k.shape[0], z.page_size], [SGL_FA4I_6, SGL_FA4I_7])
                };
                ensure(k.shape == [lead[0], lead[1], z.heads_kv, z.head_dim]).at(sites[0])?;
                ensure(v.shape == [lead[0], lead[1], z.heads_kv, z.head_dim_v]).at(sites[1])
            },
        },
        Check {
            name: "cu_seqlens_q and seqused_k shapes",
            sites: &[SGL_FA4I_8, PY_NO_ATTRIBUTE, SGL_FA4I_9],
            run: |s| {
                let z = fa4_sizes(s)?;
                if let Some(cu) = s.py(Param::CuSeqlensQ).as_tensor() {
                    ensure(cu.shape == [z.batch + 1]).at(SGL_FA4I_8)?;
                }
                let seqused = s.py(Param::CacheSeqlens);
                if !seqused.is_none() {
                    // An int cache_seqlens is not expanded on this path.
                    let t = python_tensor(seqused, "shape")?;
                    ensure(t.shape == [z.batch]).at(SGL_FA4I_9)?;
                }
                Ok(())
            },
        },
        Check {
            name: "dtypes",
            sites: &[SGL_FA4I_10, SGL_FA4I_11, SGL_FA4I_12, SGL_FA4I_13],
            run: |s| {
                let dtype = |n| fa4_tensor(s, n).dtype;
                ensure(matches!(dtype(Param::Q), Dtype::Float16 | Dtype::Bfloat16))
                    .at(SGL_FA4I_10)?;
                ensure(
                    dtype(Param::KCache) == dtype(Param::Q)
                        && dtype(Param::VCache) == dtype(Param::Q),
                )
                .at(SGL_FA4I_11)?;
                for param in [Param::CuSeqlensQ, Param::CacheSeqlens] {
                    if let Some(t) = s.py(param).as_tensor() {
                        ensure(t.dtype == Dtype::Int32).at(SGL_FA4I_12)?;
                        ensure(t.stride_of(0) == Some(1)).at(SGL_FA4I_13)?;
                    }
                }
                Ok(())
            },
        },
        Check {
            name: "learnable_sink",
            sites: &[PY_NO_ATTRIBUTE, SGL_FA4I_14, SGL_FA4I_15],
            run: |s| {
                let sinks = s.py(Param::Sinks);
                if sinks.is_none() {
                    return Ok(());
                }
                let heads = fa4_sizes(s)?.heads;
                let t = python_tensor(sinks, "shape")?;
                ensure(t.shape == [heads]).at(SGL_FA4I_14)?;
                ensure(t.dtype == Dtype::Bfloat16).at(SGL_FA4I_15)
            },
        },
        Check {
            name: "devices and head dims",
            sites: &[
                SGL_FA4I_16,
                PY_MODULO_ZERO,
                SGL_FA4I_17,
                SGL_FA4I_18,
                SGL_FA4I_19,
                SGL_FA4I_20,
            ],
            run: |s| {
                let on_cuda = [
                    Param::Q,
                    Param::KCache,
                    Param::VCache,
                    Param::CuSeqlensQ,
                    Param::CacheSeqlens,
                    Param::PageTable,
                    Param::Sinks,
                ]
                .iter()
                .filter_map(|&p| s.py(p).as_tensor())
                .all(|t| t.device_or(Device::Cuda) == Device::Cuda);
                ensure(on_cuda).at(SGL_FA4I_16)?;
                let z = fa4_sizes(s)?;
                if z.heads_kv == 0 {
                    return Err(Fail::new().at(PY_MODULO_ZERO));
                }
                ensure(z.heads % z.heads_kv == 0).at(SGL_FA4I_17)?;
                ensure(z.head_dim <= 256).at(SGL_FA4I_18)?;
                // alignment = 16 // q.element_size(): 8 for the fp16/bf16 inputs allowed above.
                let alignment = 16 / fa4_tensor(s, Param::Q).dtype.size_bytes();
                let fail = |site| Err(Fail::with([alignment.to_string()]).at(site));
                if z.head_dim % alignment != 0 {
                    return fail(SGL_FA4I_19);
                }
                if z.head_dim_v % alignment != 0 {
                    return fail(SGL_FA4I_20);
                }
                Ok(())
            },
        },
        Check {
            name: "softcap with score_mod",
            sites: &[SGL_FA4I_21],
            run: |s| {
                let softcap = s.py(Param::Softcap).as_number().unwrap_or(0.0);
                ensure(softcap == 0.0 || s.py(Param::ScoreMod).is_none())
            },
        },
        Check {
            name: "sm90 kernel",
            sites: &[SGL_FA4I_22, SGL_FA4I_23],
            run: |s| {
                ensure(s.py(Param::PageTable).is_none()).at(SGL_FA4I_22)?;
                let splits = op_int(s.py(Param::NumSplits));
                ensure(splits <= 1).at(SGL_FA4I_23)?;
                if splits < 1 {
                    s.hazard(H_SGL_FA4_SPLITS_UNMODELLED, &[]);
                }
                s.fa4 = Some(Box::new(fa4_resolved(s)?));
                Ok(())
            },
        },
    ],
};

/// `q`, `k_cache` or `v_cache`, which the first FA4 interface check proved to be tensors.
fn fa4_tensor(s: &CudaState, param: Param) -> &TensorArg {
    s.py(param)
        .as_tensor()
        .expect("maybe_contiguous(q, k, v) already required tensors")
}

/// The sizes `_flash_attn_fwd` unpacks (L132-154), with the page_table asserts between them.
fn fa4_sizes(s: &CudaState) -> Result<Fa4Sizes, Fail> {
    let (q, k) = (fa4_tensor(s, Param::Q), fa4_tensor(s, Param::KCache));
    let unpack = |t: &TensorArg, want: usize| {
        if t.ndim() < want {
            Err(Fail::with([want.to_string(), t.ndim().to_string()]).at(PY_UNPACK))
        } else {
            Ok(())
        }
    };
    unpack(q, 2)?;
    let mut z = Fa4Sizes {
        heads: q.shape[q.ndim() - 2],
        head_dim: q.shape[q.ndim() - 1],
        ..Fa4Sizes::default()
    };
    match s.py(Param::CuSeqlensQ) {
        PyValue::None => {
            z.batch = q.shape[0];
            z.seqlen_q = q.shape[1];
            z.total_q = z.batch * z.seqlen_q;
        }
        cu => {
            z.batch = python_shape(cu, 0)?.saturating_sub(1);
            z.seqlen_q = match s.py(Param::MaxSeqlenQ) {
                PyValue::Int(m) => (*m).max(0) as usize,
                _ => q.shape[0],
            };
            z.total_q = q.shape[0];
        }
    }
    match s.py(Param::PageTable) {
        PyValue::None => z.seqlen_k = python_shape(s.py(Param::KCache), -3)?,
        pt => {
            let table = python_tensor(pt, "dtype")?;
            ensure(table.dtype == Dtype::Int32).at(SGL_FA4I_1)?;
            ensure(python_stride_last(pt)? == 1).at(SGL_FA4I_2)?;
            let pages_per_seq = python_shape(pt, 1)?;
            ensure(table.shape == [z.batch, pages_per_seq]).at(SGL_FA4I_3)?;
            unpack(k, 2)?;
            z.page_size = k.shape[1];
            z.seqlen_k = pages_per_seq * z.page_size;
        }
    }
    z.heads_kv = python_shape(s.py(Param::KCache), -2)?;
    z.head_dim_v = python_shape(s.py(Param::VCache), -1)?;
    Ok(z)
}

/// What an accepted FA4 call resolves to. Tile sizes are FA4's own and not modelled (0).
fn fa4_resolved(s: &CudaState) -> Result<Resolved, Fail> {
    let z = fa4_sizes(s)?;
    let window = |w: &PyValue| if w.is_none() { -1 } else { op_int(w) };
    let (left, right) = (window(&s.window[0]), window(&s.window[1]));
    let causal = s.py(Param::Causal).truthy().unwrap_or(false);
    let softmax_scale = match s.py(Param::SoftmaxScale) {
        PyValue::None => (z.head_dim as f64).powf(-0.5),
        given => given.as_number().unwrap_or(f64::NAN),
    };
    let pack_gqa = match s.py(Param::PackGqa) {
        PyValue::None => z.heads / z.heads_kv.max(1) > 1,
        given => given.truthy().unwrap_or(false),
    };
    let varlen_q = !s.py(Param::CuSeqlensQ).is_none();
    Ok(Resolved {
        batch_size: z.batch,
        seqlen_q: z.seqlen_q,
        total_q: z.total_q,
        seqlen_k: z.seqlen_k,
        num_heads: z.heads,
        num_heads_k: z.heads_kv,
        head_size: z.head_dim,
        head_size_v: z.head_dim_v,
        head_size_rounded: z.head_dim,
        head_size_v_rounded: z.head_dim_v,
        paged: false,
        page_size: 1,
        varlen_q,
        is_causal: causal,
        is_local: !causal && (left >= 0 || right >= 0),
        window_left: left,
        window_right: right,
        attention_chunk: 0,
        softcap: s.py(Param::Softcap).as_number().unwrap_or(0.0),
        softmax_scale,
        num_splits: 1,
        pack_gqa,
        tile_m: 0,
        tile_n: 0,
        lse_layout: if varlen_q {
            LseLayout::HeadTotal
        } else {
            LseLayout::BatchHeadSeq
        },
        mla_decode: false,
    })
}

static FA4_LAYERS: [&Layer<CudaState>; 2] = [&FA4_WRAPPER, &FA4_INTERFACE];

/// The `sgl-kernel` profile.
pub struct SglKernel;

pub static SGL_KERNEL: SglKernel = SglKernel;

impl Profile for SglKernel {
    fn name(&self) -> &'static str {
        "sgl-kernel"
    }

    fn models(&self) -> &'static str {
        "sgl-kernel 0.3.21 (sgl-project/sglang@b5493f65b sgl_kernel/flash_attn.py, _fa4_interface.py) with sgl-project/sgl-flash-attn@f866ec34 hopper/flash_api.cpp, sm90"
    }

    fn native_device(&self) -> Device {
        Device::Cuda
    }

    fn validate(&self, call: &KvCacheCall) -> Verdict {
        let bound = match signature::bind(SGL_FWD_OP.signature, call) {
            Ok(bound) => bound,
            Err(message) => {
                return Verdict {
                    profile: self.name(),
                    outcome: Outcome::Rejected(binding_rejection(message)),
                    hazards: Vec::new(),
                };
            }
        };
        let mut state = CudaState::new(bound, Flavour::Legacy, &SGL_FWD_OP);
        // `if ver == 4:` is Python equality (4.0 and True + 3 select FA4, "4" does not).
        let fa4 = state.py(Param::Ver).eq_int(4);
        let layers: &[&Layer<CudaState>] = if fa4 { &FA4_LAYERS } else { &FA3_LAYERS };
        let outcome = match run_layers(&mut state, layers) {
            Ok(()) => {
                let lse = state.py(Param::ReturnSoftmaxLse).truthy() == Some(true);
                match state.fa4.take() {
                    Some(resolved) => {
                        if lse {
                            state.hazard(H_SGL_FA4_RETURNS_2_TUPLE, &[]);
                        }
                        Outcome::Accepted(resolved)
                    }
                    None => {
                        if lse {
                            state.hazard(
                                H_CUDA_RETURNS_4_TUPLE,
                                &["out_accum, softmax_lse_accum; None unless split"],
                            );
                        }
                        Outcome::Accepted(Box::new(resolved(&state)))
                    }
                }
            }
            Err(rejection) => Outcome::Rejected(render(&state, rejection)),
        };
        Verdict {
            profile: self.name(),
            outcome,
            hazards: state.hazards,
        }
    }

    fn sites(&self) -> &'static [&'static str] {
        static SITES: OnceLock<Vec<&'static str>> = OnceLock::new();
        SITES.get_or_init(|| profile_sites(&[&FA4_LAYERS, &FA3_LAYERS]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::profiles::cuda_state::python_index;

    #[test]
    fn int_conversion_follows_python() {
        assert_eq!(python_int(&PyValue::None), Ok(PyValue::Int(0)));
        assert_eq!(python_int(&PyValue::Float(-2.7)), Ok(PyValue::Int(-2)));
        assert_eq!(
            python_int(&PyValue::Str(" 1_0 ".into())),
            Ok(PyValue::Int(10))
        );
        assert_eq!(python_int(&PyValue::Str("-7".into())), Ok(PyValue::Int(-7)));
        assert!(python_int(&PyValue::Str("1__0".into())).is_err());
        assert!(python_int(&PyValue::Str("_1".into())).is_err());
        assert_eq!(
            python_int(&PyValue::Str("x".into())),
            Err(Fail::with(["'x'".to_string()]).at(PY_INT_LITERAL))
        );
        assert_eq!(
            python_int(&PyValue::List(vec![])),
            Err(Fail::with(["list".to_string()]).at(PY_INT_TYPE))
        );
    }

    #[test]
    fn window_tensor_elements_are_indexable() {
        let w = PyValue::Tensor(TensorArg::with_ints(Dtype::Int64, &[2], vec![5, 0]));
        let left = python_index(&w, 0).unwrap();
        assert_eq!(op_int(&left), 5);
        assert!(python_index(&w, 2).is_err());
    }
}
