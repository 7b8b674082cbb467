//! The tricky parts of the `musa` profile, on calls built in code: check order when several checks
//! fail, int vs tensor `cache_seqlens`, `None` passed vs not passed, tuple vs list `window_size`,
//! device placement, strides, injection, and the resolved parameters (expected values worked out by
//! hand from musa-fa3.md).

use fa3conform::call::{
    Device, Dtype, KvCacheCall, LayerInfo, LseLayout, PyValue, SglangBackend, SglangContext,
};
use fa3conform::validate::{Profile, Verdict, profiles::MUSA};

fn bf16(shape: &[usize]) -> PyValue {
    PyValue::tensor(Dtype::Bfloat16, shape)
}

fn int32(shape: &[usize]) -> PyValue {
    PyValue::tensor(Dtype::Int32, shape)
}

fn with_device(v: PyValue, device: Device) -> PyValue {
    let PyValue::Tensor(mut t) = v else {
        unreachable!()
    };
    t.device = Some(device);
    PyValue::Tensor(t)
}

fn with_stride(v: PyValue, stride: &[usize]) -> PyValue {
    let PyValue::Tensor(mut t) = v else {
        unreachable!()
    };
    t.stride = Some(stride.to_vec());
    PyValue::Tensor(t)
}

fn ints(values: &[i64]) -> PyValue {
    PyValue::Tuple(values.iter().map(|&v| PyValue::Int(v)).collect())
}

/// SGLang's decode call: 4 sequences of one query token, 8 heads over 2 KV heads, d = 128, a paged
/// cache of 64 pages of 16 tokens, 16 pages per sequence.
fn decode() -> KvCacheCall {
    let mut call = KvCacheCall {
        id: "decode".into(),
        ..KvCacheCall::default()
    };
    call.set("q", bf16(&[4, 8, 128]))
        .set("k_cache", bf16(&[64, 16, 2, 128]))
        .set("v_cache", bf16(&[64, 16, 2, 128]))
        .set("cache_seqlens", int32(&[4]))
        .set("page_table", int32(&[4, 16]))
        .set("cu_seqlens_q", int32(&[5]))
        .set("max_seqlen_q", PyValue::Int(1))
        .set("causal", PyValue::Bool(true));
    call
}

/// Fixed-length call: batch 2, one query token, non-paged cache of capacity 256.
fn fixed() -> KvCacheCall {
    let mut call = KvCacheCall {
        id: "fixed".into(),
        ..KvCacheCall::default()
    };
    call.set("q", bf16(&[2, 1, 8, 128]))
        .set("k_cache", bf16(&[2, 256, 2, 128]))
        .set("v_cache", bf16(&[2, 256, 2, 128]))
        .set("cache_seqlens", int32(&[2]));
    call
}

/// A backend that has run layer `layer_id` of a 4-layer model (one pipeline stage).
fn backend(layer_id: u32) -> SglangContext {
    SglangContext {
        sglang_backend: Some(SglangBackend {
            prefix: "forward_decode".into(),
            layer: Some(LayerInfo {
                layer_id,
                tp_q_head_num: 8,
                tp_k_head_num: 2,
                qk_head_dim: 128,
                v_head_dim: 128,
            }),
            num_hidden_layers: 4,
            pp_rank: 0,
            pp_world_size: 1,
            first_k_dense_replace: None,
            full_attention_interval: None,
            can_run_tbo: false,
            max_seqlen_k: Some(256),
            use_mla: false,
            pp_layer_partition: None,
            force_update_metadata: None,
            cached_prefixes: Vec::new(),
            cached_metadata: Default::default(),
        }),
    }
}

fn verdict(call: &KvCacheCall) -> Verdict {
    MUSA.validate(call)
}

/// `site: Exception: message` of a rejection, or `accepted`.
fn outcome(call: &KvCacheCall) -> String {
    match verdict(call).rejection() {
        Some(r) => format!("{}: {r}", r.site),
        None => "accepted".into(),
    }
}

fn hazard_codes(call: &KvCacheCall) -> Vec<&'static str> {
    verdict(call).hazards.iter().map(|h| h.code).collect()
}

