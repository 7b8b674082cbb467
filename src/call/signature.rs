//! Python signatures of the entry points and CPython's argument binding, with its exact `TypeError`s.

use super::{KvCacheCall, Param, PyValue};

/// A parameter default as written in the Python signature.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ParamDefault {
    Required,
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    /// `(-1, -1)`, the only tuple default in these signatures.
    WindowNone,
}

impl ParamDefault {
    pub fn value(self) -> Option<PyValue> {
        Some(match self {
            ParamDefault::Required => return None,
            ParamDefault::None => PyValue::None,
            ParamDefault::Bool(b) => PyValue::Bool(b),
            ParamDefault::Int(i) => PyValue::Int(i),
            ParamDefault::Float(f) => PyValue::Float(f),
            ParamDefault::WindowNone => PyValue::Tuple(vec![PyValue::Int(-1), PyValue::Int(-1)]),
        })
    }
}

/// A Python function signature: positional-or-keyword parameters, then keyword-only ones (after a
/// bare `*`), optionally `**kwargs`.
#[derive(Debug)]
pub struct Signature {
    /// `__qualname__`, used in CPython's messages.
    pub function: &'static str,
    pub params: &'static [(Param, ParamDefault)],
    /// How many of `params`, at the end, are keyword-only.
    pub keyword_only: usize,
    pub var_keyword: bool,
    /// The position of each [`Param`] in `params` (indexed by the enum; [`ABSENT`] where the
    /// signature has no such parameter), so that checks read arguments without a search.
    positions: [u8; Param::ALL.len()],
}

/// The position of a parameter a signature lacks.
const ABSENT: u8 = u8::MAX;

impl Signature {
    const fn new(
        function: &'static str,
        params: &'static [(Param, ParamDefault)],
        var_keyword: bool,
    ) -> Signature {
        assert!(params.len() < ABSENT as usize);
        let mut positions = [ABSENT; Param::ALL.len()];
        let mut i = 0;
        while i < params.len() {
            positions[params[i].0 as usize] = i as u8;
            i += 1;
        }
        Signature {
            function,
            params,
            keyword_only: 0,
            var_keyword,
            positions,
        }
    }

    /// The same signature with its last `count` parameters keyword-only.
    const fn with_keyword_only(self, count: usize) -> Signature {
        assert!(count <= self.params.len());
        Signature {
            keyword_only: count,
            ..self
        }
    }

    /// The parameters a positional argument can bind to (CPython's `co_argcount`).
    pub fn positional_params(&self) -> &'static [(Param, ParamDefault)] {
        &self.params[..self.params.len() - self.keyword_only]
    }

    /// Where `param` sits in the parameter list, if the signature has it.
    pub fn position(&self, param: Param) -> Option<usize> {
        match self.positions[param as usize] {
            ABSENT => None,
            i => Some(usize::from(i)),
        }
    }
}

/// How one parameter was bound.
#[derive(Clone, Debug, PartialEq)]
pub enum Bound {
    /// Not passed: the default applies.
    ParamDefault(PyValue),
    /// Passed by the caller (possibly `None`).
    Given(PyValue),
}

impl Bound {
    pub fn value(&self) -> &PyValue {
        match self {
            Bound::ParamDefault(v) | Bound::Given(v) => v,
        }
    }

    pub fn was_passed(&self) -> bool {
        matches!(self, Bound::Given(_))
    }
}

/// The arguments of one call bound to one signature.
#[derive(Clone, Debug)]
pub struct BoundArgs {
    pub signature: &'static Signature,
    pub params: Vec<Bound>,
    /// Keywords swallowed by `**kwargs`, in call order.
    pub extra: Vec<(String, PyValue)>,
}

impl BoundArgs {
    /// The bound argument of a parameter of this signature.
    ///
    /// # Panics
    /// If the signature has no such parameter: that is a bug in the caller, not bad input.
    pub fn bound(&self, param: Param) -> &Bound {
        let i = self.signature.position(param).unwrap_or_else(|| {
            panic!(
                "{}() has no parameter {}",
                self.signature.function,
                param.name()
            )
        });
        &self.params[i]
    }

