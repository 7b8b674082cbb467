//! The blocked, GQA-stacked evaluation against a naive one written from the definitions
//! (cuda-fa3.md D.2, D.11, D.13b, D.15): one query row at a time, one key at a time, keys looked
//! up through the page table position by position. Calls are large enough for several row blocks.
//! Rotary and MUSA's MLA branch are left to the hand-computed tests.

use fa3conform::call::{Dims, KvCacheCall, Param, PyValue};
use fa3conform::cases::{Options, random_call};
use fa3conform::mate::{self, ResolvedMask, Tiles};
use fa3conform::reference::mask::{self, Mask, MaskRequest, StaticSizes};
use fa3conform::reference::{Precision, Stack, run};
use fa3conform::tensor::{Tensors, materialise};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

fn ints(t: &Tensors, name: &str) -> Option<Vec<usize>> {
    t.get(name)
        .map(|x| x.ints().iter().map(|&v| v as usize).collect())
}

/// `(out, lse)` per (query row of the packed `(total_q, h)` layout) computed key by key.
fn naive(call: &KvCacheCall, t: &Tensors, stack: Stack) -> (Vec<f64>, Vec<f64>) {
    let args = call.bind_canonical().unwrap();
    let dims = Dims::of(&args).unwrap();
    let (b, h, hk, d, dv) = (
        dims.batch_size,
        dims.num_heads,
        dims.num_heads_k,
        dims.head_size,
        dims.head_size_v,
    );
    let group = h / hk;
    let q = t["q"].data.as_slice().unwrap();
    let qv = t.get("qv").map(|x| x.data.as_slice().unwrap());
    let kc = t["k_cache"].data.as_slice().unwrap();
    let vc = t["v_cache"].data.as_slice().unwrap();
    let cap_rows = t["k_cache"].shape()[1];
    let kn = t.get("k").map(|x| x.data.as_slice().unwrap());
    let vn = t.get("v").map(|x| x.data.as_slice().unwrap());
    let cu_q = ints(t, "cu_seqlens_q");
    let cu_new = ints(t, "cu_seqlens_k_new");
    let seqused = match args.get(Param::CacheSeqlens) {
        PyValue::Int(n) => Some(vec![*n as usize; b]),
        _ => ints(t, "cache_seqlens"),
    };
    let leftpad = ints(t, "cache_leftpad");
    let batch_idx = ints(t, "cache_batch_idx");
    let table = ints(t, "page_table");
    let sinks = t.get("sinks").filter(|_| stack != Stack::Fa3);
    let softcap = args
        .get(Param::Softcap)
        .as_number()
        .filter(|&c| stack.softcap_enabled(c));
    let scale = args
        .get(Param::SoftmaxScale)
        .as_number()
        .unwrap_or_else(|| ((d + qv.map_or(0, |_| dv)) as f64).powf(-0.5));
    let window: Vec<i64> = match args.get(Param::WindowSize).as_sequence() {
        Some(w) => w.iter().map(|x| x.as_int().unwrap()).collect(),
        None => vec![-1, -1],
    };
    let fp8 = t["q"].dtype == fa3conform::call::Dtype::Float8E4m3fn;
    let descale = |name: &str, b: usize, kh: usize| {
        t.get(name).filter(|_| fp8).map_or(1.0, |x| x.data[[b, kh]])
    };
    let resolved = mask::resolve(
        stack,
        MaskRequest {
            causal: args.get(Param::Causal).truthy().unwrap(),
            window_left: window[0],
            window_right: window[1],
            attention_chunk: args.get(Param::AttentionChunk).as_int().unwrap_or(0),
        },
        StaticSizes {
            seqlen_q: dims.seqlen_q as i64,
            seqlen_k: dims.seqlen_k as i64,
            head_size: d as i64,
            paged: dims.paged,
            fixed_length: [
                Param::CuSeqlensQ,
                Param::CacheSeqlens,
                Param::CacheLeftpad,
                Param::PageTable,
                Param::K,
            ]
            .iter()
            .all(|&p| args.get(p).is_none()),
        },
    );
    // mate's tiling decides the lse of a fully masked row with a sink (docs/musa-device.md D1).
    let tiles = (stack == Stack::Musa).then(|| musa_tiles(&args, &dims, resolved.mask));
    let mut out = vec![0.0; dims.total_q * h * dv];
    let mut lse = vec![f64::NEG_INFINITY; dims.total_q * h];
    for bi in 0..b {
        let (q0, sq) = match &cu_q {
            Some(cu) => (cu[bi], cu[bi + 1] - cu[bi]),
            None => (bi * dims.seqlen_q, dims.seqlen_q),
        };
        let lp = leftpad.as_ref().map_or(0, |l| l[bi]);
        let old = seqused.as_ref().map_or(dims.seqlen_k, |s| s[bi]) - lp;
        let (n0, new) = match (&cu_new, kn) {
            (Some(cu), Some(_)) => (cu[bi], cu[bi + 1] - cu[bi]),
            (None, Some(_)) => (bi * dims.seqlen_new, dims.seqlen_new),
            _ => (0, 0),
        };
        let sk = old + new;
        let row = batch_idx.as_ref().map_or(bi, |x| x[bi]);
        // Flat offset of (position p, KV head kh, element e) of this batch's keys or values.
        let cached = |p: usize, kh: usize, width: usize| match &table {
            Some(tb) => {
                let per = tb.len() / t["page_table"].shape()[0];
                let page = tb[row * per + p / cap_rows];
                ((page * cap_rows + p % cap_rows) * hk + kh) * width
            }
            None => ((row * cap_rows + p) * hk + kh) * width,
        };
        let key = |j: usize, kh: usize| -> &[f64] {
            if j < old {
                let o = cached(lp + j, kh, d);
                &kc[o..o + d]
            } else {
                let o = ((n0 + j - old) * hk + kh) * d;
                &kn.unwrap()[o..o + d]
            }
        };
        let value = |j: usize, kh: usize| -> &[f64] {
            if j < old {
                let o = cached(lp + j, kh, dv);
                &vc[o..o + dv]
            } else {
                let o = ((n0 + j - old) * hk + kh) * dv;
                &vn.unwrap()[o..o + dv]
            }
        };
        for head in 0..h {
            let kh = head / group;
            for i in 0..sq {
                let r = (q0 + i) * h + head;
                let qi = &q[r * d..(r + 1) * d];
                let (lo, hi) = resolved.mask.key_range(i, sq, sk);
                if lo >= hi {
                    if let (Some(Some(tiles)), Some(sinks)) = (tiles, sinks) {
                        if tiles
                            .row_tile(i, head % group, sq, sk, None, None)
                            .has_key_block
                        {
                            lse[r] = sinks.data[[head]];
                        }
                    }
                    continue;
                }
                let scores: Vec<f64> = (lo..hi)
                    .map(|j| {
                        let mut raw: f64 = qi.iter().zip(key(j, kh)).map(|(a, b)| a * b).sum();
                        if let Some(qv) = qv {
                            let qvi = &qv[r * dv..(r + 1) * dv];
                            raw += qvi
                                .iter()
                                .zip(value(j, kh))
                                .map(|(a, b)| a * b)
                                .sum::<f64>();
                        }
                        let s = scale
                            * raw
                            * descale("q_descale", bi, kh)
                            * descale("k_descale", bi, kh);
                        softcap.map_or(s, |c| c * (s / c).tanh())
                    })
                    .collect();
                let sink = sinks.map(|x| x.data[[head]]);
                let m = scores
                    .iter()
                    .copied()
                    .fold(sink.unwrap_or(f64::NEG_INFINITY), f64::max);
                let weights: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
                let total: f64 = weights.iter().sum::<f64>() + sink.map_or(0.0, |s| (s - m).exp());
                lse[r] = m + total.ln();
                for (w, j) in weights.iter().zip(lo..hi) {
                    let vd = descale("v_descale", bi, kh);
                    for (e, x) in value(j, kh).iter().enumerate() {
                        out[r * dv + e] += w / total * x * vd;
                    }
                }
            }
        }
    }
    (out, lse)
}

