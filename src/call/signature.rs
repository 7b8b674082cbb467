//! Python signatures of the entry points and CPython's argument binding, with its exact `TypeError`s.

use super::{KvCacheCall, PyValue};

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

/// A Python function signature: positional-or-keyword parameters, optionally `**kwargs`.
#[derive(Debug)]
pub struct Signature {
    /// `__qualname__`, used in CPython's messages.
    pub function: &'static str,
    pub params: &'static [(&'static str, ParamDefault)],
    pub var_keyword: bool,
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
    fn index(&self, name: &str) -> Option<usize> {
        self.signature.params.iter().position(|(n, _)| *n == name)
    }

    /// The bound argument of a parameter of this signature.
    ///
    /// # Panics
    /// If the signature has no such parameter: that is a bug in the caller, not bad input.
    pub fn bound(&self, name: &str) -> &Bound {
        let i = self
            .index(name)
            .unwrap_or_else(|| panic!("{}() has no parameter {name}", self.signature.function));
        &self.params[i]
    }

    /// The effective value (the default when not passed).
    pub fn get(&self, name: &str) -> &PyValue {
        self.bound(name).value()
    }

    pub fn has_param(&self, name: &str) -> bool {
        self.index(name).is_some()
    }

    /// The tensor, when the effective value is one.
    pub fn tensor(&self, name: &str) -> Option<&super::TensorArg> {
        self.get(name).as_tensor()
    }
}