    /// The effective value (the default when not passed).
    pub fn get(&self, param: Param) -> &PyValue {
        self.bound(param).value()
    }

    pub fn has_param(&self, param: Param) -> bool {
        self.signature.position(param).is_some()
    }

    /// The tensor, when the effective value is one.
    pub fn tensor(&self, param: Param) -> Option<&super::TensorArg> {
        self.get(param).as_tensor()
    }
}

/// Binds `call` to `signature` exactly as CPython 3.11 does, returning the `TypeError` message on
/// failure. Order (CPython `initialize_locals`): keywords in call order (unexpected keyword, then
/// multiple values), then too many positionals, then missing required positional, then missing
/// required keyword-only arguments.
pub fn bind(signature: &'static Signature, call: &KvCacheCall) -> Result<BoundArgs, String> {
    let f = signature.function;
    let positional_params = signature.positional_params();
    let argcount = positional_params.len();
    let mut slots: Vec<Option<PyValue>> = vec![None; signature.params.len()];
    for (slot, value) in slots.iter_mut().zip(&call.positional).take(argcount) {
        *slot = Some(value.clone());
    }
    let mut extra = Vec::new();
    for (name, value) in &call.keywords {
        let param = Param::from_name(name);
        match signature.params.iter().position(|(p, _)| Some(*p) == param) {
            Some(i) if slots[i].is_some() => {
                return Err(format!("{f}() got multiple values for argument '{name}'"));
            }
            Some(i) => slots[i] = Some(value.clone()),
            None if signature.var_keyword => extra.push((name.clone(), value.clone())),
            None => return Err(format!("{f}() got an unexpected keyword argument '{name}'")),
        }
    }
    if call.positional.len() > argcount {
        return Err(too_many_positional(
            signature,
            call.positional.len(),
            &slots,
        ));
    }
    let missing = |params: &[(Param, ParamDefault)], slots: &[Option<PyValue>]| {
        params
            .iter()
            .zip(slots)
            .filter(|((_, d), slot)| *d == ParamDefault::Required && slot.is_none())
            .map(|((param, _), _)| param.name())
            .collect::<Vec<&str>>()
    };
    let (positional_slots, keyword_slots) = slots.split_at(argcount);
    for (missing, kind) in [
        (missing(positional_params, positional_slots), "positional"),
        (
            missing(&signature.params[argcount..], keyword_slots),
            "keyword-only",
        ),
    ] {
        if !missing.is_empty() {
            let quoted: Vec<String> = missing.iter().map(|m| format!("'{m}'")).collect();
            let names = match quoted.len() {
                1 => quoted[0].clone(),
                2 => format!("{} and {}", quoted[0], quoted[1]),
                k => format!("{}, and {}", quoted[..k - 1].join(", "), quoted[k - 1]),
            };
            let plural = if missing.len() == 1 { "" } else { "s" };
            return Err(format!(
                "{f}() missing {} required {kind} argument{plural}: {names}",
                missing.len()
            ));
        }
    }
    let params = slots
        .into_iter()
        .zip(signature.params)
        .map(|(slot, (_, default))| match slot {
            Some(v) => Bound::Given(v),
            None => Bound::ParamDefault(default.value().expect("required parameters were checked")),
        })
        .collect();
    Ok(BoundArgs {
        signature,
        params,
        extra,
    })
}

/// CPython's `too_many_positional`: the range of accepted positionals, and how many keyword-only
/// arguments were given alongside.
fn too_many_positional(signature: &Signature, given: usize, slots: &[Option<PyValue>]) -> String {
    let positional_params = signature.positional_params();
    let argcount = positional_params.len();
    let required = positional_params
        .iter()
        .filter(|(_, d)| *d == ParamDefault::Required)
        .count();
    let (range, plural) = if required < argcount {
        (format!("from {required} to {argcount}"), "s")
    } else {
        (argcount.to_string(), if argcount == 1 { "" } else { "s" })
    };
    let keyword_only_given = slots[argcount..].iter().filter(|s| s.is_some()).count();
    let keyword_only = match keyword_only_given {
        0 => String::new(),
        n => format!(
            " positional argument{} (and {n} keyword-only argument{})",
            if given == 1 { "" } else { "s" },
            if n == 1 { "" } else { "s" }
        ),
    };
    let verb = if given == 1 && keyword_only_given == 0 {
        "was"
    } else {
        "were"
    };
    format!(
        "{}() takes {range} positional argument{plural} but {given}{keyword_only} {verb} given",
        signature.function
    )
}

