//! The kernel path: a host implementation in C (kernels/) of the forward the MUSA device runs,
//! with the device's decomposition, so that its numerics and its sensitivity to scheduler
//! metadata resemble the device's (musa-fa3.md §6.9, §6.10; cuda-fa3.md D.2, D.11–D.15).
//!
//! [`run`] takes a call and its materialised tensors, resolves mate's parameters
//! ([`crate::mate`]), re-checks every size and index the C code will use (so no input makes it
//! read or write out of bounds), then runs the four steps: append-KV, metadata (Rust, in
//! [`crate::mate`]), forward tiles in the scheduler's order (in parallel with rayon, one C call
//! per tile) and the combine of split partials.
//!
//! Rows the device never writes (e.g. m-blocks a metadata tensor leaves out) come back as NaN:
//! the device leaves that memory uninitialised.

#[rustfmt::skip]
#[allow(non_camel_case_types, non_upper_case_globals, dead_code, clippy::all)]
mod bindings;
mod conventions;
mod plan;

pub use plan::MAX_HEAD_DIM;

use crate::call::{Dtype, KvCacheCall};
use crate::mate::{DEFAULT_MP, SchedulerMetadata};
use crate::numeric;
use crate::parallel;
use crate::reference::{ContextParallel, RefOutput, Stack};
use crate::tensor::{DEFAULT_MEMORY_CAP, HostTensor, Tensors};
use crate::tolerance;
use bindings as ffi;
use ndarray::{ArrayD, IxDyn};
use plan::Plan;
use rayon::prelude::*;
use thiserror::Error;

/// Where the forward's scheduler metadata comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetadataSource {
    /// The call's `scheduler_metadata` tensor when it passes one, else none (single-tile
    /// scheduler, one split, no combine).
    FromCall,
    /// The values SGLang's wrapper passes on for a call that passes none (`FromCall` for a call
    /// that does).
    Injected(Vec<i32>),
    /// Metadata computed from the call's own values ([`crate::mate::scheduler_metadata`]), as
    /// a fresh SGLang injection for this very call would give.
    Computed,
    /// No metadata, whatever the call passes.
    None,
}

/// The instruction-set variant of the forward tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    Portable,
    X86Avx2Fma,
    X86Avx512,
}

impl Isa {
    /// The best variant this CPU runs.
    pub fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vl") {
                return Isa::X86Avx512;
            }
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                return Isa::X86Avx2Fma;
            }
        }
        Isa::Portable
    }

    fn code(self) -> i32 {
        (match self {
            Isa::Portable => ffi::FA3_ISA_PORTABLE,
            Isa::X86Avx2Fma => ffi::FA3_ISA_X86_AVX2_FMA,
            Isa::X86Avx512 => ffi::FA3_ISA_X86_AVX512,
        }) as i32
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct KernelOptions {
    /// Multiprocessor count of the modelled device (split heuristic, metadata).
    pub mp: usize,
    pub metadata: MetadataSource,
    /// `None`: the best variant this CPU supports.
    pub isa: Option<Isa>,
    /// Cap on the bytes the kernel allocates (outputs, split partials, workspaces).
    pub memory_cap: usize,
    /// Whose conventions the call follows where the stacks differ. `Musa`: head-dim pairs mate has
    /// no kernel for are rejected as mate rejects them (`Add config for headdim ...`), an int
    /// `cache_seqlens` has `k_cache.shape[0]` entries, any non-zero softcap applies. The CUDA
    /// stacks (for the numerics of their fp8 and `qv` calls): such pairs run with mate's
    /// candidate tile_m, an int `cache_seqlens` has one entry per batch, only a positive softcap
    /// applies.
    pub stack: Stack,
    /// One rank of a context-parallel call through mate's FA3 wrapper (the call itself in the
    /// canonical signature).
    pub context_parallel: Option<ContextParallel>,
}

impl Default for KernelOptions {
    fn default() -> Self {
        KernelOptions {
            mp: DEFAULT_MP,
            metadata: MetadataSource::FromCall,
            isa: None,
            memory_cap: DEFAULT_MEMORY_CAP,
            stack: Stack::Musa,
            context_parallel: None,
        }
    }
}

#[derive(Debug, Error, PartialEq)]
pub enum KernelError {
    /// The call or its tensors are outside what the kernel path takes (validation should have
    /// rejected it, or it would make the device read or write out of bounds).
    #[error("kernel: {0}")]
    Rejected(String),
    #[error("kernel: needs {needed} bytes, over the {cap} bytes left of the memory cap")]
    OverCap { needed: u128, cap: usize },
}

/// What the forward produced.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelOutput {
    /// `(b, seqlen_q, h, dv)` or `(total_q, h, dv)`; dtype of q (bf16 for fp8 q).
    pub out: HostTensor,
    /// float32 `(b, h, seqlen_q)` or `(h, total_q)`.
    pub lse: HostTensor,
    /// The caches after the append-KV pass; `None` without new keys (the caches are unchanged).
    pub k_cache: Option<HostTensor>,
    pub v_cache: Option<HostTensor>,
    /// The metadata the forward consumed, if any.
    pub metadata: Option<SchedulerMetadata>,
    /// S_F, the forward's split count (1 without metadata).
    pub num_splits: usize,
}