/// mate's tile geometry for the call (`None` for head dims it has no kernel for).
fn musa_tiles(args: &fa3conform::call::BoundArgs, dims: &Dims, mask: Mask) -> Option<Tiles> {
    let group = dims.num_heads / dims.num_heads_k;
    let pack_gqa = match args.get(Param::PackGqa) {
        PyValue::None => None,
        v => v.truthy(),
    };
    let config = mate::kernel_config(
        dims.head_size,
        dims.head_size_v,
        dims.seqlen_q as i64,
        group as i64,
        pack_gqa,
    )
    .ok()?;
    let (sq, sk) = (dims.seqlen_q as i64, dims.seqlen_k as i64);
    let (is_causal, is_local, window_left, window_right, attention_chunk) = match mask {
        Mask::Full => (false, false, sk - 1, sq - 1, 0),
        Mask::Causal => (true, false, sk - 1, 0, 0),
        Mask::Local { left, right, chunk } => (false, true, left, right, chunk),
    };
    let resolved = ResolvedMask {
        is_causal,
        is_local,
        window_left,
        window_right,
        attention_chunk,
    };
    Some(Tiles::new(&config, group, resolved))
}

#[test]
fn blocked_evaluation_equals_the_naive_one() {
    let mut checked = 0;
    for stack in Stack::ALL {
        let options = Options {
            max_seqlen_q: 80,
            max_seqlen_k: 120,
            mla: false,
            ..Options::small(stack)
        };
        let mut rng = ChaCha8Rng::seed_from_u64(21 + stack as u64);
        for _ in 0..25 {
            let call = random_call(&mut rng, &options);
            if call.passed("rotary_cos").is_some() {
                continue;
            }
            let tensors = materialise(&call, 1 << 28).unwrap();
            let result = run(&call, &tensors, stack, Precision::Exact).unwrap();
            let (out, lse) = naive(&call, &tensors, stack);
            // The reference lays lse out as (b, h, s) or (h, total_q); the naive one as rows × h.
            let h = *result.out.shape().iter().rev().nth(1).unwrap();
            let mut lse_rows = vec![0.0; lse.len()];
            let flat: Vec<f64> = result.lse.iter().copied().collect();
            let rows = lse.len() / h;
            let per_batch = if result.lse.ndim() == 3 {
                result.lse.shape()[2]
            } else {
                rows
            };
            for (index, value) in flat.iter().enumerate() {
                let (row, head) = if result.lse.ndim() == 3 {
                    let (bh, i) = (index / per_batch, index % per_batch);
                    ((bh / h) * per_batch + i, bh % h)
                } else {
                    (index % rows, index / rows)
                };
                lse_rows[row * h + head] = *value;
            }
            for (a, e) in result.out.iter().zip(&out).chain(lse_rows.iter().zip(&lse)) {
                let same = if e.is_finite() {
                    (a - e).abs() <= 1e-9 * (1.0 + e.abs())
                } else {
                    a == e
                };
                assert!(
                    same,
                    "{a} vs {e} on {}: {}",
                    stack.name(),
                    fa3conform::spec::call_to_json(&call)
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 50, "{checked}");
}
