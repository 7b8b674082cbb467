//! Deterministic data for tensors given without values.
//!
//! Each tensor draws from its own ChaCha8 stream keyed by (seed, parameter name), so adding or
//! removing one argument does not change the data of the others. Index tensors get values that
//! describe a consistent call (lengths within capacity, a page permutation, ...), because a porter
//! who leaves them out wants a typical call, not garbage.

use super::{HostTensor, MaterialiseError, Tensors};
use crate::call::{Dims, KvCacheCall, TensorArg};
use crate::numeric::round_slice;
use ndarray::{ArrayD, IxDyn};
use rand::{Rng, SeedableRng, seq::SliceRandom};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;
use std::collections::BTreeMap;
use std::f64::consts::PI;

fn stream(seed: u64, name: &str) -> ChaCha8Rng {
    // FNV-1a over the name, mixed with the seed: stable across releases of any crate.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    ChaCha8Rng::seed_from_u64(seed ^ h.rotate_left(17))
}

/// Splits `total` into `parts` lengths of at most `max_len` each (random, summing to `total` when
/// possible) and returns the cumulative offsets.
fn cu_seqlens(rng: &mut ChaCha8Rng, parts: usize, total: usize, max_len: usize) -> Vec<i64> {
    let mut lens = vec![0usize; parts];
    let mut left = total.min(parts.saturating_mul(max_len));
    // Give every part a fair share first, then spread the rest randomly.
    for len in lens.iter_mut() {
        let share = (left / parts.max(1)).min(max_len);
        *len = share;
    }
    left -= lens.iter().sum::<usize>();
    while left > 0 {
        let i = rng.gen_range(0..parts);
        if lens[i] < max_len {
            lens[i] += 1;
            left -= 1;
        }
    }
    let mut out = vec![0i64];
    for len in lens {
        out.push(out.last().unwrap() + len as i64);
    }
    out
}

fn index_values(
    call: &KvCacheCall,
    dims: &Dims,
    name: &str,
    t: &TensorArg,
    done: &Tensors,
) -> Vec<f64> {
    let mut rng = stream(call.seed, name);
    let numel = t.numel().unwrap_or(0);
    let values: Vec<i64> = match name {
        "cu_seqlens_q" if numel == dims.batch_size + 1 => {
            cu_seqlens(&mut rng, dims.batch_size, dims.total_q, dims.seqlen_q)
        }
        "cu_seqlens_k_new" if numel == dims.batch_size + 1 => {
            cu_seqlens(&mut rng, dims.batch_size, dims.total_new, dims.seqlen_k)
        }
        "cache_seqlens" => {
            let new_lens = lengths(
                done.get("cu_seqlens_k_new"),
                dims.batch_size,
                dims.seqlen_new,
            );
            (0..numel)
                .map(|b| {
                    let room = dims
                        .seqlen_k
                        .saturating_sub(new_lens.get(b).copied().unwrap_or(0));
                    rng.gen_range(0..=room) as i64
                })
                .collect()
        }
        "cache_leftpad" => {
            let seqlens = done
                .get("cache_seqlens")
                .map(HostTensor::ints)
                .unwrap_or_default();
            (0..numel)
                .map(|b| rng.gen_range(0..=seqlens.get(b).copied().unwrap_or(0).max(0)))
                .collect()
        }
        "page_table" => {
            let mut pages: Vec<i64> = (0..dims.num_pages as i64).collect();
            pages.shuffle(&mut rng);
            if dims.num_pages == 0 {
                vec![0; numel]
            } else {
                (0..numel).map(|i| pages[i % dims.num_pages]).collect()
            }
        }
        "cache_batch_idx" => {
            // It selects a cache row, or with paging a page-table row (cuda-fa3.md D.13b).
            let table_rows = done
                .get("page_table")
                .and_then(|t| t.shape().first().copied());
            let mut rows: Vec<i64> = (0..table_rows.unwrap_or(dims.cache_batch) as i64).collect();
            rows.shuffle(&mut rng);
            (0..numel)
                .map(|i| rows.get(i).copied().unwrap_or(0))
                .collect()
        }
        "rotary_seqlens" => done
            .get("cache_seqlens")
            .map(HostTensor::ints)
            .unwrap_or_else(|| vec![0; numel]),
        _ => vec![0; numel],
    };
    values.into_iter().map(|v| v as f64).collect()
}

