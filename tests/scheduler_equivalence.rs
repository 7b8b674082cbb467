//! Scheduler metadata through the whole MUSA stack (`musa::flash_attn_with_kvcache`): equivalence
//! and sensitivity over seeded valid calls (proptest over the generator's seed), SGLang's
//! auto-injection on the same calls, the exact too-small error, sinks dropping metadata, and
//! hand-worked stale-metadata findings.

use fa3conform::call::{Dtype, KvCacheCall, MetadataArgsSpec, PyValue, TensorArg};
use fa3conform::cases::random_call;
use fa3conform::fuzzing::oracles::metadata::{
    Change, Established, PROPERTY_MEMORY_CAP, Subject, case_options, check_equivalence,
    check_sensitivity,
};
use fa3conform::mate::DEFAULT_MP;
use fa3conform::musa::{
    InjectionCache, MetadataUsed, MusaError, MusaOptions, flash_attn_with_kvcache,
};
use fa3conform::scheduler::stale_metadata_findings;
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

fn call_from_seed(seed: u64) -> KvCacheCall {
    random_call(&mut ChaCha8Rng::seed_from_u64(seed), &case_options()).returning_lse()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn own_metadata_is_equivalent_to_none(seed in any::<u64>()) {
        let call = call_from_seed(seed);
        let result = check_equivalence(&call, DEFAULT_MP);
        prop_assert!(result.is_ok(), "{}\n{}", result.unwrap_err(), fa3conform::spec::call_to_json(&call));
    }

    #[test]
    fn injected_metadata_matches_or_shows_its_consequence(seed in any::<u64>()) {
        let call = call_from_seed(seed);
        let subject = Subject::of(&call, DEFAULT_MP, PROPERTY_MEMORY_CAP).unwrap();
        if let Some(subject) = subject {
            let result = subject.injection();
            prop_assert!(result.is_ok(), "{}\n{}", result.unwrap_err(), fa3conform::spec::call_to_json(&call));
        }
    }

    #[test]
    fn changed_metadata_is_detected_with_its_consequence(seed in any::<u64>(), change in 0..Change::ALL.len()) {
        let call = call_from_seed(seed);
        let change = Change::ALL[change];
        let result = check_sensitivity(&call, change, DEFAULT_MP);
        prop_assert!(result.is_ok(), "{}: {}\n{}", change.name(), result.unwrap_err(), fa3conform::spec::call_to_json(&call));
    }
}

/// Over a fixed set of seeds, every outcome the properties distinguish is reached (so the
/// proptests above do not pass vacuously).
#[test]
fn properties_reach_every_outcome() {
    let mut seen: BTreeMap<Established, usize> = BTreeMap::new();
    for seed in 0..100u64 {
        let call = call_from_seed(seed);
        *seen
            .entry(check_equivalence(&call, DEFAULT_MP).unwrap())
            .or_default() += 1;
        for change in Change::ALL {
            *seen
                .entry(check_sensitivity(&call, change, DEFAULT_MP).unwrap())
                .or_default() += 1;
        }
    }
    for outcome in [
        Established::BitIdentical,
        Established::WithinTolerance,
        Established::DroppedBySinks,
        Established::DetectedHarmless,
        Established::DetectedRowsMissing,
        Established::DetectedRefused,
    ] {
        assert!(
            seen.contains_key(&outcome),
            "{outcome:?} never reached: {seen:?}"
        );
    }
}

/// SGLang's injection, over a fixed set of seeds, reaches a matching recomputation, a stale one
/// (the wrapper's view of the call differs from the call) and a wrapper that raises.
#[test]
fn injection_reaches_every_outcome() {
    let mut seen: BTreeMap<Established, usize> = BTreeMap::new();
    for seed in 0..40u64 {
        if let Some(subject) =
            Subject::of(&call_from_seed(seed), DEFAULT_MP, PROPERTY_MEMORY_CAP).unwrap()
        {
            *seen.entry(subject.injection().unwrap()).or_default() += 1;
        }
    }
    eprintln!("{seen:?}");
    let stale = seen.keys().any(|o| {
        matches!(
            o,
            Established::DetectedHarmless
                | Established::DetectedRowsMissing
                | Established::DetectedRefused
        )
    });
    assert!(seen.contains_key(&Established::WithinTolerance), "{seen:?}");
    assert!(seen.contains_key(&Established::InjectionRaises), "{seen:?}");
    assert!(stale, "{seen:?}");
}