impl KernelOutput {
    /// Judges the output against the reference with the tolerance rule (which reads the input
    /// dtype and whether keys were rotated from `ref64`).
    pub fn judge(
        self,
        ref64: &RefOutput,
        lowprec: &RefOutput,
    ) -> Result<tolerance::Report, tolerance::Mismatch> {
        tolerance::judge(
            self.out.data,
            self.lse.data,
            self.k_cache.map(|t| t.data),
            self.v_cache.map(|t| t.data),
            ref64,
            lowprec,
        )
    }
}

/// A tensor's data in its storage dtype, owned for the duration of the C calls.
struct Buffer {
    bytes: Vec<u8>,
    dtype: Dtype,
    numel: usize,
}

fn dtype_code(dtype: Dtype) -> i32 {
    (match dtype {
        Dtype::Float16 => ffi::FA3_DTYPE_F16,
        Dtype::Bfloat16 => ffi::FA3_DTYPE_BF16,
        Dtype::Float8E4m3fn => ffi::FA3_DTYPE_E4M3,
        _ => ffi::FA3_DTYPE_F32,
    }) as i32
}

fn storage_dtype(dtype: Dtype) -> Dtype {
    match dtype {
        Dtype::Float16 | Dtype::Bfloat16 | Dtype::Float8E4m3fn => dtype,
        _ => Dtype::Float32,
    }
}

impl Buffer {
    /// `tensor`'s values stored as `dtype` stores on the device.
    fn of(dtype: Dtype, tensor: &HostTensor) -> Buffer {
        let dtype = storage_dtype(dtype);
        let values = tensor.data.as_standard_layout();
        let values = values.as_slice().expect("standard layout");
        Buffer {
            bytes: numeric::to_le_bytes(dtype, values),
            dtype,
            numel: values.len(),
        }
    }

    fn filled(dtype: Dtype, numel: usize, value: f64) -> Buffer {
        let dtype = storage_dtype(dtype);
        Buffer {
            bytes: numeric::to_le_bytes(dtype, &[value]).repeat(numel),
            dtype,
            numel,
        }
    }

    fn decode(&self, shape: &[usize]) -> HostTensor {
        HostTensor {
            dtype: self.dtype,
            data: ArrayD::from_shape_vec(
                IxDyn(shape),
                numeric::from_le_bytes(self.dtype, &self.bytes),
            )
            .expect("buffer length matches its shape"),
        }
    }

    /// The C view of an input, with strides (in elements) for up to four logical dimensions.
    /// The C code never writes through it.
    fn view(&self, stride: [usize; 4]) -> ffi::fa3_tensor {
        self.view_with(self.bytes.as_ptr() as *mut std::ffi::c_void, stride)
    }

    /// The C view of a buffer the C code writes.
    fn view_mut(&mut self, stride: [usize; 4]) -> ffi::fa3_tensor {
        let data = self.bytes.as_mut_ptr().cast();
        self.view_with(data, stride)
    }

    fn view_with(&self, data: *mut std::ffi::c_void, stride: [usize; 4]) -> ffi::fa3_tensor {
        ffi::fa3_tensor {
            data,
            numel: self.numel as i64,
            dtype: dtype_code(self.dtype),
            stride: stride.map(|s| s as i64),
        }
    }
}

fn absent_tensor() -> ffi::fa3_tensor {
    ffi::fa3_tensor {
        data: std::ptr::null_mut(),
        numel: 0,
        dtype: ffi::FA3_DTYPE_F32 as i32,
        stride: [0; 4],
    }
}