use ParamDefault as D;

/// The 30 parameters shared, in this order and with these defaults, by upstream FA3, the mate
/// wrapper and every SGLang wrapper (cuda-fa3.md A.1; musa-fa3.md §2.1–2.2).
macro_rules! fa3_common_params {
    ($chunk:expr) => {
        [
            (Param::Q, D::Required),
            (Param::KCache, D::Required),
            (Param::VCache, D::Required),
            (Param::K, D::None),
            (Param::V, D::None),
            (Param::Qv, D::None),
            (Param::RotaryCos, D::None),
            (Param::RotarySin, D::None),
            (Param::CacheSeqlens, D::None),
            (Param::CacheBatchIdx, D::None),
            (Param::CacheLeftpad, D::None),
            (Param::PageTable, D::None),
            (Param::CuSeqlensQ, D::None),
            (Param::CuSeqlensKNew, D::None),
            (Param::MaxSeqlenQ, D::None),
            (Param::RotarySeqlens, D::None),
            (Param::QDescale, D::None),
            (Param::KDescale, D::None),
            (Param::VDescale, D::None),
            (Param::SoftmaxScale, D::None),
            (Param::Causal, D::Bool(false)),
            (Param::WindowSize, D::WindowNone),
            (Param::AttentionChunk, $chunk),
            (Param::Softcap, D::Float(0.0)),
            (Param::RotaryInterleaved, D::Bool(true)),
            (Param::SchedulerMetadata, D::None),
            (Param::NumSplits, D::Int(0)),
            (Param::PackGqa, D::None),
            (Param::SmMargin, D::Int(0)),
            (Param::ReturnSoftmaxLse, D::Bool(false)),
        ]
    };
}

const fn concat<const A: usize, const B: usize, const C: usize>(
    a: [(Param, ParamDefault); A],
    b: [(Param, ParamDefault); B],
) -> [(Param, ParamDefault); C] {
    assert!(A + B == C);
    let mut out = [(Param::Q, ParamDefault::Required); C];
    let mut i = 0;
    while i < A {
        out[i] = a[i];
        i += 1;
    }
    while i < C {
        out[i] = b[i - A];
        i += 1;
    }
    out
}

/// `a` with `item` inserted before index `at`.
const fn insert<const A: usize, const C: usize>(
    a: [(Param, ParamDefault); A],
    at: usize,
    item: (Param, ParamDefault),
) -> [(Param, ParamDefault); C] {
    assert!(A + 1 == C && at <= A);
    let mut out = [(Param::Q, ParamDefault::Required); C];
    let mut i = 0;
    while i < C {
        out[i] = if i < at {
            a[i]
        } else if i == at {
            item
        } else {
            a[i - 1]
        };
        i += 1;
    }
    out
}

const FA3_PARAMS: [(Param, ParamDefault); 30] = fa3_common_params!(D::Int(0));

const CP_PARAMS: [(Param, ParamDefault); 3] = [
    (Param::CpWorldSize, D::Int(1)),
    (Param::CpRank, D::Int(0)),
    (Param::CpTotSequsedK, D::None),
];

const SGLANG_TAIL: [(Param, ParamDefault); 4] = [
    (Param::Sinks, D::None),
    (Param::ScoreMod, D::None),
    (Param::AuxTensors, D::None),
    (Param::Ver, D::Int(3)),
];

const SGLANG_MUSA_PARAMS: [(Param, ParamDefault); 34] = concat(FA3_PARAMS, SGLANG_TAIL);