fn ints(values: &[i64]) -> PyValue {
    PyValue::Tensor(TensorArg::with_ints(
        Dtype::Int32,
        &[values.len()],
        values.to_vec(),
    ))
}

fn tensor(shape: &[usize]) -> PyValue {
    PyValue::tensor(Dtype::Bfloat16, shape)
}

/// Two sequences of 7 query rows (fixed length), 4 query heads on 1 KV head, d = 64, 40 cached keys.
fn fixed_length_call() -> KvCacheCall {
    let mut call = KvCacheCall {
        id: "fixed".into(),
        seed: 3,
        ..KvCacheCall::default()
    };
    call.set("q", tensor(&[2, 7, 4, 64]))
        .set("k_cache", tensor(&[2, 64, 1, 64]))
        .set("v_cache", tensor(&[2, 64, 1, 64]))
        .set("cache_seqlens", ints(&[40, 40]))
        .set("causal", PyValue::Bool(true))
        .set("return_softmax_lse", PyValue::Bool(true));
    call
}

fn args_for(call_max_seqlen_q: usize) -> MetadataArgsSpec {
    MetadataArgsSpec {
        batch_size: 2,
        max_seqlen_q: call_max_seqlen_q,
        max_seqlen_k: 64,
        num_heads_q: 4,
        num_heads_kv: 1,
        headdim: 64,
        cache_seqlens: vec![40, 40],
        headdim_v: Some(64),
        causal: true,
        ..MetadataArgsSpec::default()
    }
}

#[test]
fn metadata_for_one_query_row_leaves_rows_1_to_6_uncomputed() {
    // Call: 7 rows · 4 heads = 28 packed rows → pack-GQA, tile_m 32, one m-block covers all.
    // Metadata for max_seqlen_q = 1 (no cu_seqlens_q, so every sequence has 1 row): 4 packed rows →
    // tile_m 32 still, but num_m_blocks = ceil(4/32) = 1 … which covers the call's 28 packed rows.
    // With pack_gqa=False on the call instead: 7 rows, tile_m 32 → 1 block; still covered.
    // So take 40 rows: call needs ceil(160/256)… no pack (160 ≤ 256 packs): tile 192, 1 block.
    // The uncovered case needs the call's rows beyond one tile: 300 rows, no pack (1200 > 256),
    // tile_m 256 → 2 blocks; metadata for max_seqlen_q = 1 → 1 block → rows 256..300 lost.
    let mut call = fixed_length_call();
    call.set("q", tensor(&[2, 300, 4, 64]))
        .set("k_cache", tensor(&[2, 320, 1, 64]))
        .set("v_cache", tensor(&[2, 320, 1, 64]));
    let mut args = args_for(1);
    args.max_seqlen_k = 320;
    call.metadata_args = Some(args);
    let findings = stale_metadata_findings(&call);
    let m_blocks = findings
        .iter()
        .find(|h| h.code == "H-SCHED-M-BLOCKS")
        .unwrap();
    assert_eq!(
        m_blocks.message,
        "num_m_blocks computed for max_seqlen_q=1, call has 300: rows 256..300 of each sequence are never computed"
    );
    // The kernel path driven by that metadata leaves exactly those rows NaN.
    let values = fa3conform::scheduler::get_scheduler_metadata(
        call.metadata_args.as_ref().unwrap(),
        DEFAULT_MP,
    )
    .unwrap()
    .to_tensor();
    let out = flash_attn_with_kvcache(
        &call.with_scheduler_metadata(&values),
        &mut InjectionCache::default(),
        &MusaOptions::default(),
    )
    .unwrap();
    let out = out.returned.out();
    for b in 0..2 {
        assert!((0..256).all(|row| out.data[[b, row, 0, 0]].is_finite()));
        assert!((256..300).all(|row| out.data[[b, row, 0, 0]].is_nan()));
    }
}