fn index_view(values: Option<&Vec<i32>>) -> ffi::fa3_index {
    match values {
        Some(v) => ffi::fa3_index {
            data: v.as_ptr(),
            numel: v.len() as i64,
        },
        None => ffi::fa3_index {
            data: std::ptr::null(),
            numel: 0,
        },
    }
}

fn int32s(tensors: &Tensors, name: &str) -> Option<Vec<i32>> {
    plan::ints(tensors, name).map(|v| v.into_iter().map(|x| x as i32).collect())
}

/// Strides of a 4-D row-major tensor `(a, b, c, d)`: `[b·c·d, c·d, d, 1]`.
fn strides4(shape: [usize; 4]) -> [usize; 4] {
    [
        shape[1] * shape[2] * shape[3],
        shape[2] * shape[3],
        shape[3],
        1,
    ]
}

/// Strides (batch, row, head, -) of a `(b, rows, heads, dim)` or varlen `(total, heads, dim)`
/// tensor: varlen tensors have batch stride 0 (rows are offset by cu_seqlens).
fn row_strides(heads: usize, dim: usize, rows_per_batch: Option<usize>) -> [usize; 4] {
    [
        rows_per_batch.map_or(0, |r| r * heads * dim),
        heads * dim,
        dim,
        1,
    ]
}

/// Runs the kernel path on a call the `musa` profile accepted and its materialised tensors.
pub fn run(
    call: &KvCacheCall,
    tensors: &Tensors,
    options: &KernelOptions,
) -> Result<KernelOutput, KernelError> {
    let mut prepared = prepare(call, tensors, options)?;
    prepared.execute();
    Ok(prepared.output())
}

/// A checked call with its tensors in their storage dtypes, ready to run (possibly many times:
/// each run appends again and overwrites the outputs, as repeated device calls would).
pub struct Prepared {
    plan: Plan,
    mp: usize,
    isa: Isa,
    q: Buffer,
    k_cache: Buffer,
    v_cache: Buffer,
    k_new: Option<Buffer>,
    v_new: Option<Buffer>,
    qv: Option<Buffer>,
    rotary_cos: Option<Buffer>,
    rotary_sin: Option<Buffer>,
    q_descale: Option<Buffer>,
    k_descale: Option<Buffer>,
    v_descale: Option<Buffer>,
    sinks: Option<Buffer>,
    out: Buffer,
    lse: Buffer,
    o_accum: Buffer,
    lse_accum: Buffer,
    cu_seqlens_q: Option<Vec<i32>>,
    cu_seqlens_k_new: Option<Vec<i32>>,
    cache_batch_idx: Option<Vec<i32>>,
    cache_leftpad: Option<Vec<i32>>,
    page_table: Option<Vec<i32>>,
    rotary_seqlens: Option<Vec<i32>>,
}

