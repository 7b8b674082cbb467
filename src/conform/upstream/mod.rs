//! The `upstream` conformance suite: the calls the upstream tests themselves make, built as the
//! tests build them, checked against the profile of the entry point they call.
//!
//! Tests covered (facts in each module's documentation, with lines):
//! - FA3's `test_flash_attn_kvcache` (Dao-AILab/flash-attention@0251105a
//!   hopper/test_flash_attn.py:L665-L1051), [`fa3_kvcache`];
//! - mate's `test_paged_attn` and `test_paged_attn_advance` (MooreThreads/mate@3f58cc3e
//!   tests/test_fmha.py:L1000-L1591) and its FA3-compatible wrapper's `test_paged_attn`
//!   (wrappers/flash-attention/tests/test_flash_attn.py:L204-L399), [`mate_paged_attn`];
//! - mate's `test_advance_features` (tests/test_fmha.py:L1735-L2200: appended keys, rotary,
//!   leftpad, softcap and chunks through mate's own entry point), [`mate_advance_features`];
//! - mate's MLA decode tests through `flash_attn_with_kvcache` (tests/test_mla.py:
//!   `test_fa_interface`, `test_mla_decode_varlen`, the varlen half of `test_mla_q_not_contig`),
//!   [`mate_mla`].
//!
//! Not covered: test_mla.py's calls of `mate.flashmla.flash_mla_with_kvcache`
//! (`test_flashmla_interface`, the non-varlen half of `test_mla_q_not_contig`), an entry point no
//! profile models.
//!
//! Each case is one grid point of one test (its inner loops included), drawn deterministically:
//! case `i` takes the tests in turn and, within a test, the `i / tests`-th element of a
//! permutation of its grid chosen by the campaign seed, so a default campaign samples every test
//! and `--cases` widens the sample (past a grid's size it repeats). The random values a test draws
//! (padding lengths, cache lengths, page tables, windows) come from a generator seeded by the test
//! and the grid point, with the test's distributions: a case is the same call whatever the seed.
//!
//! A case passes when
//! - FA3's test: `fa3` and `sgl-kernel` accept the call with no error-severity hazard; where
//!   `musa` accepts it too, the modelled MUSA stack's numbers are within the tolerance rule of
//!   the reference ([`crate::certify::numerics::check`]);
//! - mate's tests: `mate` accepts every call of the grid point (one per rank with context
//!   parallelism) with no error-severity hazard — a call to `mate.flash_attn_with_kvcache` is
//!   judged as the same keywords given to mate's FA3 wrapper, which forwards them all by keyword
//!   and passes its `sinks` on as `learnable_sink` (musa-fa3.md §2.2); and when the call can go
//!   through SGLang's wrapper — the arguments it lacks (`s_aux`, `cp_world_size`, `cp_rank`,
//!   `cp_tot_seqused_k`) left out when they hold their defaults — `musa` accepts it too and the
//!   numbers are within tolerance; a context-parallel rank's call is run on the kernel path with
//!   its context-parallel arguments and compared with the reference's evaluation of that rank
//!   ([`crate::reference::run_on_rank`]);
//! - mate's MLA tests: `mate` accepts every call on its MLA decode branch and `musa` the call as
//!   SGLang's wrapper receives it, with no error-severity hazard; numbers are not modelled for MLA.
//!
//! Numbers are computed for calls that fit the memory budget [`NUMERICS_MEMORY_CAP`] and whose attention
//! work is within [`NUMERICS_WORK_CAP`]; a passed case says whether its numbers were checked and,
//! if not, why.

mod fa3_kvcache;
mod mate_advance_features;
mod mate_mla;
mod mate_paged_attn;

