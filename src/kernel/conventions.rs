//! Where the modelled device departs from clean attention (docs/musa-device.md): mate keeps a
//! running row maximum of −inf as 0 (D1, and the sink LSE of fully masked rows), rounds P to the
//! input dtype before P·V, reads whole key blocks through its load paths (D3, D5) and stores the
//! rounded head dims of a paged append (D4). The CUDA stacks' model keeps to the call's keys.

use super::bindings as ffi;
use crate::call::Dims;
use crate::mate::KernelConfig;
use crate::reference::Stack;

/// How the forward reads cache rows the call's lengths do not bound (`fa3_kv_reads`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum KvReads {
    /// Only the sequence's keys, checked to lie within the capacity.
    Keys,
    /// mate's TME loads of a contiguous cache: whole blocks, zero past the capacity.
    ShapeBounded,
    /// mate's LSU and paged loads: whole blocks through the cache row or the page table, zero
    /// outside the buffer.
    Robust,
}

impl KvReads {
    pub(super) fn code(self) -> i32 {
        (match self {
            KvReads::Keys => ffi::FA3_KV_READS_KEYS,
            KvReads::ShapeBounded => ffi::FA3_KV_READS_SHAPE_BOUNDED,
            KvReads::Robust => ffi::FA3_KV_READS_ROBUST,
        }) as i32
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Conventions {
    pub clamp_row_max: bool,
    pub sink_on_empty_rows: bool,
    pub round_p: bool,
    pub k_reads: KvReads,
    pub v_reads: KvReads,
    /// Columns one appended K (V) row stores: the rounded head dim where mate's paged store has
    /// no column predicate.
    pub append_dim: usize,
    pub append_dim_v: usize,
    /// cos/sin rows the device reads.
    pub rotary_rows: usize,
}

impl Conventions {
    /// `rotary_table_rows` is `rotary_cos.shape[0]` (0 without rotary).
    pub(super) fn of(
        stack: Stack,
        dims: &Dims,
        config: &KernelConfig,
        has_leftpad: bool,
        has_rotary: bool,
        rotary_table_rows: usize,
    ) -> Conventions {
        if stack != Stack::Musa {
            return Conventions {
                clamp_row_max: false,
                sink_on_empty_rows: false,
                round_p: true,
                k_reads: KvReads::Keys,
                v_reads: KvReads::Keys,
                append_dim: dims.head_size,
                append_dim_v: dims.head_size_v,
                rotary_rows: rotary_table_rows,
            };
        }
        // mp31_fmha_fwd_tme_warpspecialized.hpp L118-L120: paged K and V go through
        // PagedKVManager (TME per page or LSU), a contiguous cache through TME, K by LSU when
        // cache_leftpad is given. TME paged and LSU paged read alike in this model.
        let k_reads = if dims.paged || has_leftpad {
            KvReads::Robust
        } else {
            KvReads::ShapeBounded
        };
        let v_reads = if dims.paged {
            KvReads::Robust
        } else {
            KvReads::ShapeBounded
        };
        Conventions {
            clamp_row_max: true,
            sink_on_empty_rows: true,
            round_p: true,
            k_reads,
            v_reads,
            // PagedKVManager::store_K/store_V: row predicate only; the rotary K store and the
            // contiguous store check columns (D4).
            append_dim: if dims.paged && !has_rotary {
                config.head_dim_rounded
            } else {
                dims.head_size
            },
            append_dim_v: if dims.paged {
                config.head_dim_v_rounded
            } else {
                dims.head_size_v
            },
            // fwd_kern.j2 L359: the cos/sin table is sized {capacity, rotary_dim / 2}.
            rotary_rows: dims.seqlen_k,
        }
    }
}
