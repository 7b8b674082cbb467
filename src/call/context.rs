//! SGLang's MUSA wrapper state that its scheduler-metadata auto-injection reads (musa-fa3.md §4).

use serde::{Deserialize, Serialize};

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
    pub can_run_tbo: bool,
    /// `_current_max_seqlen_k`.
    pub max_seqlen_k: Option<i64>,
    pub use_mla: bool,
    /// The raw value of env `SGLANG_PP_LAYER_PARTITION` (`None` = unset), read by `get_pp_indices`.
    pub pp_layer_partition: Option<String>,
    /// The raw value of env `SGLANG_MUSA_FA3_FORCE_UPDATE_METADATA` (`None` = unset).
    pub force_update_metadata: Option<String>,
    /// Prefixes already present in `_MATE_NO_MLA_SCHEDULER_METADATA_DICT`.
    pub cached_prefixes: Vec<String>,
}

/// A backend that has not run a layer yet: decode prefix, one layer, one pipeline stage, nothing
/// cached (also what a spec's omitted fields mean).
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
            max_seqlen_k: None,
            use_mla: false,
            pp_layer_partition: None,
            force_update_metadata: None,
            cached_prefixes: Vec::new(),
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
