//! Sizes derived from a call's tensors, shared by the materialiser, the reference and the kernel.

use super::{BoundArgs, Param, PyValue, TensorArg};
use thiserror::Error;

/// Why sizes could not be derived (the call is malformed; validation reports the exact error).
#[derive(Debug, Error, PartialEq)]
#[error("{0}")]
pub struct DimsError(pub String);

/// Sizes of an accepted-looking call, named as FA3's `mha_fwd` names them.
#[derive(Clone, Debug, PartialEq)]
pub struct Dims {
    pub batch_size: usize,
    /// `q.shape[1]`, or `max_seqlen_q` with `cu_seqlens_q`.
    pub seqlen_q: usize,
    /// Rows of `q` (`batch_size * seqlen_q` without `cu_seqlens_q`).
    pub total_q: usize,
    pub num_heads: usize,
    pub num_heads_k: usize,
    pub head_size: usize,
    pub head_size_v: usize,
    pub varlen_q: bool,
    /// `page_table` given.
    pub paged: bool,
    /// Tokens per page (1 when not paged, as FA3 counts it).
    pub page_size: usize,
    pub num_pages: usize,
    pub pages_per_seq: usize,
    /// Static key capacity per sequence: `pages_per_seq * page_size`, or `k_cache.shape[1]`.
    pub seqlen_k: usize,
    /// Rows of the cache (`k_cache.shape[0]`; pages when paged).
    pub cache_batch: usize,
    /// `k` given (append-KV).
    pub new_kv: bool,
    pub varlen_new: bool,
    /// `k.shape[1]` (0 without new KV or when varlen).
    pub seqlen_new: usize,
    /// Rows of `k` (`batch_size * seqlen_new` without `cu_seqlens_k_new`).
    pub total_new: usize,
}

fn need<'a>(args: &'a BoundArgs, name: Param, rank: &[usize]) -> Result<&'a TensorArg, DimsError> {
    let t = args
        .tensor(name)
        .ok_or_else(|| DimsError(format!("{name} must be a tensor")))?;
    if !rank.contains(&t.ndim()) {
        return Err(DimsError(format!(
            "{name} has rank {}, expected {rank:?}",
            t.ndim()
        )));
    }
    Ok(t)
}

impl Dims {
    /// Derives the sizes from canonically bound arguments.
    pub fn of(args: &BoundArgs) -> Result<Dims, DimsError> {
        let cu_q = args.tensor(Param::CuSeqlensQ);
        let varlen_q = cu_q.is_some();
        let q = need(args, Param::Q, if varlen_q { &[3] } else { &[4] })?;
        let k_cache = need(args, Param::KCache, &[4])?;
        let v_cache = need(args, Param::VCache, &[4])?;
        let (batch_size, seqlen_q, total_q) = match cu_q {
            Some(cu) => {
                let b = cu.size(0).unwrap_or(0).checked_sub(1).ok_or_else(|| {
                    DimsError("cu_seqlens_q must have at least one element".into())
                })?;
                let max_q = match args.get(Param::MaxSeqlenQ) {
                    PyValue::Int(m) if *m >= 0 => *m as usize,
                    other => {
                        return Err(DimsError(format!(
                            "max_seqlen_q must be an int, got {other}"
                        )));
                    }
                };
                (b, max_q, q.shape[0])
            }
            None => (q.shape[0], q.shape[1], q.shape[0] * q.shape[1]),
        };
        let page_table = args.tensor(Param::PageTable);
        let paged = page_table.is_some();
        let (num_pages, page_size, pages_per_seq, seqlen_k) = match page_table {
            Some(pt) => {
                let per = pt
                    .size(1)
                    .ok_or_else(|| DimsError("page_table must be 2-D".into()))?;
                (
                    k_cache.shape[0],
                    k_cache.shape[1],
                    per,
                    per * k_cache.shape[1],
                )
            }
            None => (0, 1, 0, k_cache.shape[1]),
        };
        let k_new = args.tensor(Param::K);
        let varlen_new = k_new.is_some() && args.tensor(Param::CuSeqlensKNew).is_some();
        let (seqlen_new, total_new) = match k_new {
            Some(k) if varlen_new => (0, k.size(0).unwrap_or(0)),
            Some(k) if k.ndim() == 4 => (k.shape[1], batch_size * k.shape[1]),
            Some(k) => return Err(DimsError(format!("k has rank {}, expected 4", k.ndim()))),
            None => (0, 0),
        };
        Ok(Dims {
            batch_size,
            seqlen_q,
            total_q,
            num_heads: q.shape[q.ndim() - 2],
            num_heads_k: k_cache.shape[2],
            head_size: q.shape[q.ndim() - 1],
            head_size_v: v_cache.shape[3],
            varlen_q,
            paged,
            page_size,
            num_pages,
            pages_per_seq,
            seqlen_k,
            cache_batch: k_cache.shape[0],
            new_kv: k_new.is_some(),
            varlen_new,
            seqlen_new,
            total_new,
        })
    }

    /// Query heads per KV head.
    pub fn group_size(&self) -> usize {
        self.num_heads / self.num_heads_k.max(1)
    }
}