/// Binds `call` to `signature` exactly as CPython 3.11 does, returning the `TypeError` message on
/// failure. Order (CPython `initialize_locals`): keywords in call order (unexpected keyword, then
/// multiple values), then too many positionals, then missing required arguments.
pub fn bind(signature: &'static Signature, call: &KvCacheCall) -> Result<BoundArgs, String> {
    let f = signature.function;
    let n = signature.params.len();
    let mut slots: Vec<Option<PyValue>> = vec![None; n];
    for (slot, value) in slots.iter_mut().zip(&call.positional) {
        *slot = Some(value.clone());
    }
    let mut extra = Vec::new();
    for (name, value) in &call.keywords {
        match signature.params.iter().position(|(p, _)| p == name) {
            Some(i) if slots[i].is_some() => {
                return Err(format!("{f}() got multiple values for argument '{name}'"));
            }
            Some(i) => slots[i] = Some(value.clone()),
            None if signature.var_keyword => extra.push((name.clone(), value.clone())),
            None => return Err(format!("{f}() got an unexpected keyword argument '{name}'")),
        }
    }
    if call.positional.len() > n {
        let required = signature
            .params
            .iter()
            .filter(|(_, d)| *d == ParamDefault::Required)
            .count();
        let sig = if required < n {
            format!("from {required} to {n}")
        } else {
            n.to_string()
        };
        let plural = if required < n || n != 1 { "s" } else { "" };
        let given = call.positional.len();
        let verb = if given == 1 { "was" } else { "were" };
        return Err(format!(
            "{f}() takes {sig} positional argument{plural} but {given} {verb} given"
        ));
    }
    let missing: Vec<&str> = signature
        .params
        .iter()
        .zip(&slots)
        .filter(|((_, d), slot)| *d == ParamDefault::Required && slot.is_none())
        .map(|((name, _), _)| *name)
        .collect();
    if !missing.is_empty() {
        let quoted: Vec<String> = missing.iter().map(|m| format!("'{m}'")).collect();
        let names = match quoted.len() {
            1 => quoted[0].clone(),
            2 => format!("{} and {}", quoted[0], quoted[1]),
            k => format!("{}, and {}", quoted[..k - 1].join(", "), quoted[k - 1]),
        };
        let plural = if missing.len() == 1 { "" } else { "s" };
        return Err(format!(
            "{f}() missing {} required positional argument{plural}: {names}",
            missing.len()
        ));
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

use ParamDefault as D;

/// The 30 parameters shared, in this order and with these defaults, by upstream FA3, the mate
/// wrapper and every SGLang wrapper (cuda-fa3.md A.1; musa-fa3.md §2.1–2.2).
macro_rules! fa3_common_params {
    ($chunk:expr) => {
        [
            ("q", D::Required),
            ("k_cache", D::Required),
            ("v_cache", D::Required),
            ("k", D::None),
            ("v", D::None),
            ("qv", D::None),
            ("rotary_cos", D::None),
            ("rotary_sin", D::None),
            ("cache_seqlens", D::None),
            ("cache_batch_idx", D::None),
            ("cache_leftpad", D::None),
            ("page_table", D::None),
            ("cu_seqlens_q", D::None),
            ("cu_seqlens_k_new", D::None),
            ("max_seqlen_q", D::None),
            ("rotary_seqlens", D::None),
            ("q_descale", D::None),
            ("k_descale", D::None),
            ("v_descale", D::None),
            ("softmax_scale", D::None),
            ("causal", D::Bool(false)),
            ("window_size", D::WindowNone),
            ("attention_chunk", $chunk),
            ("softcap", D::Float(0.0)),
            ("rotary_interleaved", D::Bool(true)),
            ("scheduler_metadata", D::None),
            ("num_splits", D::Int(0)),
            ("pack_gqa", D::None),
            ("sm_margin", D::Int(0)),
            ("return_softmax_lse", D::Bool(false)),
        ]
    };
}

const fn concat<const A: usize, const B: usize, const C: usize>(
    a: [(&'static str, ParamDefault); A],
    b: [(&'static str, ParamDefault); B],
) -> [(&'static str, ParamDefault); C] {
    assert!(A + B == C);
    let mut out = [("", ParamDefault::Required); C];
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
    a: [(&'static str, ParamDefault); A],
    at: usize,
    item: (&'static str, ParamDefault),
) -> [(&'static str, ParamDefault); C] {
    assert!(A + 1 == C && at <= A);
    let mut out = [("", ParamDefault::Required); C];
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

const FA3_PARAMS: [(&str, ParamDefault); 30] = fa3_common_params!(D::Int(0));

const CP_PARAMS: [(&str, ParamDefault); 3] = [
    ("cp_world_size", D::Int(1)),
    ("cp_rank", D::Int(0)),
    ("cp_tot_seqused_k", D::None),
];

const SGLANG_TAIL: [(&str, ParamDefault); 4] = [
    ("sinks", D::None),
    ("score_mod", D::None),
    ("aux_tensors", D::None),
    ("ver", D::Int(3)),
];

const SGLANG_MUSA_PARAMS: [(&str, ParamDefault); 34] = concat(FA3_PARAMS, SGLANG_TAIL);

const SGL_KERNEL_PARAMS: [(&str, ParamDefault); 34] =
    concat(fa3_common_params!(D::None), SGLANG_TAIL);

const MATE_WRAPPER_PARAMS: [(&str, ParamDefault); 35] = concat(
    concat::<30, 2, 32>(FA3_PARAMS, [("sinks", D::None), ("s_aux", D::None)]),
    CP_PARAMS,
);

/// FA3's parameters with `learnable_sink` inserted after `window_size` (index 22), then the CP tail.
const MATE_MHA_PARAMS: [(&str, ParamDefault); 34] = concat(
    insert::<30, 31>(FA3_PARAMS, 22, ("learnable_sink", D::None)),
    CP_PARAMS,
);

/// SGLang's MUSA wrapper, variant V3 (musa-fa3.md §2.1, sgl L122–L157). The canonical signature:
/// spec keys, derived views and the reference name parameters after it.
pub static SGLANG_MUSA: Signature = Signature {
    function: "flash_attn_with_kvcache",
    params: &SGLANG_MUSA_PARAMS,
    var_keyword: false,
};

/// mate's FA3-compatible wrapper `flash_attn_3.interface.flash_attn_with_kvcache` (musa-fa3.md §2.2).
pub static MATE_FA3_WRAPPER: Signature = Signature {
    function: "flash_attn_with_kvcache",
    params: &MATE_WRAPPER_PARAMS,
    var_keyword: false,
};

/// mate's own `mate.mha_interface.flash_attn_with_kvcache` (musa-fa3.md §2.3), also exported as
/// `mate.flash_attn_with_kvcache`: `learnable_sink` sits at position 23, so every later positional
/// slot differs from FA3's.
pub static MATE_MHA: Signature = Signature {
    function: "flash_attn_with_kvcache",
    params: &MATE_MHA_PARAMS,
    var_keyword: false,
};

/// Upstream FA3 `hopper/flash_attn_interface.py` (cuda-fa3.md A.1).
pub static FA3: Signature = Signature {
    function: "flash_attn_with_kvcache",
    params: &FA3_PARAMS,
    var_keyword: false,
};

/// sgl-kernel 0.3.21 `sgl_kernel.flash_attn.flash_attn_with_kvcache` (sgl-kernel-cuda.md A.2):
/// the MUSA wrapper's names and order, but `attention_chunk` defaults to `None`.
pub static SGL_KERNEL_0_3_21: Signature = Signature {
    function: "flash_attn_with_kvcache",
    params: &SGL_KERNEL_PARAMS,
    var_keyword: false,
};

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

    #[test]
    fn defaults_and_passed_none_are_distinguished() {
        let bound = bind(&SGLANG_MUSA, &call(3, &["sinks"])).unwrap();
        assert_eq!(bound.bound("ver"), &Bound::ParamDefault(PyValue::Int(3)));
        assert_eq!(bound.bound("sinks"), &Bound::Given(PyValue::None));
        assert_eq!(
            bind(&SGL_KERNEL_0_3_21, &call(3, &[]))
                .unwrap()
                .get("attention_chunk"),
            &PyValue::None
        );
        assert_eq!(SGLANG_MUSA.params.len(), 34);
        assert_eq!(MATE_FA3_WRAPPER.params[30].0, "sinks");
        assert_eq!(MATE_FA3_WRAPPER.params[34].0, "cp_tot_seqused_k");
    }

    #[test]
    fn mate_mha_inserts_learnable_sink_at_position_23() {
        let names: Vec<&str> = MATE_MHA.params.iter().map(|(n, _)| *n).collect();
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