const SGL_KERNEL_PARAMS: [(Param, ParamDefault); 34] =
    concat(fa3_common_params!(D::None), SGLANG_TAIL);

const MATE_WRAPPER_PARAMS: [(Param, ParamDefault); 35] = concat(
    concat::<30, 2, 32>(
        FA3_PARAMS,
        [(Param::Sinks, D::None), (Param::SAux, D::None)],
    ),
    CP_PARAMS,
);

/// FA3's parameters with `learnable_sink` inserted after `window_size` (index 22), then the CP tail.
const MATE_MHA_PARAMS: [(Param, ParamDefault); 34] = concat(
    insert::<30, 31>(FA3_PARAMS, 22, (Param::LearnableSink, D::None)),
    CP_PARAMS,
);

/// SGLang's MUSA wrapper, variant V3 (musa-fa3.md §2.1, sgl L122–L157). The canonical signature:
/// spec keys, derived views and the reference name parameters after it.
pub static SGLANG_MUSA: Signature =
    Signature::new("flash_attn_with_kvcache", &SGLANG_MUSA_PARAMS, false);

/// mate's FA3-compatible wrapper `flash_attn_3.interface.flash_attn_with_kvcache` (musa-fa3.md §2.2).
pub static MATE_FA3_WRAPPER: Signature =
    Signature::new("flash_attn_with_kvcache", &MATE_WRAPPER_PARAMS, false);

/// mate's own `mate.mha_interface.flash_attn_with_kvcache` (musa-fa3.md §2.3), also exported as
/// `mate.flash_attn_with_kvcache`: `learnable_sink` sits at position 23, so every later positional
/// slot differs from FA3's.
pub static MATE_MHA: Signature = Signature::new("flash_attn_with_kvcache", &MATE_MHA_PARAMS, false);

/// Upstream FA3 `hopper/flash_attn_interface.py` (cuda-fa3.md A.1).
pub static FA3: Signature = Signature::new("flash_attn_with_kvcache", &FA3_PARAMS, false);

/// sgl-kernel 0.3.21 `sgl_kernel.flash_attn.flash_attn_with_kvcache` (sgl-kernel-cuda.md A.2):
/// the MUSA wrapper's names and order, but `attention_chunk` defaults to `None`.
pub static SGL_KERNEL_0_3_21: Signature =
    Signature::new("flash_attn_with_kvcache", &SGL_KERNEL_PARAMS, false);

/// SGLang's dispatcher `sglang.jit_kernel.flash_attention.flash_attn_with_kvcache`
/// (sgl-kernel-cuda.md B.6): sgl-kernel 0.4.4's signature — `only_qv` before `sm_margin`, `out` last.
pub static SGLANG_DISPATCHER: Signature =
    Signature::new("flash_attn_with_kvcache", &SGLANG_DISPATCHER_PARAMS, false);

const SGLANG_DISPATCHER_PARAMS: [(Param, ParamDefault); 36] = concat(
    concat::<31, 4, 35>(
        insert::<30, 31>(
            fa3_common_params!(D::None),
            28,
            (Param::OnlyQv, D::Bool(false)),
        ),
        SGLANG_TAIL,
    ),
    [(Param::Out, D::None)],
);

/// FlashAttention-2 `flash_attn.flash_attn_with_kvcache`, releases 2.6.1 to 2.8.4
/// (docs/spec/flash-attn-2.md §1).
pub static FA2: Signature = Signature::new("flash_attn_with_kvcache", &FA2_PARAMS, false);

const FA2_PARAMS: [(Param, ParamDefault); 19] = [
    (Param::Q, D::Required),
    (Param::KCache, D::Required),
    (Param::VCache, D::Required),
    (Param::K, D::None),
    (Param::V, D::None),
    (Param::RotaryCos, D::None),
    (Param::RotarySin, D::None),
    (Param::CacheSeqlens, D::None),
    (Param::CacheBatchIdx, D::None),
    (Param::CacheLeftpad, D::None),
    (Param::BlockTable, D::None),
    (Param::SoftmaxScale, D::None),
    (Param::Causal, D::Bool(false)),
    (Param::WindowSize, D::WindowNone),
    (Param::Softcap, D::Float(0.0)),
    (Param::RotaryInterleaved, D::Bool(true)),
    (Param::AlibiSlopes, D::None),
    (Param::NumSplits, D::Int(0)),
    (Param::ReturnSoftmaxLse, D::Bool(false)),
];