#[test]
fn first_failing_check_wins_across_layers() {
    // ver, a CPU q, float32 q and a strided k_cache all at once: the wrapper's gate comes first.
    let mut call = fixed();
    call.set("ver", PyValue::Int(2))
        .set(
            "q",
            with_device(
                PyValue::tensor(Dtype::Float32, &[2, 1, 8, 128]),
                Device::Cpu,
            ),
        )
        .set(
            "k_cache",
            with_stride(bf16(&[2, 256, 2, 128]), &[131072, 512, 256, 2]),
        );
    assert_eq!(
        outcome(&call),
        "musa.W-1: ValueError: Only ver=3 is supported for MUSA FA3."
    );
    // Then mha_interface's stride assert, before any _fmha_fwd check.
    call.unset("ver");
    assert_eq!(
        outcome(&call),
        "musa.K-1: AssertionError: k_cache must have contiguous last dimension"
    );
    // Then the device list (F-8) before the dtype (F-9).
    call.set("k_cache", bf16(&[2, 256, 2, 128]));
    assert_eq!(
        outcome(&call),
        "musa.F-8: AssertionError: inputs must be on MUSA device"
    );
    call.set("q", PyValue::tensor(Dtype::Float32, &[2, 1, 8, 128]));
    assert_eq!(
        outcome(&call),
        "musa.F-9: AssertionError: inputs must be float16 or bfloat16"
    );
}

#[test]
fn first_failing_check_wins_within_a_loop() {
    // F-12 runs its dtype and contiguity asserts per tensor, in list order: cu_seqlens_q's
    // contiguity fails before cache_seqlens' dtype.
    let mut call = decode();
    call.set("cu_seqlens_q", with_stride(int32(&[5]), &[2]))
        .set("cache_seqlens", PyValue::tensor(Dtype::Int64, &[4]))
        .set("page_table", PyValue::tensor(Dtype::Int64, &[4, 16]));
    assert_eq!(
        outcome(&call),
        "musa.F-12.contiguous: AssertionError: cu_seqlens_q, cu_seqlens_k, cu_seqlens_k_new, seqused_q, \
         seqused_k, leftpad_k must be contiguous"
    );
    call.set("cu_seqlens_q", int32(&[5]));
    assert!(outcome(&call).starts_with("musa.F-12.dtype: "));
    call.set("cache_seqlens", int32(&[4]));
    assert_eq!(
        outcome(&call),
        "musa.F-13.dtype: AssertionError: page_table must be int32"
    );
}

#[test]
fn int_and_tensor_cache_seqlens() {
    // Non-paged: an int becomes a tensor of k_cache.shape[0] = 2 = batch, accepted with a hazard.
    let mut call = fixed();
    call.set("cache_seqlens", PyValue::Int(100));
    assert_eq!(outcome(&call), "accepted");
    let v = verdict(&call);
    assert_eq!(
        v.hazards[0].message,
        "int cache_seqlens=100 becomes an int32 tensor of length k_cache.shape[0]=2 (upstream FA3 uses q.shape[0]=2)"
    );
    // Paged: k_cache.shape[0] is the page count (64), not the batch (4).
    let mut call = decode();
    call.set("cache_seqlens", PyValue::Int(100));
    assert_eq!(
        outcome(&call),
        "musa.F-22: AssertionError: seqused_k must have shape (batch_size,)"
    );
    // A bool is an int to isinstance.
    call.set("cache_seqlens", PyValue::Bool(true));
    assert!(outcome(&call).starts_with("musa.F-22"));
    // A float is not converted and fails at the device test.
    call.set("cache_seqlens", PyValue::Float(100.0));
    assert_eq!(
        outcome(&call),
        "musa.F-8.attr: AttributeError: 'float' object has no attribute 'is_musa'"
    );
    // Under injection that recomputes, the int reaches maybe_contiguous before mate converts it.
    call.set("cache_seqlens", PyValue::Int(100));
    call.context = backend(0);
    assert_eq!(
        outcome(&call),
        "musa.G-1.attr: AttributeError: 'int' object has no attribute 'stride'"
    );
    // The tensor form is accepted in both cases.
    call.set("cache_seqlens", int32(&[4]));
    assert_eq!(outcome(&call), "accepted");
}