use super::{CaseOutcome, CaseResult, Suite};
use crate::call::{Dims, Dtype, KvCacheCall, Param, PyValue, TensorArg};
use crate::certify::numerics::{self, Numerics};
use crate::mate::DEFAULT_MP;
use crate::memory::Budget;
use crate::musa::{InjectionCache, MusaOptions};
use crate::spec::call_to_json;
use crate::validate::{Severity, Verdict, profiles};
use mate_mla::Test as MlaTest;
use mate_paged_attn::Test as MateTest;
use rand::{Rng as _, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::OnceLock;

/// The generator a test's random draws come from.
pub type Rng = ChaCha8Rng;

/// An index into a test's grid (inner loops included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GridPoint(pub usize);

/// A call as an upstream test makes it, in the signature of the entry point it calls.
pub struct UpstreamCall {
    pub call: KvCacheCall,
    /// With context parallelism, the calls of ranks 1.. (`call` is rank 0's), in rank order; in
    /// mate's MLA test with "inited" metadata, the call reusing what `call` computed.
    pub other_ranks: Vec<KvCacheCall>,
    /// The grid point's parameters, for failure messages.
    pub description: String,
}

impl UpstreamCall {
    /// Every call of the grid point, rank 0's first.
    pub fn ranks(&self) -> impl Iterator<Item = &KvCacheCall> {
        std::iter::once(&self.call).chain(&self.other_ranks)
    }
}

/// The memory budget of a call whose numbers the suite computes (larger calls are validated only):
/// its tensors, the two references and the kernel path, about four times the tensors, which may
/// so take about 512 MiB (mate's paged tests allocate three times the pages their sequences use).
pub const NUMERICS_MEMORY_CAP: usize = 2 << 30;

/// Attention work of a call whose numbers the suite computes, at most: Σ over sequences of query
/// rows × keys (cache and new) × heads × (d + dv), the products the reference evaluates twice
/// and the kernel path once (of one rank's call with context parallelism). Larger calls are
/// validated only: their numbers take seconds each (FA3's 2048 × 3577 points about ten), and
/// the default campaign must stay short.
pub const NUMERICS_WORK_CAP: u64 = 1 << 33;

/// Why `call` (in the canonical signature) gets no numbers from the suite, if its work is over
/// [`NUMERICS_WORK_CAP`]. Lengths the call does not give by value count as the static ones.
fn over_the_work_cap(call: &KvCacheCall) -> Option<String> {
    let bound = call.bind_canonical().ok()?;
    let d = Dims::of(&bound).ok()?;
    let values = |param: Param| bound.tensor(param).and_then(|t| t.int_values());
    let query_rows: Vec<i64> = match values(Param::CuSeqlensQ) {
        Some(cu) => cu.windows(2).map(|w| w[1] - w[0]).collect(),
        None => vec![d.seqlen_q as i64; d.batch_size],
    };
    let keys = values(Param::CacheSeqlens).unwrap_or_else(|| vec![d.seqlen_k as i64; d.batch_size]);
    let per_row = (d.num_heads * (d.head_size + d.head_size_v)) as u64;
    let work = query_rows
        .iter()
        .zip(&keys)
        .map(|(&q, &k)| {
            let k = k.max(0) as u64 + d.seqlen_new as u64;
            (q.max(0) as u64).saturating_mul(k).saturating_mul(per_row)
        })
        .fold(0u64, u64::saturating_add);
    (work > NUMERICS_WORK_CAP).then(|| {
        format!(
            "attention work {work} (query rows × keys × heads × (d + dv)) over the suite's cap \
             of {NUMERICS_WORK_CAP}"
        )
    })
}

/// The entry point a test calls, which decides the profiles that judge it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Entry {
    /// Upstream FA3's `flash_attn_interface.flash_attn_with_kvcache`.
    Fa3,
    /// `mate.flash_attn_with_kvcache` (`mate.mha_interface`) or mate's FA3-compatible wrapper.
    Mate,
    /// `mate.mha_interface.flash_attn_with_kvcache` on its MLA decode branch, which the kernel
    /// path does not model: validation only.
    MateMla,
}

/// One upstream test.
struct UpstreamTest {
    /// The case-name prefix.
    name: &'static str,
    entry: Entry,
    points: fn() -> Vec<usize>,
    call: fn(GridPoint, &mut Rng) -> UpstreamCall,
}