/// Checks the call (see [`run`]) and converts its tensors to their storage dtypes.
pub fn prepare(
    call: &KvCacheCall,
    tensors: &Tensors,
    options: &KernelOptions,
) -> Result<Prepared, KernelError> {
    let plan = plan::plan(call, tensors, options)?;
    let dims = &plan.dims;
    let (h, dv) = (dims.num_heads, dims.head_size_v);
    let accum_numel = plan.accum_numel();
    let inputs_bytes: u128 = tensors
        .values()
        .map(|t| (t.data.len() * storage_dtype(t.dtype).size_bytes()) as u128)
        .sum();
    // The inputs in their storage dtypes, out and lse (at most 4 bytes an element), the split
    // partials, the work tiles (at least one query row of one head and split each, and at most
    // one partial tile per batch and head), and the f64 copies of out, lse and both caches that
    // [`KernelOutput`] hands back. Tile workspaces (under a MiB each with tile_m ≤ 256 and head
    // dims ≤ MAX_HEAD_DIM, one per worker) aside.
    let (rows, splits) = (dims.total_q * h, plan.num_splits);
    let tiles = (rows + dims.batch_size * h) * splits;
    let caches = tensors["k_cache"].data.len() + tensors["v_cache"].data.len();
    let needed = inputs_bytes
        + (rows * (dv + 1) * 4) as u128
        + (accum_numel * (dv + 1) * 4) as u128
        + (tiles * std::mem::size_of::<ffi::fa3_tile>()) as u128
        + ((rows * (dv + 1) + caches) * 8) as u128;
    if needed > options.memory_cap as u128 {
        return Err(KernelError::OverCap {
            needed,
            cap: options.memory_cap,
        });
    }
    let tensor = |name: &str| tensors.get(name).map(|t| Buffer::of(t.dtype, t));
    let f32_tensor = |name: &str| tensors.get(name).map(|t| Buffer::of(Dtype::Float32, t));
    let index = |name: &str| int32s(tensors, name);
    Ok(Prepared {
        mp: options.mp,
        isa: options.isa.unwrap_or_else(Isa::detect),
        q: tensor("q").expect("plan checked q"),
        k_cache: tensor("k_cache").expect("plan checked k_cache"),
        v_cache: tensor("v_cache").expect("plan checked v_cache"),
        k_new: tensor("k"),
        v_new: tensor("v"),
        qv: tensor("qv"),
        rotary_cos: tensor("rotary_cos"),
        rotary_sin: tensor("rotary_sin"),
        q_descale: f32_tensor("q_descale"),
        k_descale: f32_tensor("k_descale"),
        v_descale: f32_tensor("v_descale"),
        sinks: f32_tensor("sinks"),
        out: Buffer::filled(plan.out_dtype, dims.total_q * h * dv, f64::NAN),
        lse: Buffer::filled(Dtype::Float32, dims.total_q * h, f64::NAN),
        o_accum: Buffer::filled(Dtype::Float32, accum_numel * dv, f64::NAN),
        lse_accum: Buffer::filled(Dtype::Float32, accum_numel, f64::NAN),
        cu_seqlens_q: index("cu_seqlens_q"),
        cu_seqlens_k_new: if dims.varlen_new {
            index("cu_seqlens_k_new")
        } else {
            None
        },
        cache_batch_idx: index("cache_batch_idx"),
        cache_leftpad: index("cache_leftpad"),
        page_table: index("page_table"),
        rotary_seqlens: index("rotary_seqlens"),
        plan,
    })
}