#[test]
fn none_passed_and_not_passed() {
    // window_size=None is normalised by mate (hazard); not passing it is the default (-1, -1).
    let mut call = decode();
    assert!(hazard_codes(&call).is_empty());
    call.set("window_size", PyValue::None);
    assert_eq!(outcome(&call), "accepted");
    assert_eq!(hazard_codes(&call), ["H-MUSA-WINDOW-NONE"]);
    // ver=None passed is not 3; not passed is the default 3.
    let mut call = fixed();
    call.set("ver", PyValue::None);
    assert!(outcome(&call).starts_with("musa.W-1"));
    call.unset("ver");
    assert_eq!(outcome(&call), "accepted");
    // sinks=None passed is no sink at all.
    call.set("sinks", PyValue::None);
    assert_eq!(outcome(&call), "accepted");
    assert!(hazard_codes(&call).is_empty());
    // scheduler_metadata=None passed still triggers injection, exactly like not passing it.
    let mut call = fixed();
    call.context = backend(0);
    call.set("scheduler_metadata", PyValue::None);
    assert_eq!(
        outcome(&call),
        "musa.W-2.cu_seqlens_q.attr: AttributeError: 'NoneType' object has no attribute 'shape'"
    );
    call.unset("scheduler_metadata");
    assert!(outcome(&call).starts_with("musa.W-2.cu_seqlens_q.attr"));
}

#[test]
fn tuple_and_list_window_size() {
    let mut tuple = decode();
    tuple.set("window_size", ints(&[64, 0]));
    let mut list = decode();
    list.set(
        "window_size",
        PyValue::List(vec![PyValue::Int(64), PyValue::Int(0)]),
    );
    let (t, l) = (verdict(&tuple), verdict(&list));
    let (t, l) = (t.resolved().unwrap(), l.resolved().unwrap());
    assert_eq!(t, l);
    // (64, 0) with causal, seqlen_q 1, seqlen_k 256: local, left 64, right 0.
    assert_eq!(
        (t.is_causal, t.is_local, t.window_left, t.window_right),
        (false, true, 64, 0)
    );
    tuple.set("window_size", ints(&[64]));
    list.set("window_size", PyValue::List(vec![PyValue::Int(64)]));
    assert_eq!(
        outcome(&tuple),
        "musa.K-6.window-index: IndexError: tuple index out of range"
    );
    assert_eq!(
        outcome(&list),
        "musa.K-6.window-index: IndexError: list index out of range"
    );
}

#[test]
fn device_placement() {
    // No device in the spec: the profile's native device.
    assert_eq!(outcome(&decode()), "accepted");
    let mut call = decode();
    call.set("q", with_device(bf16(&[4, 8, 128]), Device::Musa));
    assert_eq!(outcome(&call), "accepted");
    for device in [Device::Cpu, Device::Cuda] {
        call.set("page_table", with_device(int32(&[4, 16]), device));
        assert_eq!(
            outcome(&call),
            "musa.F-8: AssertionError: inputs must be on MUSA device"
        );
    }
    // cu_seqlens_q on the CPU: F-8 in mate, but G-9 first when injection recomputes.
    let mut call = decode();
    call.set("cu_seqlens_q", with_device(int32(&[5]), Device::Cpu));
    assert!(outcome(&call).starts_with("musa.F-8: "));
    call.context = backend(0);
    assert!(outcome(&call).starts_with("musa.G-9: "));
    // An int cache_seqlens lands on k_cache's device.
    let mut call = fixed();
    call.set("cache_seqlens", PyValue::Int(5))
        .set("q", with_device(bf16(&[2, 1, 8, 128]), Device::Cpu))
        .set("k_cache", with_device(bf16(&[2, 256, 2, 128]), Device::Cpu))
        .set("v_cache", with_device(bf16(&[2, 256, 2, 128]), Device::Cpu));
    assert!(outcome(&call).starts_with("musa.F-8: "));
}

