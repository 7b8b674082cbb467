//! mate's metadata kernel model (`mate::scheduler_metadata`) on hand-worked buffers, including ties
//! in the sort, reached through the FA3-signature `get_scheduler_metadata`.

use fa3conform::call::MetadataArgsSpec;
use fa3conform::scheduler::{MetadataError, get_scheduler_metadata};

/// Four decode sequences, one head, d = dv = 64, cache lengths 64, 200, 64, 200.
fn four_sequences(causal: bool) -> MetadataArgsSpec {
    MetadataArgsSpec {
        batch_size: 4,
        max_seqlen_q: 1,
        max_seqlen_k: 200,
        num_heads_q: 1,
        num_heads_kv: 1,
        headdim: 64,
        cache_seqlens: vec![64, 200, 64, 200],
        causal,
        ..MetadataArgsSpec::default()
    }
}

#[test]
fn equal_keys_keep_ascending_batch_order() {
    // r = 1, sq = 1 → pack-GQA, tile_m 32, tile_n 64. n_blocks = [1, 4, 1, 4] ≤ 4 → S_M = 1
    // (heuristic step 5), nsd = 1. Non-causal key = n_blocks = [1, 4, 1, 4]; descending and stable
    // → positions hold batches 1, 3, 0, 2. m_blocks = ceil(1/32) = 1. K_l2 = 1572864/(64·128·2) = 96,
    // g(1) = g(4) = 16, min(16, h_k = 1) = 1.
    let tensor = get_scheduler_metadata(&four_sequences(false), 48)
        .unwrap()
        .to_tensor();
    assert_eq!(tensor, [1, 1, 1, 1, 1, 3, 0, 2, 1, 1, 1, 1, 1, 1, 1, 1]);
    // Causal key n·64 − m·32 = [32, 224, 32, 224]: the same order.
    let causal = get_scheduler_metadata(&four_sequences(true), 48).unwrap();
    assert_eq!(causal.batch_table, [1, 3, 0, 2]);
}

#[test]
fn page_size_qkv_dtype_and_softcap_do_not_change_the_buffer() {
    let base = get_scheduler_metadata(&four_sequences(true), 48).unwrap();
    let dropped = MetadataArgsSpec {
        page_size: Some(16),
        qkv_dtype: Some("float16".into()),
        has_softcap: true,
        ..four_sequences(true)
    };
    assert_eq!(get_scheduler_metadata(&dropped, 48).unwrap(), base);
}

#[test]
fn chain_checks_give_mates_messages() {
    let wrong = |f: fn(&mut MetadataArgsSpec)| {
        let mut args = four_sequences(false);
        f(&mut args);
        get_scheduler_metadata(&args, 48).unwrap_err()
    };
    let rejected = |m: &str| MetadataError::Rejected(m.to_string());
    assert_eq!(
        wrong(|a| a.cache_seqlens.truncate(3)),
        rejected("seqused_k must have shape (batch_size,)")
    );
    assert_eq!(
        wrong(|a| a.cu_seqlens_q = Some(vec![0, 1])),
        rejected("cu_seqlens_q must have shape (batch_size + 1,)")
    );
    assert_eq!(
        wrong(|a| a.num_heads_kv = 2),
        rejected("num_heads_q must be divisible by num_heads_kv")
    );
    assert_eq!(
        wrong(|a| a.headdim_v = Some(128)),
        rejected("Add config for headdim 64-128")
    );
    assert!(matches!(
        wrong(|a| a.cache_seqlens[0] = -1),
        MetadataError::OutOfBounds(_)
    ));
}