static TESTS: [UpstreamTest; 8] = [
    UpstreamTest {
        name: "fa3-kvcache",
        entry: Entry::Fa3,
        points: fa3_kvcache::points,
        call: fa3_kvcache::call,
    },
    UpstreamTest {
        name: "mate-paged-attn",
        entry: Entry::Mate,
        points: || MateTest::Mate.points(),
        call: |point, rng| MateTest::Mate.call(point, rng),
    },
    UpstreamTest {
        name: "mate-paged-attn-advance",
        entry: Entry::Mate,
        points: || MateTest::MateAdvance.points(),
        call: |point, rng| MateTest::MateAdvance.call(point, rng),
    },
    UpstreamTest {
        name: "mate-wrapper-paged-attn",
        entry: Entry::Mate,
        points: || MateTest::Wrapper.points(),
        call: |point, rng| MateTest::Wrapper.call(point, rng),
    },
    UpstreamTest {
        name: "mate-advance-features",
        entry: Entry::Mate,
        points: mate_advance_features::points,
        call: mate_advance_features::call,
    },
    UpstreamTest {
        name: "mate-mla-fa-interface",
        entry: Entry::MateMla,
        points: || MlaTest::FaInterface.points(),
        call: |point, rng| MlaTest::FaInterface.call(point, rng),
    },
    UpstreamTest {
        name: "mate-mla-decode-varlen",
        entry: Entry::MateMla,
        points: || MlaTest::DecodeVarlen.points(),
        call: |point, rng| MlaTest::DecodeVarlen.call(point, rng),
    },
    UpstreamTest {
        name: "mate-mla-q-not-contig",
        entry: Entry::MateMla,
        points: || MlaTest::QNotContig.points(),
        call: |point, rng| MlaTest::QNotContig.call(point, rng),
    },
];

/// Each test's grid, computed once.
fn grid(test: usize) -> &'static [usize] {
    static GRIDS: [OnceLock<Vec<usize>>; TESTS.len()] = [const { OnceLock::new() }; TESTS.len()];
    GRIDS[test].get_or_init(|| (TESTS[test].points)())
}

/// The `k`-th grid point of `test` in the campaign seeded with `seed`: an affine permutation
/// `k ↦ (a·k + b) mod n` with `a` coprime to `n`, both drawn from the seed.
fn sampled_point(seed: u64, test: usize, k: usize) -> GridPoint {
    let points = grid(test);
    let n = points.len();
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (test as u64 + 1).wrapping_mul(0x9e37_79b9));
    let mut a = rng.gen_range(1..n.max(2));
    while gcd(a, n) != 1 {
        a += 1;
    }
    let b = rng.gen_range(0..n);
    GridPoint(points[(a.wrapping_mul(k % n) % n + b) % n])
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The call test `test` makes at `point`, named `<test>/<point>`.
fn upstream_call(test: usize, point: GridPoint) -> UpstreamCall {
    let mut rng = ChaCha8Rng::seed_from_u64((test as u64) << 40 ^ point.0 as u64);
    let mut upstream = (TESTS[test].call)(point, &mut rng);
    upstream.call.id = format!("{}/{}", TESTS[test].name, point.0);
    upstream.call.seed = point.0 as u64;
    upstream
}

/// Where case `index` of a campaign seeded with `seed` falls: (test, grid point).
fn case_point(seed: u64, index: usize) -> (usize, GridPoint) {
    let test = index % TESTS.len();
    (test, sampled_point(seed, test, index / TESTS.len()))
}

/// The suite; see the module documentation.
pub struct UpstreamSuite;

/// The registered instance.
pub static UPSTREAM: UpstreamSuite = UpstreamSuite;

impl Suite for UpstreamSuite {
    fn name(&self) -> &'static str {
        "upstream"
    }

    fn description(&self) -> &'static str {
        "the calls of FA3's test_flash_attn_kvcache, mate's test_paged_attn(_advance) (own and \
         wrapper), test_advance_features and MLA decode tests, sampled from their grids: accepted by \
         the entry point's profile, no error hazard, numbers within tolerance on the modelled MUSA \
         stack (MLA: validation only)"
    }

    fn default_cases(&self) -> usize {
        600
    }

    fn run_case(&self, seed: u64, index: usize) -> CaseOutcome {
        run_case(seed, index, NUMERICS_MEMORY_CAP)
    }

    /// The call as SGLang's wrapper would receive it, or, where it cannot (context parallelism),
    /// as mate's FA3 wrapper receives it.
    fn call(&self, seed: u64, index: usize) -> Option<KvCacheCall> {
        let (test, point) = case_point(seed, index);
        let call = upstream_call(test, point).call;
        let call = numerics::with_described_metadata(&call, DEFAULT_MP).unwrap_or(call);
        Some(through_sglang(&call).unwrap_or_else(|_| through_mate_wrapper(&call)))
    }
}