#[test]
fn strides() {
    // A cache with padded rows but a contiguous head dim is accepted (mate asserts stride(-1) only).
    let mut call = fixed();
    call.set(
        "k_cache",
        with_stride(bf16(&[2, 256, 2, 128]), &[100000, 512, 128, 1]),
    )
    .set(
        "v_cache",
        with_stride(bf16(&[2, 256, 2, 128]), &[100000, 512, 128, 1]),
    );
    assert_eq!(outcome(&call), "accepted");
    call.set(
        "v_cache",
        with_stride(bf16(&[2, 256, 2, 128]), &[65536, 256, 1, 2]),
    );
    assert_eq!(
        outcome(&call),
        "musa.K-2: AssertionError: v_cache must have contiguous last dimension"
    );
    // stride(0) is compared, not is_contiguous(): a one-element view with stride 7 is rejected.
    let mut call = fixed();
    call.set("q", bf16(&[1, 1, 8, 128]))
        .set("k_cache", bf16(&[1, 256, 2, 128]))
        .set("v_cache", bf16(&[1, 256, 2, 128]))
        .set("cache_seqlens", with_stride(int32(&[1]), &[7]));
    assert!(outcome(&call).starts_with("musa.F-12.contiguous: "));
    // page_table is checked on its last stride.
    let mut call = decode();
    call.set("page_table", with_stride(int32(&[4, 16]), &[32, 1]));
    assert_eq!(outcome(&call), "accepted");
    call.set("page_table", with_stride(int32(&[4, 16]), &[1, 4]));
    assert_eq!(
        outcome(&call),
        "musa.F-13.contiguous: AssertionError: page_table must be contiguous"
    );
}

#[test]
fn injection_recomputes_only_at_the_first_layer_of_the_stage() {
    let mut call = decode();
    call.context = backend(0);
    // A metadata-chain failure shows that chain M ran: the layer's dims are unsupported.
    if let Some(b) = call.context.sglang_backend.as_mut() {
        b.layer.as_mut().unwrap().v_head_dim = 64;
        b.num_hidden_layers = 4;
    }
    assert_eq!(
        outcome(&call),
        "musa.G-13: AssertionError: Add config for headdim 128-64"
    );
    let b = call.context.sglang_backend.as_mut().unwrap();
    b.layer.as_mut().unwrap().layer_id = 1;
    // Layer 1 > start 0 and the prefix is not cached yet: still recomputed.
    assert!(outcome(&call).starts_with("musa.G-13"));
    let b = call.context.sglang_backend.as_mut().unwrap();
    b.cached_prefixes = vec!["forward_decode".into()];
    // Cached: reused, chain M does not run.
    assert_eq!(outcome(&call), "accepted");
    // The environment override forces a refresh; unknown values fall back to False.
    let b = call.context.sglang_backend.as_mut().unwrap();
    b.force_update_metadata = Some("on".into());
    assert_eq!(outcome(&call), "accepted");
    let b = call.context.sglang_backend.as_mut().unwrap();
    b.force_update_metadata = Some("TRUE".into());
    assert!(outcome(&call).starts_with("musa.G-13"));
    // full_attention_interval moves the refreshing layer: start 0 + 2 - 1 = 1 >= layer 1.
    let b = call.context.sglang_backend.as_mut().unwrap();
    b.force_update_metadata = None;
    b.full_attention_interval = Some(2);
    assert!(outcome(&call).starts_with("musa.G-13"));
}