#[test]
fn matching_args_give_no_findings_and_page_size_is_reported_as_dropped() {
    let mut call = fixed_length_call();
    call.metadata_args = Some(args_for(7));
    assert_eq!(stale_metadata_findings(&call), vec![]);
    call.metadata_args = Some(MetadataArgsSpec {
        page_size: Some(16),
        ..args_for(7)
    });
    let findings = stale_metadata_findings(&call);
    assert_eq!(findings.len(), 1);
    assert_eq!(
        findings[0].message,
        "the metadata was computed with page_size=16, call has None, which mate never reads: no effect"
    );
}

#[test]
fn permuted_and_longer_buffers_name_their_consequences() {
    let call = fixed_length_call();
    // Own metadata (hand-derived): causal keys n·64 − m·32 equal → batches in order; one split each.
    // [nsd 1 1 | batch 0 0 | m 1 1 | l2 4 4]: sequence 0 twice, sequence 1 never.
    let findings =
        stale_metadata_findings(&call.with_scheduler_metadata(&[1, 1, 0, 0, 1, 1, 4, 4]));
    let table = findings
        .iter()
        .find(|h| h.code == "H-SCHED-BATCH-TABLE")
        .unwrap();
    assert_eq!(
        table.message,
        "batch_table [0, 0] is not a permutation of 0..2: sequences [0] are computed twice, sequences [1] are never computed"
    );
    // A 12-element buffer made for 3 sequences (batch_table [2, 0, 1]): sliced at 2, batch_table
    // is read as [1, 2] and num_m_blocks as [0, 1]: sequence 1 (position 0) gets no m-block.
    let findings = stale_metadata_findings(
        &call.with_scheduler_metadata(&[1, 1, 1, 2, 0, 1, 1, 1, 1, 4, 4, 4]),
    );
    let codes: Vec<&str> = findings.iter().map(|h| h.code).collect();
    assert_eq!(
        codes,
        [
            "H-SCHED-BUFFER-LONGER",
            "H-SCHED-BATCH-TABLE",
            "H-SCHED-M-BLOCKS"
        ]
    );
    assert_eq!(
        findings[2].message,
        "num_m_blocks has 0 block(s) of 32 rows for sequence 1, which needs 1: rows 0..7 of sequence 1 are never computed"
    );
    assert_eq!(
        findings[0].message,
        "the metadata has 12 elements, the call slices 4·b = 8: its vectors are read at offsets of 2, not of the 3 they were written at"
    );
}

#[test]
fn too_small_buffer_raises_the_profiles_exact_error() {
    let call = fixed_length_call().with_scheduler_metadata(&[1, 1, 0, 1, 1, 1, 4]);
    let error = flash_attn_with_kvcache(
        &call,
        &mut InjectionCache::default(),
        &MusaOptions::default(),
    )
    .unwrap_err();
    let MusaError::Raises(rejection) = error else {
        panic!("{error:?}")
    };
    assert_eq!(
        rejection.to_string(),
        "AssertionError: metadata buffer is too small"
    );
}

#[test]
fn sinks_drop_metadata_even_a_too_small_one() {
    let mut call = fixed_length_call().with_scheduler_metadata(&[1]);
    call.set(
        "sinks",
        PyValue::Tensor(TensorArg::new(Dtype::Bfloat16, &[4])),
    );
    let output = flash_attn_with_kvcache(
        &call,
        &mut InjectionCache::default(),
        &MusaOptions::default(),
    )
    .unwrap();
    assert_eq!(output.num_splits, 1);
    let findings = stale_metadata_findings(&call);
    assert_eq!(
        findings.iter().map(|h| h.code).collect::<Vec<_>>(),
        ["H-SCHED-DROPPED-BY-SINKS"]
    );
}