/// Case `index` of a campaign seeded with `seed`, computing numbers for calls whose tensors fit
/// `numerics_cap` bytes.
fn run_case(seed: u64, index: usize, numerics_cap: usize) -> CaseOutcome {
    let (test, point) = case_point(seed, index);
    let upstream = upstream_call(test, point);
    let result = match check(TESTS[test].entry, &upstream, numerics_cap) {
        Ok(result) => result,
        Err(why) => CaseResult::Failed(format!(
            "{why}\nparameters: {}\ncall: {}",
            upstream.description,
            call_to_json(&upstream.call)
        )),
    };
    CaseOutcome {
        index,
        name: upstream.call.id,
        result,
    }
}

/// The verdict of `profile` must be an acceptance with no error-severity hazard.
fn accepted(verdict: &Verdict) -> Result<(), String> {
    if let Some(rejection) = verdict.rejection() {
        return Err(format!("{} rejects the call: {rejection}", verdict.profile));
    }
    match verdict
        .hazards
        .iter()
        .find(|h| h.severity == Severity::Error)
    {
        Some(h) => Err(format!(
            "{} accepts the call with an error hazard: {} {}",
            verdict.profile, h.code, h.message
        )),
        None => Ok(()),
    }
}

fn validate(profile: &str, call: &KvCacheCall) -> Verdict {
    profiles::by_name(profile)
        .expect("a registered profile")
        .validate(call)
}

/// Checks the calls of one grid point of a test whose entry point is `entry`.
fn check(entry: Entry, upstream: &UpstreamCall, numerics_cap: usize) -> Result<CaseResult, String> {
    let on_musa = match entry {
        Entry::Fa3 => {
            let call = &upstream.call;
            for profile in ["fa3", "sgl-kernel"] {
                accepted(&validate(profile, call))?;
            }
            let verdict = validate("musa", call);
            if let Some(rejection) = verdict.rejection() {
                return Ok(CaseResult::Passed(Some(format!(
                    "fa3, sgl-kernel accept; numbers not modelled: musa rejects it ({rejection})"
                ))));
            }
            call.clone()
        }
        Entry::Mate => {
            // the metadata tensor mate's tests compute with each call's own arguments
            let ranks = upstream
                .ranks()
                .map(|call| numerics::with_described_metadata(call, DEFAULT_MP))
                .collect::<Result<Vec<_>, _>>()?;
            for call in &ranks {
                accepted(&validate("mate", &through_mate_wrapper(call)))?;
            }
            let sglang = match through_sglang(&ranks[0]) {
                Ok(call) => call,
                Err(_) => return check_ranks(&ranks, numerics_cap),
            };
            accepted(&validate("musa", &sglang))?;
            sglang
        }
        Entry::MateMla => return mate_mla::check(upstream),
    };
    let accepted_by = match entry {
        Entry::Fa3 => "fa3, sgl-kernel, musa accept",
        Entry::Mate | Entry::MateMla => "mate, musa accept",
    };
    if let Some(why) = over_the_work_cap(&on_musa) {
        return Ok(CaseResult::Passed(Some(format!(
            "{accepted_by}; numbers not run: {why}"
        ))));
    }
    let options = MusaOptions {
        memory: Budget::new(numerics_cap),
        ..MusaOptions::default()
    };
    match numerics::check(&on_musa, &mut InjectionCache::default(), &options) {
        Numerics::Within(report) => Ok(CaseResult::Passed(Some(format!(
            "{accepted_by}; numbers within tolerance: out {}; lse {}",
            report.out, report.lse
        )))),
        Numerics::Differs(why) => Err(format!("numbers differ on the modelled MUSA stack: {why}")),
        Numerics::NotRun(why) => Ok(CaseResult::Passed(Some(format!(
            "{accepted_by}; numbers not run: {why}"
        )))),
    }
}