#[test]
fn resolved_parameters_of_a_decode_call() {
    let v = verdict(&decode());
    let r = v.resolved().expect("accepted");
    assert_eq!(
        (r.batch_size, r.seqlen_q, r.total_q, r.seqlen_k),
        (4, 1, 4, 256)
    );
    assert_eq!(
        (r.num_heads, r.num_heads_k, r.head_size, r.head_size_v),
        (8, 2, 128, 128)
    );
    assert!(r.paged && r.varlen_q && r.page_size == 16);
    // Causal with one query row: wl = 255, wr = 0.
    assert_eq!(
        (r.is_causal, r.is_local, r.window_left, r.window_right),
        (true, false, 255, 0)
    );
    // 1 row x 4 heads per KV head = 4 <= 256: pack-GQA, tile_m 32 (4 <= 32), tile_n 64.
    assert_eq!((r.pack_gqa, r.tile_m, r.tile_n), (true, 32, 64));
    assert_eq!(r.num_splits, 1);
    // mate defaults to `q.shape[-1] ** -0.5` (Python: 0.08838834764831845), not 1/sqrt(d).
    assert_eq!(r.softmax_scale, 0.08838834764831845);
    assert_eq!(r.lse_layout, LseLayout::HeadTotal);
    // Sinks force one split even with metadata.
    let mut call = decode();
    call.set("scheduler_metadata", int32(&[16]))
        .set("num_splits", PyValue::Int(8))
        .set("sinks", bf16(&[8]));
    assert_eq!(verdict(&call).resolved().unwrap().num_splits, 1);
    call.unset("sinks");
    assert_eq!(verdict(&call).resolved().unwrap().num_splits, 8);
}

#[test]
fn mla_shaped_calls_take_the_mla_branch() {
    let mut call = KvCacheCall::default();
    call.set("q", bf16(&[2, 1, 16, 64]))
        .set("qv", bf16(&[2, 1, 16, 512]))
        .set("k_cache", bf16(&[8, 64, 1, 64]))
        .set("v_cache", bf16(&[8, 64, 1, 512]))
        .set("page_table", int32(&[2, 4]))
        .set("cache_seqlens", int32(&[2]));
    // Without metadata mate has no workspace.
    assert_eq!(
        outcome(&call),
        "musa.MLA-4: RuntimeError: Check failed: (workspace.has_value()) is false: workspace must be provided"
    );
    call.set(
        "scheduler_metadata",
        PyValue::Tuple(vec![
            PyValue::tensor(Dtype::Uint8, &[1 << 27]),
            PyValue::Bool(false),
        ]),
    );
    let v = verdict(&call);
    let r = v.resolved().expect("accepted");
    assert!(r.mla_decode);
    assert_eq!(r.lse_layout, LseLayout::BatchSeqHead);
    // Python: 576 ** -0.5
    assert_eq!(r.softmax_scale, 0.041666666666666664);
    // qv with another last dim is fmha's qv, which mate rejects.
    call.set("qv", bf16(&[2, 1, 16, 256]));
    assert_eq!(
        outcome(&call),
        "musa.F-1: AssertionError: qv parameter is not supported yet"
    );
}

/// Values of every kind, including the extremes Python ints and torch shapes allow.
fn odd_values() -> Vec<PyValue> {
    vec![
        PyValue::None,
        PyValue::Bool(true),
        PyValue::Int(-1),
        PyValue::Int(i64::MAX),
        PyValue::Int(i64::MIN),
        PyValue::Float(f64::NAN),
        PyValue::Str("3".into()),
        PyValue::List(vec![]),
        PyValue::Tuple(vec![PyValue::None, PyValue::Str("x".into())]),
        PyValue::Object("dict".into()),
        int32(&[]),
        bf16(&[0]),
        bf16(&[usize::MAX / 2, 2]),
        PyValue::tensor(Dtype::Int64, &[3, 5]),
    ]
}

#[test]
fn odd_arguments_never_panic_and_fill_every_template() {
    let bases = [decode(), fixed(), {
        let mut c = decode();
        c.context = backend(0);
        c
    }];
    for base in &bases {
        for (param, _) in fa3conform::call::signature::SGLANG_MUSA.params {
            let name = param.name();
            for value in odd_values() {
                let mut call = base.clone();
                call.set(name, value);
                let v = verdict(&call);
                if let Some(r) = v.rejection() {
                    assert!(!r.message.contains("{}"), "{name}: {r}");
                }
                for h in &v.hazards {
                    assert!(!h.message.contains("{}"), "{name}: {}", h.message);
                }
            }
        }
    }
}
