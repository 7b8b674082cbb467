//! The arguments a porter passed to `get_scheduler_metadata` (the FA3 signature that mate's
//! `flash_attn_3.interface` wrapper and sgl-kernel share, musa-fa3.md §2.5(b)): a call spec's
//! optional `metadata_args` object, describing what its `scheduler_metadata` was computed for.

use serde::{Deserialize, Serialize};

/// `get_scheduler_metadata(...)` keyword arguments, named as in Python. Omitted optional fields
/// take the Python defaults.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetadataArgsSpec {
    pub batch_size: usize,
    pub max_seqlen_q: usize,
    pub max_seqlen_k: usize,
    pub num_heads_q: usize,
    pub num_heads_kv: usize,
    pub headdim: usize,
    /// The values of the `cache_seqlens` tensor.
    pub cache_seqlens: Vec<i64>,
    /// `torch.bfloat16` by default; accepted and never used by mate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qkv_dtype: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headdim_v: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cu_seqlens_q: Option<Vec<i64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cu_seqlens_k_new: Option<Vec<i64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_leftpad: Option<Vec<i64>>,
    /// Dropped by mate's FA3 wrapper before mate sees it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_size: Option<usize>,
    #[serde(default)]
    pub max_seqlen_k_new: usize,
    #[serde(default)]
    pub causal: bool,
    /// `None` is Python's `(-1, -1)` default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_size: Option<[i64; 2]>,
    #[serde(default)]
    pub attention_chunk: i64,
    /// Accepted and never used by mate.
    #[serde(default)]
    pub has_softcap: bool,
    #[serde(default)]
    pub num_splits: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack_gqa: Option<bool>,
    #[serde(default)]
    pub sm_margin: usize,
}