/// `call` (made through mate's own entry point or its FA3-compatible wrapper) as SGLang's MUSA
/// wrapper receives it, or the argument SGLang's wrapper cannot express.
fn through_sglang(call: &KvCacheCall) -> Result<KvCacheCall, String> {
    let mut keywords = Vec::with_capacity(call.keywords.len());
    for (name, value) in &call.keywords {
        let default = match name.as_str() {
            "s_aux" | "cp_tot_seqused_k" => PyValue::None,
            "cp_world_size" => PyValue::Int(1),
            "cp_rank" => PyValue::Int(0),
            "learnable_sink" => {
                keywords.push(("sinks".to_string(), value.clone()));
                continue;
            }
            _ => {
                keywords.push((name.clone(), value.clone()));
                continue;
            }
        };
        if *value != default {
            return Err(format!("{name}={value}"));
        }
    }
    Ok(KvCacheCall {
        keywords,
        ..call.clone()
    })
}

/// The numbers of each rank's call of a context-parallel grid point, each on the kernel path
/// against the reference's evaluation of that rank.
fn check_ranks(ranks: &[KvCacheCall], numerics_cap: usize) -> Result<CaseResult, String> {
    let options = MusaOptions {
        memory: Budget::new(numerics_cap),
        ..MusaOptions::default()
    };
    let mut reports = Vec::new();
    for (rank, call) in ranks.iter().enumerate() {
        let (call, cp) = crate::musa::mate_rank(&through_mate_wrapper(call))?;
        let numbers = match over_the_work_cap(&call) {
            Some(why) => Numerics::NotRun(why),
            None => numerics::check_rank(&call, &cp, &options),
        };
        match numbers {
            Numerics::Within(report) => reports.push(report),
            Numerics::Differs(why) => return Err(format!("rank {rank}'s numbers differ: {why}")),
            Numerics::NotRun(why) => {
                return Ok(CaseResult::Passed(Some(format!(
                    "mate accepts the call of each of {} ranks; numbers not run: {why}",
                    ranks.len()
                ))));
            }
        }
    }
    // how much of the allowed error the ranks use at most
    let used = reports
        .iter()
        .flat_map(|r| [r.out.max / r.out.allowed_max, r.lse.max / r.lse.allowed_max])
        .fold(0.0, f64::max);
    Ok(CaseResult::Passed(Some(format!(
        "mate accepts the call of each of {} ranks; each rank's numbers within tolerance (at \
         most {:.0}% of the allowed max error)",
        ranks.len(),
        used * 100.0
    ))))
}

/// `call` (made through mate's own entry point or its FA3-compatible wrapper) as mate's FA3
/// wrapper receives it: mate's `learnable_sink` is the wrapper's `sinks`.
fn through_mate_wrapper(call: &KvCacheCall) -> KvCacheCall {
    let keywords = call
        .keywords
        .iter()
        .map(|(name, value)| match name.as_str() {
            "learnable_sink" => ("sinks".to_string(), value.clone()),
            _ => (name.clone(), value.clone()),
        })
        .collect();
    KvCacheCall {
        keywords,
        ..call.clone()
    }
}

/// A test's keyword arguments as a call spec holds them.
fn owned_keywords(keywords: Vec<(&str, PyValue)>) -> Vec<(String, PyValue)> {
    keywords
        .into_iter()
        .map(|(name, value)| (name.to_string(), value))
        .collect()
}

/// A tensor of `dtype` and `shape` holding `values`.
fn int_tensor(dtype: Dtype, shape: &[usize], values: Vec<i64>) -> TensorArg {
    TensorArg::with_ints(dtype, shape, values)
}

/// The running sums of `lengths` from 0: a `cu_seqlens` tensor's values.
fn cumulative(lengths: &[usize]) -> Vec<i64> {
    std::iter::once(0)
        .chain(lengths.iter().scan(0i64, |sum, &len| {
            *sum += len as i64;
            Some(*sum)
        }))
        .collect()
}

/// `torch.randperm(n)`: 0..n in a random order.
fn randperm(n: usize, rng: &mut Rng) -> Vec<i64> {
    let mut order: Vec<i64> = (0..n as i64).collect();
    for i in (1..n).rev() {
        order.swap(i, rng.gen_range(0..=i));
    }
    order
}