/// vLLM's `vllm_flash_attn.flash_attn_with_kvcache` at its last version (vllm-project/flash-attention
/// 8e1b01d5, docs/spec/vllm-flash-attn.md §1): FlashAttention-2's parameters, then ten keyword-only.
pub static VLLM_FLASH_ATTN: Signature =
    Signature::new("flash_attn_with_kvcache", &VLLM_PARAMS, false).with_keyword_only(10);

const VLLM_PARAMS: [(Param, ParamDefault); 29] = concat(
    FA2_PARAMS,
    [
        (Param::Out, D::None),
        (Param::SchedulerMetadata, D::None),
        (Param::QDescale, D::None),
        (Param::KDescale, D::None),
        (Param::VDescale, D::None),
        (Param::FaVersion, D::Int(2)),
        (Param::SAux, D::None),
        (Param::CpWorldSize, D::Int(1)),
        (Param::CpRank, D::Int(0)),
        (Param::CpTotSequsedK, D::None),
    ],
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::KvCacheCall;

    fn call(positional: usize, keywords: &[&str]) -> KvCacheCall {
        KvCacheCall {
            positional: vec![PyValue::None; positional],
            keywords: keywords
                .iter()
                .map(|k| (k.to_string(), PyValue::None))
                .collect(),
            ..KvCacheCall::default()
        }
    }

    #[test]
    fn cpython_messages() {
        assert_eq!(
            bind(&FA3, &call(3, &["ver"])).unwrap_err(),
            "flash_attn_with_kvcache() got an unexpected keyword argument 'ver'"
        );
        assert_eq!(
            bind(&FA3, &call(31, &[])).unwrap_err(),
            "flash_attn_with_kvcache() takes from 3 to 30 positional arguments but 31 were given"
        );
        assert_eq!(
            bind(&FA3, &call(2, &[])).unwrap_err(),
            "flash_attn_with_kvcache() missing 1 required positional argument: 'v_cache'"
        );
        assert_eq!(
            bind(&FA3, &call(0, &[])).unwrap_err(),
            "flash_attn_with_kvcache() missing 3 required positional arguments: 'q', 'k_cache', and 'v_cache'"
        );
        assert_eq!(
            bind(&FA3, &call(1, &["q"])).unwrap_err(),
            "flash_attn_with_kvcache() got multiple values for argument 'q'"
        );
        // Keywords are checked before the positional count.
        assert_eq!(
            bind(&FA3, &call(31, &["ver"])).unwrap_err(),
            "flash_attn_with_kvcache() got an unexpected keyword argument 'ver'"
        );
    }

    /// Texts produced by CPython 3.11.7 for a function with vLLM's signature
    /// (docs/spec/vllm-flash-attn.md §3).
    #[test]
    fn keyword_only_parameters_bind_as_cpython_does() {
        let with = |positional: usize, keywords: &[&str]| {
            bind(&VLLM_FLASH_ATTN, &call(positional, keywords)).map(|b| b.params.len())
        };
        assert_eq!(
            with(20, &[]).unwrap_err(),
            "flash_attn_with_kvcache() takes from 3 to 19 positional arguments but 20 were given"
        );
        assert_eq!(
            with(20, &["out"]).unwrap_err(),
            "flash_attn_with_kvcache() takes from 3 to 19 positional arguments but 20 positional \
             arguments (and 1 keyword-only argument) were given"
        );
        assert_eq!(
            with(20, &["out", "fa_version"]).unwrap_err(),
            "flash_attn_with_kvcache() takes from 3 to 19 positional arguments but 20 positional \
             arguments (and 2 keyword-only arguments) were given"
        );
        assert_eq!(
            with(20, &["out", "k"]).unwrap_err(),
            "flash_attn_with_kvcache() got multiple values for argument 'k'"
        );
        assert_eq!(
            with(1, &[]).unwrap_err(),
            "flash_attn_with_kvcache() missing 2 required positional arguments: 'k_cache' and 'v_cache'"
        );
        assert_eq!(with(19, &["out", "fa_version"]), Ok(29));
        assert_eq!(
            bind(&FA2, &call(3, &["page_table"])).unwrap_err(),
            "flash_attn_with_kvcache() got an unexpected keyword argument 'page_table'"
        );
    }

    #[test]
    fn the_dispatcher_has_only_qv_before_sm_margin_and_out_last() {
        let names: Vec<&str> = SGLANG_DISPATCHER
            .params
            .iter()
            .map(|(p, _)| p.name())
            .collect();
        assert_eq!(names[27..30], ["pack_gqa", "only_qv", "sm_margin"]);
        assert_eq!(
            names[31..],
            ["sinks", "score_mod", "aux_tensors", "ver", "out"]
        );
    }

    #[test]
    fn defaults_and_passed_none_are_distinguished() {
        let bound = bind(&SGLANG_MUSA, &call(3, &["sinks"])).unwrap();
        assert_eq!(
            bound.bound(Param::Ver),
            &Bound::ParamDefault(PyValue::Int(3))
        );
        assert_eq!(bound.bound(Param::Sinks), &Bound::Given(PyValue::None));
        assert_eq!(
            bind(&SGL_KERNEL_0_3_21, &call(3, &[]))
                .unwrap()
                .get(Param::AttentionChunk),
            &PyValue::None
        );
        assert_eq!(SGLANG_MUSA.params.len(), 34);
        assert_eq!(MATE_FA3_WRAPPER.params[30].0, Param::Sinks);
        assert_eq!(MATE_FA3_WRAPPER.params[34].0, Param::CpTotSequsedK);
    }

    /// Texts CPython 3.11 gives for mate's FA3 wrapper (interface.py L175–L212): SGLang's
    /// keywords are unknown to it, and 35 parameters take positionals.
    #[test]
    fn mate_wrapper_rejects_sglang_keywords() {
        for keyword in ["ver", "score_mod", "aux_tensors", "learnable_sink"] {
            assert_eq!(
                bind(&MATE_FA3_WRAPPER, &call(3, &[keyword])).unwrap_err(),
                format!("flash_attn_with_kvcache() got an unexpected keyword argument '{keyword}'")
            );
        }
        assert_eq!(
            bind(&MATE_FA3_WRAPPER, &call(36, &[])).unwrap_err(),
            "flash_attn_with_kvcache() takes from 3 to 35 positional arguments but 36 were given"
        );
        let bound = bind(&MATE_FA3_WRAPPER, &call(35, &[])).unwrap();
        assert_eq!(bound.bound(Param::CpRank), &Bound::Given(PyValue::None));
        let defaults = bind(&MATE_FA3_WRAPPER, &call(3, &["s_aux"])).unwrap();
        assert_eq!(defaults.get(Param::CpWorldSize), &PyValue::Int(1));
        assert_eq!(defaults.get(Param::CpTotSequsedK), &PyValue::None);
    }

    #[test]
    fn mate_mha_inserts_learnable_sink_at_position_23() {
        let names: Vec<&str> = MATE_MHA.params.iter().map(|(p, _)| p.name()).collect();
        assert_eq!(names.len(), 34);
        assert_eq!(names[21], "window_size");
        assert_eq!(names[22], "learnable_sink");
        assert_eq!(names[23], "attention_chunk");
        assert_eq!(names[29], "sm_margin");
        assert_eq!(names[30], "return_softmax_lse");
        assert_eq!(
            names[31..],
            ["cp_world_size", "cp_rank", "cp_tot_seqused_k"]
        );
        assert_eq!(MATE_MHA.params[23].1, ParamDefault::Int(0));
    }
}