impl Prepared {
    /// The C view of the call: input views read-only, outputs and caches through `&mut self`.
    fn params(&mut self) -> ffi::fa3_fwd_params {
        let plan = &self.plan;
        let dims = &plan.dims;
        let (b, h, hk, d, dv) = (
            dims.batch_size,
            dims.num_heads,
            dims.num_heads_k,
            dims.head_size,
            dims.head_size_v,
        );
        let rows_per_batch = (!dims.varlen_q).then_some(dims.seqlen_q);
        let new_rows = (!dims.varlen_new).then_some(dims.seqlen_new);
        let cache_rows = plan.cache_rows();
        let opt_view = |buf: &Option<Buffer>, stride: [usize; 4]| {
            buf.as_ref().map_or_else(absent_tensor, |b| b.view(stride))
        };
        let lse_strides = match rows_per_batch {
            Some(rows) => [h * rows, rows, 1, 0],
            None => [0, dims.total_q, 1, 0],
        };
        let (splits, accum_rows) = (plan.accum_splits(), plan.accum_rows());
        let accum_strides = [
            if dims.varlen_q {
                0
            } else {
                h * splits * accum_rows
            },
            splits * accum_rows,
            accum_rows,
            1,
        ];
        let rotary_strides = [plan.rotary_dim / 2, 1, 0, 0];
        let metadata = plan.metadata.as_ref();
        let mask = plan.mask;
        let device = &plan.conventions;
        ffi::fa3_fwd_params {
            q: self.q.view(row_strides(h, d, rows_per_batch)),
            k_cache: self
                .k_cache
                .view_mut(strides4([dims.cache_batch, cache_rows, hk, d])),
            v_cache: self
                .v_cache
                .view_mut(strides4([dims.cache_batch, cache_rows, hk, dv])),
            k_new: opt_view(&self.k_new, row_strides(hk, d, new_rows)),
            v_new: opt_view(&self.v_new, row_strides(hk, dv, new_rows)),
            qv: opt_view(&self.qv, row_strides(h, dv, rows_per_batch)),
            out: self.out.view_mut(row_strides(h, dv, rows_per_batch)),
            lse: self.lse.view_mut(lse_strides),
            o_accum: self.o_accum.view_mut(accum_strides.map(|s| s * dv)),
            lse_accum: self.lse_accum.view_mut(accum_strides),
            rotary_cos: opt_view(&self.rotary_cos, rotary_strides),
            rotary_sin: opt_view(&self.rotary_sin, rotary_strides),
            q_descale: opt_view(&self.q_descale, [hk, 1, 0, 0]),
            k_descale: opt_view(&self.k_descale, [hk, 1, 0, 0]),
            v_descale: opt_view(&self.v_descale, [hk, 1, 0, 0]),
            sinks: opt_view(&self.sinks, [1, 0, 0, 0]),
            cu_seqlens_q: index_view(self.cu_seqlens_q.as_ref()),
            cache_seqlens: index_view(plan.cache_seqlens.as_ref()),
            cu_seqlens_k_new: index_view(self.cu_seqlens_k_new.as_ref()),
            cache_batch_idx: index_view(self.cache_batch_idx.as_ref()),
            cache_leftpad: index_view(self.cache_leftpad.as_ref()),
            page_table: index_view(self.page_table.as_ref()),
            rotary_seqlens: index_view(self.rotary_seqlens.as_ref()),
            page_table_stride: dims.pages_per_seq as i64,
            page_size: dims.page_size as i64,
            batch: b as i64,
            seqlen_q: dims.seqlen_q as i64,
            seqlen_k: dims.seqlen_k as i64,
            seqlen_k_new: dims.seqlen_new as i64,
            num_heads: h as i64,
            num_heads_k: hk as i64,
            head_dim: d as i64,
            head_dim_v: dv as i64,
            rotary_dim: plan.rotary_dim as i64,
            rotary_interleaved: plan.rotary_interleaved as i32,
            is_causal: mask.is_causal as i32,
            is_local: mask.is_local as i32,
            window_left: mask.window_left,
            window_right: mask.window_right,
            attention_chunk: mask.attention_chunk,
            cp_world_size: plan.context_parallel.as_ref().map_or(1, |cp| cp.0),
            cp_rank: plan.context_parallel.as_ref().map_or(0, |cp| cp.1),
            cp_tot_seqused_k: index_view(plan.context_parallel.as_ref().map(|cp| &cp.2)),
            softmax_scale: plan.softmax_scale as f32,
            softcap: plan.softcap as f32,
            pack_gqa: plan.config.pack_gqa as i32,
            tile_m: plan.config.tile_m as i64,
            tile_n: plan.config.tile_n as i64,
            num_splits: plan.num_splits as i64,
            clamp_row_max: device.clamp_row_max as i32,
            sink_on_empty_rows: device.sink_on_empty_rows as i32,
            round_p: device.round_p as i32,
            k_reads: device.k_reads.code(),
            v_reads: device.v_reads.code(),
            append_dim: device.append_dim as i64,
            append_dim_v: device.append_dim_v as i64,
            rotary_rows: device.rotary_rows as i64,
            num_splits_dynamic: index_view(metadata.map(|m| &m.num_splits_dynamic)),
            batch_table: index_view(metadata.map(|m| &m.batch_table)),
            num_m_blocks: index_view(metadata.map(|m| &m.num_m_blocks)),
            isa: self.isa.code(),
        }
    }

    /// Runs the four steps: append-KV, (metadata, already in the plan), forward tiles in the
    /// scheduler's order on all cores, combine.
    pub fn execute(&mut self) {
        let params = self.params();
        let shared = SharedParams(&params);
        let plan = &self.plan;
        let (b, h) = (plan.dims.batch_size, plan.dims.num_heads);
        // 1. Append-KV, batch by batch in order (duplicate cache_batch_idx entries: the last wins).
        if plan.dims.new_kv {
            for batch in 0..b {
                // SAFETY: plan() checked every size and index the C code derives from params.
                unsafe { ffi::fa3_append_kv(shared.0, batch as i64) };
            }
        }
        // 3. Forward tiles.
        let tiles = schedule(plan, self.mp);
        // SAFETY: as above; the C code only reads params.
        let workspace_len = unsafe { ffi::fa3_fwd_workspace_floats(shared.0) } as usize;
        // One workspace per chunk of tiles (rayon would re-run a per-item init at every split).
        let chunk_len = tiles
            .len()
            .div_ceil(8 * rayon::current_num_threads())
            .max(1);
        let run_tiles = |chunk: &[ffi::fa3_tile]| {
            let shared = &shared;
            let mut workspace = vec![0f32; workspace_len];
            for tile in chunk {
                // SAFETY: tiles write disjoint rows of out/lse/o_accum/lse_accum (batch_table is
                // a permutation, each tile owns its m-block rows of one head group and split).
                unsafe { ffi::fa3_fwd_tile(shared.0, tile, workspace.as_mut_ptr()) }
            }
        };
        match parallel::enabled() {
            true => tiles.par_chunks(chunk_len).for_each(run_tiles),
            false => run_tiles(&tiles),
        }
        // 4. Combine.
        if let Some(m) = &plan.metadata {
            let combine = |i: usize| {
                let shared = &shared;
                let (position, head) = (i / h, i % h);
                if m.num_splits_dynamic[position] > 1 {
                    // SAFETY: each (position, head) owns its rows of out/lse.
                    unsafe { ffi::fa3_combine(shared.0, position as i64, head as i64) }
                }
            };
            match parallel::enabled() {
                true => (0..b * h).into_par_iter().for_each(combine),
                false => (0..b * h).for_each(combine),
            }
        }
    }

