//! The call model: one Python call of `flash_attn_with_kvcache`, exactly as a caller wrote it.
//!
//! A [`KvCacheCall`] keeps positional and keyword arguments apart and in order, so that each stack
//! can bind them to its own signature ([`signature::bind`]) and report CPython's exact `TypeError`.
//! [`Dims`] derives the sizes every other module needs (batch, seqlens, heads, head dims, paging)
//! once, from the canonical (SGLang MUSA wrapper) binding.

mod context;
mod dims;
mod dtype;
mod metadata_args;
mod param;
pub mod python;
mod recorded;
pub mod signature;
mod value;

pub use context::{CachedBuffer, LayerInfo, SglangBackend, SglangContext};
pub use dims::{Dims, DimsError};
pub use dtype::Dtype;
pub use metadata_args::MetadataArgsSpec;
pub use param::Param;
pub use recorded::Recorded;
pub use signature::{BoundArgs, Signature};
pub use value::{
    Device, NumpyScalar, NumpyValue, PyValue, TensorArg, TensorValues, python_float_repr,
    python_int_from_str,
};

/// The layout a stack returns `softmax_lse` in (musa-fa3.md §7; cuda-fa3.md D.16).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LseLayout {
    /// `(batch, heads, seqlen_q)`.
    BatchHeadSeq,
    /// `(heads, total_q)` with `cu_seqlens_q`.
    HeadTotal,
    /// `(batch, seqlen_q, heads)`: mate's MLA branch with 4-D q.
    BatchSeqHead,
}

/// One call of `flash_attn_with_kvcache`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KvCacheCall {
    /// The case name, from the spec's `id`.
    pub id: String,
    /// Seed for the data of tensors the spec gives without values.
    pub seed: u64,
    /// SGLang's MUSA wrapper state at the time of the call.
    pub context: SglangContext,
    pub positional: Vec<PyValue>,
    /// Keyword arguments in the order the caller wrote them.
    pub keywords: Vec<(String, PyValue)>,
    /// The `get_scheduler_metadata` arguments the call's `scheduler_metadata` was computed with, when
    /// the spec names them instead of (or besides) the tensor's values.
    pub metadata_args: Option<MetadataArgsSpec>,
    /// Where a recorded call came from.
    pub recorded: Option<Recorded>,
}

impl KvCacheCall {
    /// Binds to the canonical signature (the SGLang MUSA wrapper's: every parameter any stack has,
    /// in the order porters write them).
    pub fn bind_canonical(&self) -> Result<BoundArgs, String> {
        signature::bind(&signature::SGLANG_MUSA, self)
    }

    /// Binds to the signature the call is written for: the canonical one or, for a call passing
    /// mate's own keywords (`s_aux`, `cp_*`), mate's FA3-compatible wrapper's, whose tensor
    /// parameters are the same. The canonical binding's error when neither binds.
    pub fn bind_entry(&self) -> Result<BoundArgs, String> {
        self.bind_canonical()
            .or_else(|e| signature::bind(&signature::MATE_FA3_WRAPPER, self).map_err(|_| e))
    }

    /// The value passed for `name`, by keyword or by its canonical position; `None` when not passed.
    pub fn passed(&self, name: &str) -> Option<&PyValue> {
        if let Some((_, v)) = self.keywords.iter().find(|(k, _)| k == name) {
            return Some(v);
        }
        let position = signature::SGLANG_MUSA.position(Param::from_name(name)?)?;
        self.positional.get(position)
    }

    /// Sets a keyword argument, replacing an earlier keyword of the same name (builder for tests
    /// and generators).
    pub fn set(&mut self, name: &str, value: PyValue) -> &mut Self {
        match self.keywords.iter_mut().find(|(k, _)| k == name) {
            Some(slot) => slot.1 = value,
            None => self.keywords.push((name.to_string(), value)),
        }
        self
    }

    /// Removes a keyword argument (it becomes "not passed").
    pub fn unset(&mut self, name: &str) -> &mut Self {
        self.keywords.retain(|(k, _)| k != name);
        self
    }

    /// This call asking for `softmax_lse` too (numeric comparisons need it; asking for it changes
    /// nothing else).
    pub fn returning_lse(&self) -> KvCacheCall {
        let mut call = self.clone();
        call.set("return_softmax_lse", PyValue::Bool(true));
        call
    }

    /// This call passing `values` as its `scheduler_metadata` (an int32 vector).
    pub fn with_scheduler_metadata(&self, values: &[i32]) -> KvCacheCall {
        let mut call = self.clone();
        call.set(
            "scheduler_metadata",
            PyValue::Tensor(TensorArg::with_ints(
                Dtype::Int32,
                &[values.len()],
                values.iter().map(|&v| i64::from(v)).collect(),
            )),
        );
        call
    }

    /// Every tensor argument with the name it is stored under: keywords by their name, positional
    /// ones by the canonical name of their position, or `arg<i>` when that name is also passed by
    /// keyword (a call Python refuses with `TypeError`) or the position is past the signature.
    pub fn tensors(&self) -> impl Iterator<Item = (String, &TensorArg)> {
        let names = self.positional_names();
        let positional = self.positional.iter().zip(names);
        let keywords = self.keywords.iter().map(|(k, v)| (v, k.clone()));
        positional
            .chain(keywords)
            .filter_map(|(v, name)| v.as_tensor().map(|t| (name, t)))
    }

    /// [`KvCacheCall::tensors`], for changing them.
    pub fn tensors_mut(&mut self) -> impl Iterator<Item = (String, &mut TensorArg)> {
        let names = self.positional_names();
        let positional = self.positional.iter_mut().zip(names);
        let keywords = self.keywords.iter_mut().map(|(k, v)| (v, k.clone()));
        positional.chain(keywords).filter_map(|(v, name)| match v {
            PyValue::Tensor(t) => Some((name, t)),
            _ => None,
        })
    }

    fn positional_names(&self) -> Vec<String> {
        (0..self.positional.len())
            .map(|i| {
                signature::SGLANG_MUSA
                    .params
                    .get(i)
                    .map(|(p, _)| p.name())
                    .filter(|n| !self.keywords.iter().any(|(k, _)| k == n))
                    .map_or_else(|| format!("arg{i}"), str::to_string)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_positional_tensor_also_passed_by_keyword_is_stored_by_position() {
        let q = PyValue::tensor(Dtype::Bfloat16, &[1, 1, 1, 8]);
        let mut call = KvCacheCall {
            positional: vec![q.clone(), q.clone()],
            ..KvCacheCall::default()
        };
        call.set("q", q);
        let names: Vec<String> = call.tensors().map(|(name, _)| name).collect();
        assert_eq!(names, ["arg0", "k_cache", "q"]);
    }
}