/// Per-batch lengths from cu_seqlens offsets, or the fixed length.
fn lengths(cu: Option<&HostTensor>, batch: usize, fixed: usize) -> Vec<usize> {
    match cu {
        Some(cu) => cu
            .ints()
            .windows(2)
            .map(|w| (w[1] - w[0]).max(0) as usize)
            .collect(),
        None => vec![fixed; batch],
    }
}

fn float_values(call: &KvCacheCall, name: &str, t: &TensorArg, rows: Option<&[usize]>) -> Vec<f64> {
    let numel = t.numel().unwrap_or(0);
    match name {
        // cos and sin of the same angles, so that they form real rotations.
        "rotary_cos" | "rotary_sin" => {
            let mut rng = stream(call.seed, "rotary_angles");
            (0..numel)
                .map(|_| {
                    let angle = rng.r#gen::<f64>() * 2.0 * PI;
                    if name == "rotary_cos" {
                        angle.cos()
                    } else {
                        angle.sin()
                    }
                })
                .collect()
        }
        "q_descale" | "k_descale" | "v_descale" => {
            let mut rng = stream(call.seed, name);
            (0..numel).map(|_| rng.gen_range(0.5..1.5)).collect()
        }
        // One stream per cache row (page), so that a call holding some rows of a pool (a slim
        // bundle) sees exactly the data the whole pool has in them.
        "k_cache" | "v_cache" if !t.shape.is_empty() => {
            let count = t.shape[0];
            let per_row = numel.checked_div(count).unwrap_or(0);
            // Allocated once at its size: the cap counts the values, not a growing vector's
            // spare capacity and copies.
            let mut values = Vec::with_capacity(numel);
            for row in 0..count {
                let origin = rows.map_or(row, |rows| rows[row]);
                let mut rng = stream(call.seed, &format!("{name}[{origin}]"));
                values.extend((0..per_row).map(|_| rng.sample::<f64, _>(StandardNormal)));
            }
            values
        }
        _ => {
            let mut rng = stream(call.seed, name);
            // Ziggurat sampling: data generation dominates small fuzz cases.
            (0..numel).map(|_| rng.sample(StandardNormal)).collect()
        }
    }
}

/// The logical values of a tensor whose layout maps several elements to one memory location,
/// made to follow the memory: each location keeps the value of the first element that maps to
/// it. Values given by the spec must already agree.
fn follow_storage(
    name: &str,
    t: &TensorArg,
    data: Vec<f64>,
    given: bool,
) -> Result<Vec<f64>, MaterialiseError> {
    let offsets = t.storage_offsets();
    let mut storage: Vec<Option<f64>> = vec![None; t.storage_extent().unwrap_or(0)];
    for (i, (&offset, &value)) in offsets.iter().zip(&data).enumerate() {
        match storage[offset] {
            None => storage[offset] = Some(value),
            Some(first) if given && first.to_bits() != value.to_bits() => {
                return Err(MaterialiseError::Shape(format!(
                    "{name}: values[{i}] is {value} but shares memory (stride {:?}) with an \
                     element that is {first}",
                    t.strides()
                )));
            }
            Some(_) => {}
        }
    }
    Ok(offsets
        .iter()
        .map(|&offset| storage[offset].expect("every offset was filled"))
        .collect())
}

/// Which rows (first-dimension entries) of a pool tensor a call holds: `rows[name][i]` is the
/// row of the whole pool that row `i` of `name` is. Tensors not named hold their own rows.
pub type RowOrigins = BTreeMap<String, Vec<usize>>;

/// Generation order: index tensors whose values others depend on come first.
const INDEX_ORDER: [&str; 7] = [
    "cu_seqlens_q",
    "cu_seqlens_k_new",
    "cache_seqlens",
    "cache_leftpad",
    "page_table",
    "cache_batch_idx",
    "rotary_seqlens",
];

/// Materialises every tensor argument of `call`, refusing before any allocation when the total
/// exceeds `cap_bytes`.
pub fn materialise(call: &KvCacheCall, cap_bytes: usize) -> Result<Tensors, MaterialiseError> {
    materialise_rows(call, cap_bytes, &RowOrigins::new())
}

/// [`materialise`] for a call whose pool tensors hold some rows of a larger pool: the data of
/// each row is that of the pool row `rows` names, as [`materialise`] of the whole pool gives it.
pub fn materialise_rows(
    call: &KvCacheCall,
    cap_bytes: usize,
    rows: &RowOrigins,
) -> Result<Tensors, MaterialiseError> {
    generate(call, cap_bytes, rows, |_| true)
}