/// The lengths of FA3's `generate_random_padding_mask(max_seqlen, batch, mode="random")`:
/// randint(max(1, max_seqlen - 20), max_seqlen + 1) each (hopper/test_util.py:L13-L16).
fn seqlen_mask_lengths(max_seqlen: usize, batch: usize, rng: &mut Rng) -> Vec<usize> {
    let low = max_seqlen.saturating_sub(20).max(1);
    (0..batch)
        .map(|_| rng.gen_range(low..=max_seqlen))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_is_a_permutation_of_each_grid() {
        let n = grid(3).len();
        let mut seen: Vec<usize> = (0..n).map(|k| sampled_point(7, 3, k).0).collect();
        seen.sort_unstable();
        assert_eq!(seen, grid(3).to_vec());
        assert_ne!(sampled_point(7, 1, 0), sampled_point(8, 1, 0));
    }

    #[test]
    fn mate_only_arguments_at_their_defaults_are_left_out_for_sglang() {
        let call = |keywords: Vec<(&str, PyValue)>| KvCacheCall {
            keywords: keywords
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            ..KvCacheCall::default()
        };
        let written = call(vec![
            ("learnable_sink", PyValue::None),
            ("s_aux", PyValue::None),
            ("cp_world_size", PyValue::Int(1)),
            ("num_splits", PyValue::Int(5)),
        ]);
        let sglang = through_sglang(&written).unwrap();
        assert_eq!(
            sglang.keywords,
            vec![
                ("sinks".to_string(), PyValue::None),
                ("num_splits".to_string(), PyValue::Int(5))
            ]
        );
        let context_parallel = call(vec![("cp_world_size", PyValue::Int(2))]);
        assert_eq!(
            through_sglang(&context_parallel).unwrap_err(),
            "cp_world_size=2"
        );
    }

    /// FA3's test precomputes the metadata with the call's own arguments, so `fa3` accepts the
    /// buffer: its layout follows the mask `get_scheduler_metadata` resolves (cuda-fa3.md D.1:
    /// causal with a chunk is local, a window as long as the cache is none), not the test's
    /// causal/local flags. Point 1436579 (causal, a chunk) was refused with "scheduler_metadata
    /// must have shape (metadata_size)" when the layout came from the flags. A stride over the
    /// points with precomputed metadata and at most 1024 keys, and that point.
    #[test]
    fn fa3_calls_with_precomputed_metadata_are_accepted_by_fa3() {
        let test = TESTS.iter().position(|t| t.name == "fa3-kvcache").unwrap();
        let mut checked = 0;
        for &point in grid(test).iter().step_by(41).chain([&1_436_579]) {
            let upstream = upstream_call(test, GridPoint(point));
            let call = &upstream.call;
            let small = call
                .passed("k_cache")
                .and_then(PyValue::as_tensor)
                .is_some_and(|k| k.numel().unwrap_or(0) <= 10 * 1024 * 6 * 128);
            if call.metadata_args.is_none() || !(small || point == 1_436_579) {
                continue;
            }
            assert_eq!(
                accepted(&validate("fa3", call)),
                Ok(()),
                "{point}: {}",
                upstream.description
            );
            checked += 1;
        }
        assert!(checked > 2000, "{checked}");
    }

    /// The work is counted from the lengths the call gives: 3 and 7 query rows over 100 and 50
    /// keys, 4 heads of 64 + 64: (3·100 + 7·50)·4·128 = 332,800; a 4096-row prefill over 8192
    /// keys with 16 heads of 128 + 128: 4096·8192·16·256 = 137,438,953,472, over the cap.
    #[test]
    fn numbers_are_left_out_over_the_attention_work_cap() {
        let bf16 = |shape: &[usize]| PyValue::Tensor(TensorArg::new(Dtype::Bfloat16, shape));
        let ints = |values: &[i64]| {
            PyValue::Tensor(int_tensor(Dtype::Int32, &[values.len()], values.to_vec()))
        };
        let mut small = KvCacheCall::default();
        small
            .set("q", bf16(&[10, 4, 64]))
            .set("k_cache", bf16(&[2, 128, 1, 64]))
            .set("v_cache", bf16(&[2, 128, 1, 64]))
            .set("cache_seqlens", ints(&[100, 50]))
            .set("cu_seqlens_q", ints(&[0, 3, 10]))
            .set("max_seqlen_q", PyValue::Int(7));
        assert_eq!(over_the_work_cap(&small), None);
        let mut large = KvCacheCall::default();
        large
            .set("q", bf16(&[1, 4096, 16, 128]))
            .set("k_cache", bf16(&[1, 8192, 16, 128]))
            .set("v_cache", bf16(&[1, 8192, 16, 128]))
            .set("cache_seqlens", ints(&[8192]));
        let why = over_the_work_cap(&large).unwrap();
        assert!(why.starts_with("attention work 137438953472 "), "{why}");
    }

    /// The index of mate's test_paged_attn in [`TESTS`].
    fn mate_paged_attn() -> usize {
        TESTS
            .iter()
            .position(|t| t.name == "mate-paged-attn")
            .unwrap()
    }

    /// Every context-parallel grid point of mate's test_paged_attn, each rank's call validated
    /// by `mate` (no numbers: they are the slow part).
    #[test]
    fn every_context_parallel_call_of_mates_test_is_accepted_by_mate() {
        let test = mate_paged_attn();
        let mut checked = 0;
        for &point in grid(test) {
            let upstream = upstream_call(test, GridPoint(point));
            if upstream.other_ranks.is_empty() {
                continue;
            }
            for call in upstream.ranks() {
                let call = numerics::with_described_metadata(call, DEFAULT_MP).unwrap();
                let verdict = validate("mate", &through_mate_wrapper(&call));
                assert_eq!(accepted(&verdict), Ok(()), "{}", upstream.description);
                checked += 1;
            }
        }
        // 3840 points, half with 2 ranks and half with 4
        assert_eq!(checked, 1920 * 2 + 1920 * 4);
    }

    /// The small context-parallel points of mate's test_paged_attn (8 query heads over 1 KV head,
    /// head dim 128, the first lengths, pages of 16), causal and not, 2 and 4 ranks, with and
    /// without splits: each rank's numbers on the kernel path are within tolerance of the
    /// reference's evaluation of that rank.
    #[test]
    fn context_parallel_ranks_get_numbers() {
        let test = mate_paged_attn();
        let mut checked = 0;
        for &point in grid(test) {
            let upstream = upstream_call(test, GridPoint(point));
            let d = &upstream.description;
            let small = d.contains("num_heads: (8, 1)")
                && d.contains("headdim: 128")
                && d.contains("page_size: 16,")
                && d.contains("pack_gqa: true")
                && d.contains("seq_lens: [(32, 512),");
            if upstream.other_ranks.is_empty() || !small {
                continue;
            }
            let result = check(Entry::Mate, &upstream, 64 << 20).unwrap();
            let CaseResult::Passed(Some(note)) = &result else {
                panic!("{d}: {result:?}");
            };
            assert!(
                note.contains("each rank's numbers within tolerance"),
                "{d}: {note}"
            );
            checked += 1;
        }
        // cp 2 and 4, two masks, two split settings
        assert_eq!(checked, 8);
    }

    /// A small deterministic sample, the first ten calls (seed 1: one of each test, then two
    /// more of FA3's and mate's test_paged_attn), with numbers for calls up to 256 MiB (the
    /// tensors, the references and the kernel path's buffers) so that a debug build runs it in
    /// seconds.
    #[test]
    fn a_small_sample_of_each_test_passes() {
        let outcomes: Vec<CaseOutcome> = (0..10).map(|i| run_case(1, i, 256 << 20)).collect();
        for (index, outcome) in outcomes.iter().enumerate() {
            assert_eq!(outcome, &run_case(1, index, 256 << 20), "deterministic");
            assert!(
                outcome.result.failure().is_none(),
                "{}: {:?}",
                outcome.name,
                outcome.result
            );
        }
        let note = |i: usize| match &outcomes[i].result {
            CaseResult::Passed(Some(note)) => note.clone(),
            other => panic!("{}: {other:?}", outcomes[i].name),
        };
        for (i, test) in TESTS.iter().enumerate() {
            assert!(outcomes[i].name.starts_with(&format!("{}/", test.name)));
        }
        assert!(note(0).starts_with("fa3, sgl-kernel accept"), "{}", note(0));
        // context parallelism is mate's own: each rank's call is validated by `mate` (its
        // numbers are over this test's cap)
        assert!(
            note(1).starts_with("mate accepts the call of each of 2 ranks; numbers not run"),
            "{}",
            note(1)
        );
        for mla in 5..8 {
            assert!(
                note(mla).contains("numbers not modelled for MLA"),
                "{}",
                note(mla)
            );
        }
        assert!(note(9).contains("numbers within tolerance"), "{}", note(9));
    }
}
