//! Parameter names: one enum for every stack's `flash_attn_with_kvcache`.

macro_rules! params {
    ($($(#[$doc:meta])* $variant:ident = $name:literal,)*) => {
        /// A parameter of some stack's `flash_attn_with_kvcache` (the union of every signature in
        /// [`super::signature`]). A call may pass any keyword; those no signature has stay strings
        /// in [`super::KvCacheCall::keywords`] and bind only to `**kwargs` (or fail to bind).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Param {
            $($(#[$doc])* $variant,)*
        }

        impl Param {
            /// Every parameter, in declaration order (each signature's own order is its list).
            pub const ALL: [Param; [$($name),*].len()] = [$(Param::$variant),*];

            /// The Python name.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Param::$variant => $name,)*
                }
            }

            /// The parameter named `name`, if any signature has one (a `match`, which compiles to
            /// a few length and byte comparisons: binding a call looks up each of its keywords).
            pub fn from_name(name: &str) -> Option<Param> {
                match name {
                    $($name => Some(Param::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

params! {
    Q = "q",
    KCache = "k_cache",
    VCache = "v_cache",
    K = "k",
    V = "v",
    Qv = "qv",
    RotaryCos = "rotary_cos",
    RotarySin = "rotary_sin",
    CacheSeqlens = "cache_seqlens",
    CacheBatchIdx = "cache_batch_idx",
    CacheLeftpad = "cache_leftpad",
    PageTable = "page_table",
    CuSeqlensQ = "cu_seqlens_q",
    CuSeqlensKNew = "cu_seqlens_k_new",
    MaxSeqlenQ = "max_seqlen_q",
    RotarySeqlens = "rotary_seqlens",
    QDescale = "q_descale",
    KDescale = "k_descale",
    VDescale = "v_descale",
    SoftmaxScale = "softmax_scale",
    Causal = "causal",
    WindowSize = "window_size",
    AttentionChunk = "attention_chunk",
    Softcap = "softcap",
    RotaryInterleaved = "rotary_interleaved",
    SchedulerMetadata = "scheduler_metadata",
    NumSplits = "num_splits",
    PackGqa = "pack_gqa",
    SmMargin = "sm_margin",
    ReturnSoftmaxLse = "return_softmax_lse",
    /// SGLang's wrappers and mate's FA3 wrapper.
    Sinks = "sinks",
    ScoreMod = "score_mod",
    AuxTensors = "aux_tensors",
    Ver = "ver",
    /// mate's FA3 wrapper: the older name of `sinks`.
    SAux = "s_aux",
    /// mate's context-parallel tail.
    CpWorldSize = "cp_world_size",
    CpRank = "cp_rank",
    CpTotSequsedK = "cp_tot_seqused_k",
    /// mate's own entry point, at position 23.
    LearnableSink = "learnable_sink",
    /// SGLang's dispatcher (sgl-kernel 0.4.4's signature).
    OnlyQv = "only_qv",
    /// SGLang's dispatcher and vLLM's fork.
    Out = "out",
    /// FlashAttention-2 and vLLM's fork: the name of `page_table`.
    BlockTable = "block_table",
    /// FlashAttention-2 and vLLM's fork.
    AlibiSlopes = "alibi_slopes",
    /// vLLM's fork: which FlashAttention it runs (2 or 3).
    FaVersion = "fa_version",
}

impl std::fmt::Display for Param {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::Param;

    #[test]
    fn every_name_looks_up_its_parameter() {
        for param in Param::ALL {
            assert_eq!(Param::from_name(param.name()), Some(param));
        }
        assert_eq!(Param::from_name("k_cache"), Some(Param::KCache));
        assert_eq!(Param::from_name("kcache"), None);
        assert_eq!(Param::from_name(""), None);
    }
}