/// The integer tensors of `call` alone, with the values [`materialise`] gives them: what a call's
/// indices say about its pool, without the cost of the pool's data.
pub fn materialise_index_tensors(
    call: &KvCacheCall,
    cap_bytes: usize,
) -> Result<Tensors, MaterialiseError> {
    generate(call, cap_bytes, &RowOrigins::new(), |t| {
        !t.dtype.is_floating_point()
    })
}

/// Materialises the tensors of `call` that `wanted` picks; index values still follow from the
/// whole call's dimensions, so they are the same whichever tensors are picked.
fn generate(
    call: &KvCacheCall,
    cap_bytes: usize,
    rows: &RowOrigins,
    wanted: impl Fn(&TensorArg) -> bool,
) -> Result<Tensors, MaterialiseError> {
    let tensors: Vec<(String, &TensorArg)> = call.tensors().filter(|(_, t)| wanted(t)).collect();
    let needed: u128 = tensors
        .iter()
        .map(|(_, t)| {
            let storage = if t.aliases() {
                t.storage_extent()
            } else {
                Some(0)
            };
            match (t.numel(), storage) {
                (Some(n), Some(s)) => (n as u128 + s as u128) * 8,
                _ => u128::MAX,
            }
        })
        .fold(0u128, u128::saturating_add);
    if needed > cap_bytes as u128 {
        return Err(MaterialiseError::OverCap {
            needed,
            cap: cap_bytes,
        });
    }
    for (name, origins) in rows {
        let held = tensors
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, t)| t.shape.first().copied());
        if held != Some(origins.len()) {
            return Err(MaterialiseError::Shape(format!(
                "{name}: {} row origins for {held:?} rows",
                origins.len()
            )));
        }
    }
    let dims = call.bind_entry().ok().and_then(|b| Dims::of(&b).ok());
    let rank = |name: &str| {
        INDEX_ORDER
            .iter()
            .position(|n| *n == name)
            .unwrap_or(INDEX_ORDER.len())
    };
    let mut ordered = tensors;
    ordered.sort_by_key(|(name, _)| rank(name));
    let mut out = Tensors::new();
    for (name, t) in ordered {
        let mut data = match (&t.values, &dims) {
            (Some(values), _) => values.to_f64(),
            (None, Some(dims)) if !t.dtype.is_floating_point() => {
                index_values(call, dims, &name, t, &out)
            }
            (None, None) if !t.dtype.is_floating_point() => vec![0.0; t.numel().unwrap_or(0)],
            (None, _) => float_values(call, &name, t, rows.get(&name).map(Vec::as_slice)),
        };
        round_slice(t.dtype, &mut data);
        if t.aliases() {
            data = follow_storage(&name, t, data, t.values.is_some())?;
        }
        let array = ArrayD::from_shape_vec(IxDyn(&t.shape), data)
            .map_err(|e| MaterialiseError::Shape(format!("{name}: {e}")))?;
        out.insert(
            name,
            HostTensor {
                dtype: t.dtype,
                data: array,
            },
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::{Dtype, PyValue, TensorValues};

    fn paged_decode() -> KvCacheCall {
        let mut call = KvCacheCall {
            seed: 5,
            ..KvCacheCall::default()
        };
        call.set("q", PyValue::tensor(Dtype::Bfloat16, &[2, 1, 4, 64]))
            .set("k_cache", PyValue::tensor(Dtype::Bfloat16, &[8, 16, 2, 64]))
            .set("v_cache", PyValue::tensor(Dtype::Bfloat16, &[8, 16, 2, 64]))
            .set("page_table", PyValue::tensor(Dtype::Int32, &[2, 4]))
            .set("cache_seqlens", PyValue::tensor(Dtype::Int32, &[2]))
            .set("cache_leftpad", PyValue::tensor(Dtype::Int32, &[2]));
        call
    }

    /// A call written for mate's FA3 wrapper (it passes `s_aux`) gets the index values its
    /// dimensions give, as the same call written for SGLang's wrapper does; they were all zero
    /// when only the canonical signature was bound (every sequence on page 0).
    #[test]
    fn a_call_for_mates_wrapper_gets_the_same_index_values() {
        let sglang = paged_decode();
        let mut mate = sglang.clone();
        mate.set("s_aux", PyValue::tensor(Dtype::Bfloat16, &[4]));
        let (a, b) = (
            materialise(&sglang, 1 << 30).unwrap(),
            materialise(&mate, 1 << 30).unwrap(),
        );
        for name in ["page_table", "cache_seqlens", "cache_leftpad"] {
            assert_eq!(a[name], b[name], "{name}");
        }
        assert!(b["page_table"].data.iter().any(|&page| page != 0.0));
    }

    #[test]
    fn generated_index_tensors_describe_a_consistent_call() {
        let t = materialise(&paged_decode(), 1 << 30).unwrap();
        let mut pages = t["page_table"].ints();
        pages.sort();
        assert_eq!(
            pages,
            (0..8).collect::<Vec<_>>(),
            "a permutation of the 8 pages"
        );
        let seqlens = t["cache_seqlens"].ints();
        let leftpad = t["cache_leftpad"].ints();
        for b in 0..2 {
            assert!((0..=64).contains(&seqlens[b]));
            assert!((0..=seqlens[b]).contains(&leftpad[b]));
        }
        // bf16 data is rounded to bf16.
        assert!(
            t["q"]
                .data
                .iter()
                .all(|&x| half::bf16::from_f64(x).to_f64() == x)
        );
    }

    #[test]
    fn paged_batch_indices_select_page_table_rows() {
        // 8 pages but a page table of 2 rows: indices must be a permutation of the 2 rows.
        let mut call = paged_decode();
        call.set("cache_batch_idx", PyValue::tensor(Dtype::Int32, &[2]));
        let t = materialise(&call, 1 << 30).unwrap();
        let mut rows = t["cache_batch_idx"].ints();
        rows.sort();
        assert_eq!(rows, [0, 1]);
    }

    #[test]
    fn data_is_deterministic_and_per_tensor() {
        let a = materialise(&paged_decode(), 1 << 30).unwrap();
        let mut call = paged_decode();
        call.unset("cache_leftpad");
        let b = materialise(&call, 1 << 30).unwrap();
        assert_eq!(a["q"], b["q"]);
        assert_eq!(a["page_table"], b["page_table"]);
        call.seed = 6;
        assert_ne!(materialise(&call, 1 << 30).unwrap()["q"], a["q"]);
    }

    #[test]
    fn expanded_tensors_hold_one_value_per_memory_location() {
        let mut call = paged_decode();
        let expanded = |shape: &[usize]| {
            PyValue::Tensor(TensorArg {
                stride: Some(vec![0; shape.len()]),
                ..TensorArg::new(Dtype::Float32, shape)
            })
        };
        call.set("k_descale", expanded(&[2, 2]));
        let t = materialise(&call, 1 << 30).unwrap();
        let descale: Vec<f64> = t["k_descale"].data.iter().copied().collect();
        assert!(descale.iter().all(|&x| x == descale[0]), "{descale:?}");
        // Values a spec gives must agree where they share memory.
        let mut bad = expanded(&[2]);
        if let PyValue::Tensor(t) = &mut bad {
            t.values = Some(TensorValues::Float(vec![1.0, 2.0]));
        }
        call.set("k_descale", bad);
        let err = materialise(&call, 1 << 30).unwrap_err().to_string();
        assert_eq!(
            err,
            "k_descale: values[1] is 2 but shares memory (stride [0]) with an element that is 1"
        );
    }

    #[test]
    fn cache_rows_of_a_pool_keep_their_data() {
        let whole = materialise(&paged_decode(), 1 << 30).unwrap();
        let mut call = paged_decode();
        call.set("k_cache", PyValue::tensor(Dtype::Bfloat16, &[2, 16, 2, 64]))
            .set("v_cache", PyValue::tensor(Dtype::Bfloat16, &[2, 16, 2, 64]));
        let rows = RowOrigins::from([
            ("k_cache".to_string(), vec![5, 2]),
            ("v_cache".to_string(), vec![5, 2]),
        ]);
        let some = materialise_rows(&call, 1 << 30, &rows).unwrap();
        for name in ["k_cache", "v_cache"] {
            let (whole, some) = (&whole[name].data, &some[name].data);
            assert_eq!(
                some.index_axis(ndarray::Axis(0), 0),
                whole.index_axis(ndarray::Axis(0), 5)
            );
            assert_eq!(
                some.index_axis(ndarray::Axis(0), 1),
                whole.index_axis(ndarray::Axis(0), 2)
            );
        }
        let wrong = RowOrigins::from([("k_cache".to_string(), vec![5])]);
        assert!(materialise_rows(&call, 1 << 30, &wrong).is_err());
    }

    #[test]
    fn cap_is_checked_before_allocating() {
        let mut call = paged_decode();
        call.set(
            "k_cache",
            PyValue::tensor(Dtype::Bfloat16, &[1 << 20, 1 << 20, 1 << 10, 1 << 10]),
        );
        let err = materialise(&call, 2 << 30).unwrap_err();
        assert!(matches!(err, MaterialiseError::OverCap { .. }));
    }
}