    /// The outputs and caches, in f64.
    pub fn output(&self) -> KernelOutput {
        let dims = &self.plan.dims;
        let (b, h, hk) = (dims.batch_size, dims.num_heads, dims.num_heads_k);
        let (out_shape, lse_shape) = if dims.varlen_q {
            (
                vec![dims.total_q, h, dims.head_size_v],
                vec![h, dims.total_q],
            )
        } else {
            (
                vec![b, dims.seqlen_q, h, dims.head_size_v],
                vec![b, h, dims.seqlen_q],
            )
        };
        let cache_shape = |dim| [dims.cache_batch, self.plan.cache_rows(), hk, dim];
        let appended = self.k_new.is_some();
        KernelOutput {
            out: self.out.decode(&out_shape),
            lse: self.lse.decode(&lse_shape),
            k_cache: appended.then(|| self.k_cache.decode(&cache_shape(dims.head_size))),
            v_cache: appended.then(|| self.v_cache.decode(&cache_shape(dims.head_size_v))),
            metadata: self.plan.metadata.clone(),
            num_splits: self.plan.num_splits,
        }
    }
}

/// The params shared by the worker threads: the C calls read them and write disjoint regions
/// of the buffers they point to.
struct SharedParams<'a>(&'a ffi::fa3_fwd_params);

// SAFETY: see `Prepared::execute`: concurrent calls write disjoint memory and only read the rest.
unsafe impl Sync for SharedParams<'_> {}

/// The forward's work tiles in the order the device's scheduler visits them (§6.9): with
/// metadata, StaticPersistentTileScheduler's decomposition of t = 0 .. blocks·h′·b·S_F (CTA
/// `t mod MP` runs them in t order), without it, SingleTileScheduler's grid.
fn schedule(plan: &Plan, mp: usize) -> Vec<ffi::fa3_tile> {
    let dims = &plan.dims;
    let group = dims.num_heads / dims.num_heads_k;
    let packed_rows = dims.seqlen_q * if plan.config.pack_gqa { group } else { 1 };
    let blocks = packed_rows.div_ceil(plan.config.tile_m);
    let heads = if plan.config.pack_gqa {
        dims.num_heads_k
    } else {
        dims.num_heads
    };
    let tile = |batch: usize, head_block: usize, m_block: usize, split: usize, splits: i32| {
        ffi::fa3_tile {
            batch: batch as i64,
            head_block: head_block as i64,
            m_block: m_block as i64,
            split: split as i64,
            num_splits_of_batch: splits as i64,
        }
    };
    match &plan.metadata {
        None => (0..dims.batch_size)
            .flat_map(|batch| {
                (0..heads)
                    .flat_map(move |head| (0..blocks).map(move |m| tile(batch, head, m, 0, 1)))
            })
            .collect(),
        Some(metadata) => {
            let s = plan.num_splits;
            let total = blocks * heads * dims.batch_size * s;
            let mut tiles = Vec::new();
            // Each CTA c runs t = c, c + MP, ...; listing CTA by CTA keeps that order per CTA.
            for cta in 0..mp.min(total) {
                for t in (cta..total).step_by(mp) {
                    let block = t % blocks;
                    let u = t / blocks;
                    let (head_split, position) = (u % (heads * s), u / (heads * s));
                    let (head, split) = (head_split / s, head_split % s);
                    let nsd = metadata.num_splits_dynamic[position];
                    if (split as i64) < nsd as i64
                        && (block as i64) < metadata.num_m_blocks[position] as i64
                    {
                        let batch = metadata.batch_table[position] as usize;
                        tiles.push(tile(batch, head, block, split, nsd));
                    }
                }
            }
            tiles
        }
    }
}
