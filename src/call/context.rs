//! SGLang's MUSA wrapper state that its scheduler-metadata auto-injection reads (musa-fa3.md §4).

use super::MetadataArgsSpec;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The spec's `context` object.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SglangContext {
    /// `_CURRENT_BACKEND`; `None` = no MUSA backend constructed in the process (no injection).
    #[serde(default)]
    pub sglang_backend: Option<SglangBackend>,
}

/// The fields of the most recently constructed `MusaFlashAttentionBackend` that injection reads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SglangBackend {
    /// `_current_prefix`: `forward_extend`, `forward_decode`, or a cascade variant.
    pub prefix: String,
    /// `_current_layer`; `None` until the backend has run its first attention layer.
    pub layer: Option<LayerInfo>,
    pub num_hidden_layers: u32,
    pub pp_rank: u32,
    pub pp_world_size: u32,
    pub first_k_dense_replace: Option<u32>,
    pub full_attention_interval: Option<u32>,
    /// `_current_can_run_tbo` (the forward batch's `can_run_tbo`).
    pub can_run_tbo: bool,
    /// `_current_max_seqlen_k`: an int, 0 until `_set_current_state` runs
    /// (sgl `MusaFlashAttentionBackend.__init__`), so an omitted field is 0; an
    /// explicit `null` is `None`, which chain M cannot subtract from.
    pub max_seqlen_k: Option<i64>,
    pub use_mla: bool,
    /// The raw value of env `SGLANG_PP_LAYER_PARTITION` (`None` = unset), read by `get_pp_indices`.
    pub pp_layer_partition: Option<String>,
    /// The raw value of env `SGLANG_MUSA_FA3_FORCE_UPDATE_METADATA` (`None` = unset).
    pub force_update_metadata: Option<String>,
    /// Prefixes already present in `_MATE_NO_MLA_SCHEDULER_METADATA_DICT` whose tensors are
    /// unknown.
    pub cached_prefixes: Vec<String>,
    /// Prefixes present in that dict with the tensor stored under each, so that a reused buffer
    /// can be checked against the call. Left out of the JSON when empty (contexts written before it).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub cached_metadata: BTreeMap<String, CachedBuffer>,
}

impl SglangBackend {
    /// Whether `_MATE_NO_MLA_SCHEDULER_METADATA_DICT` holds `prefix`.
    pub fn caches(&self, prefix: &str) -> bool {
        self.cached_prefixes.iter().any(|p| p == prefix)
            || self.cached_metadata.contains_key(prefix)
    }
}

/// A scheduler-metadata tensor stored in the wrapper's dict: its values, or the
/// `get_scheduler_metadata` arguments it was computed with, or both.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, try_from = "CachedBufferJson")]
pub struct CachedBuffer {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<i32>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata_args: Option<MetadataArgsSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CachedBufferJson {
    #[serde(default)]
    values: Option<Vec<i32>>,
    #[serde(default)]
    metadata_args: Option<MetadataArgsSpec>,
}

impl TryFrom<CachedBufferJson> for CachedBuffer {
    type Error = &'static str;

    fn try_from(json: CachedBufferJson) -> Result<CachedBuffer, Self::Error> {
        if json.values.is_none() && json.metadata_args.is_none() {
            return Err("a cached buffer gives its values, its metadata_args, or both");
        }
        Ok(CachedBuffer {
            values: json.values,
            metadata_args: json.metadata_args,
        })
    }
}

impl CachedBuffer {
    /// The tensor's length: its values', else the `4·batch_size` its arguments give (`None` only
    /// for a buffer built with neither, whose contents are unknown).
    pub fn length(&self) -> Option<usize> {
        match (&self.values, &self.metadata_args) {
            (Some(values), _) => Some(values.len()),
            (None, Some(args)) => Some(args.batch_size.saturating_mul(4)),
            (None, None) => None,
        }
    }
}

/// A backend that has not run a layer yet: decode prefix, one layer, one pipeline stage,
/// `max_seqlen_k` 0, nothing cached (also what a spec's omitted fields mean).
impl Default for SglangBackend {
    fn default() -> Self {
        SglangBackend {
            prefix: "forward_decode".into(),
            layer: None,
            num_hidden_layers: 1,
            pp_rank: 0,
            pp_world_size: 1,
            first_k_dense_replace: None,
            full_attention_interval: None,
            can_run_tbo: false,
            max_seqlen_k: Some(0),
            use_mla: false,
            pp_layer_partition: None,
            force_update_metadata: None,
            cached_prefixes: Vec::new(),
            cached_metadata: BTreeMap::new(),
        }
    }
}

/// The `RadixAttention` layer recorded as `_current_layer`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayerInfo {
    pub layer_id: u32,
    pub tp_q_head_num: i64,
    pub tp_k_head_num: i64,
    pub qk_head_dim: i64,
    pub v_head_dim: i64,
}