#[test]
fn injection_recomputes_then_reuses_per_prefix() {
    use fa3conform::call::{LayerInfo, SglangBackend, SglangContext};
    let mut call = KvCacheCall::default();
    call.set("q", tensor(&[2, 4, 64]))
        .set("k_cache", tensor(&[2, 64, 1, 64]))
        .set("v_cache", tensor(&[2, 64, 1, 64]))
        .set("cu_seqlens_q", ints(&[0, 1, 2]))
        .set("max_seqlen_q", PyValue::Int(1))
        .set("cache_seqlens", ints(&[10, 50]));
    let backend = |layer_id| SglangBackend {
        prefix: "forward_decode".into(),
        layer: Some(LayerInfo {
            layer_id,
            tp_q_head_num: 4,
            tp_k_head_num: 1,
            qk_head_dim: 64,
            v_head_dim: 64,
        }),
        num_hidden_layers: 2,
        pp_rank: 0,
        pp_world_size: 1,
        first_k_dense_replace: None,
        full_attention_interval: None,
        can_run_tbo: false,
        max_seqlen_k: Some(50),
        use_mla: false,
        pp_layer_partition: None,
        force_update_metadata: None,
        cached_prefixes: vec![],
        cached_metadata: Default::default(),
    };
    let mut cache = InjectionCache::default();
    call.context = SglangContext {
        sglang_backend: Some(backend(0)),
    };
    let first = flash_attn_with_kvcache(&call, &mut cache, &MusaOptions::default()).unwrap();
    // Hand-derived: b = 2, sq = 1, r = 4 → pack, tile_m 32; n_blocks [1, 1] (10, 50 keys), S_M = 1
    // (n_blocks ≤ 4) → nsd [1, 1]; not causal → key n_blocks, equal → batch order 0, 1;
    // m_blocks ceil(4/32) = 1; K_l2 = 1572864/(64·128·2) = 96 → g(1) = 16, min(16·1, h_k = 1) = 1.
    let MetadataUsed::Injected {
        recomputed: true,
        metadata,
        ..
    } = &first.metadata
    else {
        panic!("{:?}", first.metadata)
    };
    assert_eq!(metadata.values, [1, 1, 0, 1, 1, 1, 1, 1]);
    call.context = SglangContext {
        sglang_backend: Some(backend(1)),
    };
    let second = flash_attn_with_kvcache(&call, &mut cache, &MusaOptions::default()).unwrap();
    assert!(matches!(
        second.metadata,
        MetadataUsed::Injected {
            recomputed: false,
            ..
        }
    ));
    assert_eq!(first.returned, second.returned);
}

#[test]
fn every_scheduler_hazard_is_raised() {
    use fa3conform::forward::{emulate, parse_forward};
    use fa3conform::tensor::DEFAULT_MEMORY_CAP;
    use fa3conform::validate::registry;
    use std::collections::BTreeSet;
    let mut raised: BTreeSet<&str> = BTreeSet::new();
    let mut add =
        |call: &KvCacheCall| raised.extend(stale_metadata_findings(call).iter().map(|h| h.code));
    let call = fixed_length_call();
    // Split counts 0 and 2 (the forward has one slot); values that are not what the args give.
    add(&call.with_scheduler_metadata(&[0, 2, 0, 1, 1, 1, 1, 1]));
    let mut both = call.with_scheduler_metadata(&[1, 1, 1, 0, 1, 1, 1, 1]);
    both.metadata_args = Some(args_for(7));
    add(&both);
    add(&call.with_scheduler_metadata(&[1, 1, 0, 0, 1, 1, 4, 4]));
    add(&call.with_scheduler_metadata(&[1, 1, 1, 2, 0, 1, 1, 1, 1, 4, 4, 4]));
    let mut sinks = call.with_scheduler_metadata(&[1]);
    sinks.set(
        "sinks",
        PyValue::Tensor(TensorArg::new(Dtype::Bfloat16, &[4])),
    );
    add(&sinks);
    let mut dropped = call.clone();
    dropped.metadata_args = Some(MetadataArgsSpec {
        page_size: Some(16),
        max_seqlen_q: 1,
        ..args_for(7)
    });
    add(&dropped);
    let mut uncomputable = call.clone();
    uncomputable.metadata_args = Some(MetadataArgsSpec {
        num_heads_kv: 3,
        ..args_for(7)
    });
    add(&uncomputable);
    for name in ["hybrid-swa", "mla", "cp-extend", "draft"] {
        let path = format!(
            "{}/examples/forward-{name}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let report = emulate(
            &parse_forward(&std::fs::read_to_string(path).unwrap()).unwrap(),
            DEFAULT_MP,
            DEFAULT_MEMORY_CAP,
        );
        raised.extend(
            report
                .calls
                .iter()
                .flat_map(|c| c.findings.iter().map(|f| f.code)),
        );
    }
    let silent: Vec<&str> = registry::hazards()
        .map(|h| h.code)
        .filter(|c| c.starts_with("H-SCHED-") && !raised.contains(c))
        .collect();
    assert!(silent.is_empty(), "never raised: {silent:?}");
}
