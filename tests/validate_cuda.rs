//! The CUDA profiles (`fa3`, `fa3-stable`, `sgl-kernel`) against the catalogue and hand-checked
//! messages. Expected sites and messages are read off the upstream sources (see the registry's
//! citations), never computed by the code under test.

use fa3conform::call::{KvCacheCall, PyValue};
use fa3conform::spec::parse_specs;
use fa3conform::validate::profiles::{fa3, sgl_kernel};
use fa3conform::validate::registry;
use fa3conform::validate::{Exception, Outcome, Profile, Verdict};
use std::collections::{BTreeMap, BTreeSet};

const PROFILES: [&dyn Profile; 3] = [&fa3::FA3, &fa3::FA3_STABLE, &sgl_kernel::SGL_KERNEL];

/// One catalogue call with the verdicts its `expect` annotation names: profile name to site id
/// or `accepted`, read off the upstream sources when the entry was written.
struct Entry {
    call: KvCacheCall,
    expect: BTreeMap<String, String>,
}

/// The `Declaration:` line of torch's schema errors: the operators' schemas as torch 2.15 printed
/// them (run on operators registered with the same Python signature and C++ schema text; the
/// custom op's inferred ints are `SymInt`).
macro_rules! fa3_declaration {
    () => {
        "flash_attn_3::_flash_attn_forward(Tensor q, Tensor k, Tensor v, Tensor? k_new=None, Tensor? v_new=None, Tensor? qv=None, Tensor? out_=None, Tensor? cu_seqlens_q=None, Tensor? cu_seqlens_k=None, Tensor? cu_seqlens_k_new=None, Tensor? seqused_q=None, Tensor? seqused_k=None, SymInt? max_seqlen_q=None, SymInt? max_seqlen_k=None, Tensor? page_table=None, Tensor? kv_batch_idx=None, Tensor? leftpad_k=None, Tensor? rotary_cos=None, Tensor? rotary_sin=None, Tensor? seqlens_rotary=None, Tensor? q_descale=None, Tensor? k_descale=None, Tensor? v_descale=None, float? softmax_scale=None, bool causal=False, SymInt window_size_left=-1, SymInt window_size_right=-1, SymInt attention_chunk=0, float softcap=0., bool rotary_interleaved=True, Tensor? scheduler_metadata=None, SymInt num_splits=1, bool? pack_gqa=None, SymInt sm_margin=0) -> (Tensor, Tensor, Tensor, Tensor)"
    };
}

macro_rules! sgl_declaration {
    () => {
        "sgl_kernel::fwd(Tensor q, Tensor k, Tensor v, Tensor? k_new, Tensor? v_new, Tensor? q_v, Tensor? out, Tensor? cu_seqlens_q, Tensor? cu_seqlens_k, Tensor? cu_seqlens_k_new, Tensor? seqused_q, Tensor? seqused_k, int? max_seqlen_q, int? max_seqlen_k, Tensor? page_table, Tensor? kv_batch_idx, Tensor? leftpad_k, Tensor? rotary_cos, Tensor? rotary_sin, Tensor? seqlens_rotary, Tensor? q_descale, Tensor? k_descale, Tensor? v_descale, float? softmax_scale, bool is_causal, int window_size_left, int window_size_right, int attention_chunk, float softcap, bool is_rotary_interleaved, Tensor? scheduler_metadata, int num_splits, bool? pack_gqa, int sm_margin, Tensor? sinks) -> (Tensor, Tensor, Tensor, Tensor)"
    };
}

fn catalogue() -> BTreeMap<(String, String), Entry> {
    let mut entries = BTreeMap::new();
    for dir_entry in std::fs::read_dir("tests/catalog").expect("tests/catalog exists") {
        let path = dir_entry.expect("readable directory").path();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        if !name.starts_with("cuda-") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable catalogue file");
        let calls = parse_specs(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let raw: Vec<serde_json::Value> = serde_json::from_str(&text).expect("a JSON array");
        for (call, raw) in calls.into_iter().zip(raw) {
            let expect = raw["expect"]
                .as_object()
                .unwrap_or_else(|| panic!("{name}/{}: no expect annotation", call.id))
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().expect("a site id").to_string()))
                .collect();
            entries.insert((name.clone(), call.id.clone()), Entry { call, expect });
        }
    }
    entries
}

fn site_of(verdict: &Verdict) -> &'static str {
    match &verdict.outcome {
        Outcome::Accepted(_) => "accepted",
        Outcome::Rejected(r) => r.site,
    }
}

fn call(file: &str, id: &str) -> KvCacheCall {
    catalogue()
        .remove(&(file.to_string(), id.to_string()))
        .unwrap_or_else(|| panic!("{file}/{id} is not in the catalogue"))
        .call
}

fn rejection(profile: &dyn Profile, call: &KvCacheCall) -> (Exception, String) {
    let verdict = profile.validate(call);
    let r = verdict
        .rejection()
        .unwrap_or_else(|| panic!("{} accepted {}", profile.name(), call.id));
    (r.exception, r.message.clone())
}

#[test]
fn every_catalogue_entry_reaches_its_expected_site() {
    let mut failures = Vec::new();
    for ((file, id), entry) in catalogue() {
        for profile in PROFILES {
            let want = &entry.expect[profile.name()];
            let verdict = profile.validate(&entry.call);
            let got = site_of(&verdict);
            if got != want {
                failures.push(format!(
                    "{file}/{id} on {}: expected {want}, got {got} ({:?})",
                    profile.name(),
                    verdict.rejection().map(|r| r.to_string())
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_site_of_every_cuda_profile_is_reached_by_the_catalogue() {
    let calls = catalogue();
    for profile in PROFILES {
        let reached: BTreeSet<&str> = calls
            .values()
            .filter_map(|e| profile.validate(&e.call).rejection().map(|r| r.site))
            .collect();
        let missing: Vec<&str> = profile
            .sites()
            .iter()
            .copied()
            .filter(|s| !reached.contains(s))
            .collect();
        assert!(
            missing.is_empty(),
            "{}: unreached sites {missing:?}",
            profile.name()
        );
    }
}

#[test]
fn every_profile_site_is_registered_with_citation_and_explanation() {
    for profile in PROFILES {
        for &id in profile.sites() {
            let site = registry::site(id);
            assert!(
                !site.citation.is_empty() && !site.explain.is_empty(),
                "{id}"
            );
            assert!(!site.condition.is_empty(), "{id}");
        }
    }
    let ids: Vec<&str> = registry::sites().map(|s| s.id).collect();
    let unique: BTreeSet<&str> = ids.iter().copied().collect();
    assert_eq!(ids.len(), unique.len(), "site ids are unique");
}

#[test]
fn exact_messages_of_the_legacy_front_end() {
    let cases = [
        (
            "cuda-mha-fwd",
            "q-float32",
            "FlashAttention only supports fp16, bf16, and fp8_e4m3 data type",
        ),
        (
            "cuda-mha-fwd",
            "q-3d-not-varlen",
            "q must have shape (batch_size, seqlen_q, num_heads, head_size)",
        ),
        (
            "cuda-mha-fwd",
            "rotary-sin-float16",
            "rotary_cos must have the same dtype as query",
        ),
        (
            "cuda-mha-fwd",
            "head-dim-100",
            "head_size should be a multiple of 8",
        ),
        (
            "cuda-mha-fwd",
            "fp8-head-dim-72",
            "head_size should be a multiple of 16",
        ),
        (
            "cuda-mha-fwd",
            "k-without-seqlens",
            "If k_new is supplied, seqlens_k must also be passed in",
        ),
        (
            "cuda-mha-fwd",
            "q-1d",
            "Dimension out of range (expected to be in range of [-1, 0], but got -2)",
        ),
        (
            "cuda-mha-fwd",
            "num-splits-2-pow-32",
            "Expected params.num_splits >= 1 to be true, but got false.  (Could this error message be improved?  If so, please report an enhancement request to PyTorch.)",
        ),
        (
            "cuda-mha-fwd",
            "qv-v-head-64",
            "q_v is only supported for hdim_v >= 256.",
        ),
        (
            "cuda-valid",
            "fp8-descale-bf16-stable",
            "expected scalar type Float but found BFloat16",
        ),
        (
            "cuda-valid",
            "int-cache-seqlens-varlen",
            "seqused_k must have shape (batch_size)",
        ),
        (
            "cuda-python",
            "k-cache-strided",
            "k_cache must have contiguous last dimension",
        ),
        (
            "cuda-python",
            "k-cache-none-passed",
            "'NoneType' object has no attribute 'stride'",
        ),
        (
            "cuda-python",
            "window-float",
            concat!(
                "flash_attn_3::_flash_attn_forward() Expected a value of type 'int' for argument 'window_size_left' but instead found type 'float'.\nPosition: 25\nValue: 1.5\nDeclaration: ",
                fa3_declaration!(),
                "\nCast error details: {*}"
            ),
        ),
        (
            "cuda-python",
            "batch-idx-list",
            concat!(
                "flash_attn_3::_flash_attn_forward() Expected a value of type 'Optional[Tensor]' for argument 'kv_batch_idx' but instead found type 'list'.\nPosition: 15\nValue: [0, 1]\nDeclaration: ",
                fa3_declaration!(),
                "\nCast error details: {*}"
            ),
        ),
        (
            "cuda-python",
            "unexpected-keyword-ver",
            "flash_attn_with_kvcache() got an unexpected keyword argument 'ver'",
        ),
        (
            "cuda-python",
            "too-many-positional",
            "flash_attn_with_kvcache() takes from 3 to 30 positional arguments but 31 were given",
        ),
        (
            "cuda-python",
            "window-short-tensor",
            "index 1 is out of bounds for dimension 0 with size 1",
        ),
        (
            "cuda-python",
            "zero-head-dim",
            "0.0 cannot be raised to a negative power",
        ),
    ];
    for (file, id, message) in cases {
        assert_eq!(
            rejection(&fa3::FA3, &call(file, id)).1,
            message,
            "{file}/{id}"
        );
    }
    let (exception, message) = rejection(&fa3::FA3, &call("cuda-python", "all-on-cpu"));
    assert_eq!(exception, Exception::NotImplementedError);
    assert!(message.starts_with(
        "Could not run 'flash_attn_3::_flash_attn_forward' with arguments from the 'CPU' backend. This could be because"
    ));
}

#[test]
fn exact_messages_of_the_stable_front_end() {
    let file = "<build>/hopper/flash_api_stable.cpp";
    let cases = [
        (
            "q-float32",
            format!(
                "mha_fwd, {file}:784, FlashAttention only supports fp16, bf16, and fp8_e4m3 data type"
            ),
        ),
        (
            "q-3d-not-varlen",
            format!("mha_fwd, {file}:876, q must have 4 dimensions, got 3"),
        ),
        (
            "k-head-64",
            format!("mha_fwd, {file}:883, k dimension 3 must have size 128, got 64"),
        ),
        (
            "sched-meta-size-10",
            format!(
                "mha_fwd, {file}:1075, scheduler_metadata dimension 0 must have size 13, got 10"
            ),
        ),
        (
            "causal-sched-meta-size",
            format!(
                "mha_fwd, {file}:1075, scheduler_metadata dimension 0 must have size 17, got 13"
            ),
        ),
        (
            "cu-seqlens-q-2d",
            format!("mha_fwd, {file}:879, cu_seqlens_q must have 1 dimensions, got 2"),
        ),
        (
            "seqlens-int64",
            format!("mha_fwd, {file}:904, seqused_k must have dtype int32"),
        ),
        ("num-splits-2-pow-32", format!("run_mha_fwd, {file}:436, ")),
        (
            "rotary-sin-float16",
            format!("mha_fwd, {file}:1137, rotary_cos must have the same dtype as query"),
        ),
        // ATen's IndexError carries no STD_TORCH_CHECK prefix.
        (
            "q-1d",
            "Dimension out of range (expected to be in range of [-1, 0], but got -2)".to_string(),
        ),
    ];
    for (id, message) in cases {
        let (exception, got) = rejection(&fa3::FA3_STABLE, &call("cuda-mha-fwd", id));
        assert_eq!(got, message, "{id}");
        assert!(matches!(
            exception,
            Exception::RuntimeError | Exception::IndexError
        ));
    }
}

#[test]
fn exact_messages_of_sgl_kernel() {
    let sgl = &sgl_kernel::SGL_KERNEL;
    let cases = [
        (
            "cuda-mha-fwd",
            "sinks-per-kv-head",
            "sinks must have shape (num_heads)",
        ),
        (
            "cuda-mha-fwd",
            "sinks-float32",
            "sinks must have dtype bfloat16",
        ),
        (
            "cuda-python",
            "window-float",
            concat!(
                "sgl_kernel::fwd() Expected a value of type 'int' for argument 'window_size_left' but instead found type 'float'.\nPosition: 25\nValue: 1.5\nDeclaration: ",
                sgl_declaration!(),
                "\nCast error details: {*}"
            ),
        ),
        (
            "cuda-python",
            "batch-idx-list",
            "'list' object has no attribute 'stride'",
        ),
        (
            "cuda-python",
            "chunk-string",
            "invalid literal for int() with base 10: 'abc'",
        ),
        (
            "cuda-python",
            "too-many-positional-sgl",
            "flash_attn_with_kvcache() takes from 3 to 34 positional arguments but 35 were given",
        ),
        (
            "cuda-sgl-fa4",
            "fa4-append-kv",
            "FA4 does not support updating KV cache in-place.",
        ),
        (
            "cuda-sgl-fa4",
            "fa4-int-seqlens",
            "'int' object has no attribute 'shape'",
        ),
        (
            "cuda-sgl-fa4",
            "fa4-head-dim-100",
            "head_dim must be divisible by 8",
        ),
        (
            "cuda-sgl-fa4",
            "fa4-q-1d",
            "not enough values to unpack (expected 2, got 1)",
        ),
        (
            "cuda-sgl-fa4",
            "fa4-paged",
            "paged KV not supported on SM 9.0",
        ),
    ];
    for (file, id, message) in cases {
        assert_eq!(rejection(sgl, &call(file, id)).1, message, "{file}/{id}");
    }
    // Bare asserts: AssertionError with an empty message.
    let (exception, message) = rejection(sgl, &call("cuda-sgl-fa4", "fa4-cache-batch-3"));
    assert_eq!(
        (exception, message.as_str()),
        (Exception::AssertionError, "")
    );
}

fn hazards(profile: &dyn Profile, call: &KvCacheCall) -> Vec<&'static str> {
    profile
        .validate(call)
        .hazards
        .iter()
        .map(|h| h.code)
        .collect()
}

#[test]
fn ver_handling_of_sgl_kernel() {
    let sgl = &sgl_kernel::SGL_KERNEL;
    // Any ver other than 4 (by Python equality) runs FA3 silently; ver=3 raises no hazard.
    for (id, hazard) in [
        ("ver-3", None),
        (
            "ver-2",
            Some("ver=2 is not 4: sgl-kernel 0.3.21 silently runs FA3"),
        ),
        (
            "ver-none",
            Some("ver=None is not 4: sgl-kernel 0.3.21 silently runs FA3"),
        ),
        (
            "ver-string-4",
            Some("ver='4' is not 4: sgl-kernel 0.3.21 silently runs FA3"),
        ),
    ] {
        let verdict = sgl.validate(&call("cuda-valid", id));
        assert!(verdict.resolved().is_some(), "{id}");
        let messages: Vec<&str> = verdict.hazards.iter().map(|h| h.message.as_str()).collect();
        assert_eq!(messages.first().copied(), hazard, "{id}");
    }
    // ver=4 and ver=4.0 take the FA4 path: its asserts, no FA3 tile resolution.
    for id in ["fa4-float-ver", "fa4-window-float"] {
        let verdict = sgl.validate(&call("cuda-sgl-fa4", id));
        assert_eq!(verdict.resolved().map(|r| r.tile_m), Some(0), "{id}");
    }
    let fa3_path = sgl.validate(&call("cuda-valid", "ver-2"));
    assert_eq!(fa3_path.resolved().map(|r| r.tile_m), Some(128));
    assert_eq!(
        hazards(sgl, &call("cuda-valid", "ver-4-fa4-qv-dropped")),
        ["H-SGL-FA4-QV-DROPPED"]
    );
}

#[test]
fn int_cache_seqlens_is_expanded_from_different_tensors() {
    // Upstream sizes it from q.shape[0] (total_q = 5 for varlen q): rejected, with a hazard.
    let varlen = call("cuda-valid", "int-cache-seqlens-varlen");
    assert_eq!(site_of(&fa3::FA3.validate(&varlen)), "fa3.B-20d");
    assert_eq!(hazards(&fa3::FA3, &varlen), ["H-CUDA-INT-SEQLENS-EXPANDED"]);
    assert_eq!(
        fa3::FA3.validate(&varlen).hazards[0].message,
        "int cache_seqlens=5 expanded to 5 entries taken from q.shape[0]"
    );
    // sgl-kernel 0.3.21 sizes it from k_cache.shape[0] (2 = batch): accepted.
    assert!(
        sgl_kernel::SGL_KERNEL
            .validate(&varlen)
            .resolved()
            .is_some()
    );
    assert!(hazards(&sgl_kernel::SGL_KERNEL, &varlen).is_empty());
    // A 0-d q with an explicit scale: upstream fails reading q.shape[0], sgl-kernel at
    // maybe_contiguous(q).
    let q0 = call("cuda-python", "q-0d-with-scale");
    assert_eq!(rejection(&fa3::FA3, &q0).1, "tuple index out of range");
    assert_eq!(
        rejection(&sgl_kernel::SGL_KERNEL, &q0).1,
        "Dimension specified as -1 but tensor has no dimensions"
    );
}

#[test]
fn none_passed_differs_from_not_passed() {
    // k_cache=None passed: the wrapper runs and fails on None.stride; omitted: a binding TypeError.
    assert_eq!(
        rejection(&fa3::FA3, &call("cuda-python", "k-cache-none-passed")).0,
        Exception::AttributeError
    );
    assert_eq!(
        rejection(&fa3::FA3, &call("cuda-python", "k-cache-none")).1,
        "flash_attn_with_kvcache() missing 1 required positional argument: 'k_cache'"
    );
    // attention_chunk=None: sgl-kernel maps it to 0, upstream's custom op rejects None for an int.
    let chunk = call("cuda-python", "chunk-none");
    assert!(sgl_kernel::SGL_KERNEL.validate(&chunk).resolved().is_some());
    assert_eq!(
        rejection(&fa3::FA3, &chunk).1,
        concat!(
            "flash_attn_3::_flash_attn_forward() Expected a value of type 'int' for argument 'attention_chunk' but instead found type 'NoneType'.\nPosition: 27\nValue: None\nDeclaration: ",
            fa3_declaration!(),
            "\nCast error details: {*}"
        )
    );
}

#[test]
fn check_order_with_several_failures() {
    let mut c = call("cuda-valid", "decode-gqa");
    // seqused_k: dtype is checked before the device.
    c.set("cache_seqlens", tensor("int64", &[2], Some("cpu")));
    assert_eq!(
        rejection(&fa3::FA3, &c).1,
        "seqused_k must have dtype int32"
    );
    // cu_seqlens_q: device before dtype.
    let mut v = call("cuda-valid", "varlen-q");
    v.set("cu_seqlens_q", tensor("int64", &[3], Some("cpu")));
    assert_eq!(rejection(&fa3::FA3, &v).1, "cu_seqlens_q must be on CUDA");
    // dtype of q before the devices and before every shape.
    let mut q = call("cuda-mha-fwd", "q-3d-not-varlen");
    q.set("q", tensor("float32", &[2, 8, 128], Some("cpu")));
    assert_eq!(
        rejection(&fa3::FA3, &q).1,
        "FlashAttention only supports fp16, bf16, and fp8_e4m3 data type"
    );
    // The Python stride assert of k_cache precedes everything in C++.
    let mut k = call("cuda-python", "k-cache-strided");
    k.set("q", tensor("float32", &[2, 1, 8, 128], None));
    assert_eq!(rejection(&fa3::FA3, &k).0, Exception::AssertionError);
    // Binding errors precede everything: unexpected keywords before the positional count.
    let mut b = call("cuda-python", "too-many-positional");
    b.set("ver", PyValue::Int(2));
    assert_eq!(
        rejection(&fa3::FA3, &b).1,
        "flash_attn_with_kvcache() got an unexpected keyword argument 'ver'"
    );
    // FA4's asserts run in source order: append-KV before descales.
    let mut f = call("cuda-sgl-fa4", "fa4-descale");
    f.set("k", tensor("bfloat16", &[2, 1, 2, 128], None));
    assert_eq!(
        rejection(&sgl_kernel::SGL_KERNEL, &f).1,
        "FA4 does not support updating KV cache in-place."
    );
}

#[test]
fn strides_and_contiguity_follow_each_wrapper() {
    // Upstream's custom op makes a strided 1-D cache_seqlens contiguous; sgl-kernel passes it on.
    let strided = call("cuda-valid", "strided-cache-seqlens");
    assert!(fa3::FA3.validate(&strided).resolved().is_some());
    assert_eq!(
        rejection(&sgl_kernel::SGL_KERNEL, &strided).1,
        "seqused_k must be contiguous"
    );
    // A 2-D view with a unit last stride is not fixed by maybe_contiguous.
    assert_eq!(
        rejection(&fa3::FA3, &call("cuda-mha-fwd", "rotary-cos-column-slice")).1,
        "rotary_cos must be contiguous"
    );
    // qv is never made contiguous.
    assert_eq!(
        rejection(&fa3::FA3, &call("cuda-mha-fwd", "qv-last-stride-2")).1,
        "q_v tensor must have contiguous last dimension"
    );
}

#[test]
fn accepted_calls_resolve_as_mha_fwd_does() {
    // Decode, GQA 8/2, head 128, bf16, 64 keys, varlen (cache_seqlens): seqlen_q = 1 drops the
    // window; tiles (128, 176); splits: total_m = 1 * 2 * ceil(4/128) = 2 < 0.8 * 132, n_blocks =
    // ceil(64/176) = 1 <= 4, so 1; pack_gqa: varlen q? no; nopack 1/128 < 0.9 * 4/128, so true.
    let r = fa3::FA3
        .validate(&call("cuda-valid", "decode-gqa"))
        .resolved()
        .cloned()
        .expect("accepted");
    assert_eq!((r.tile_m, r.tile_n, r.num_splits), (128, 176, 1));
    assert!(r.pack_gqa && !r.is_causal && !r.is_local);
    assert_eq!((r.window_left, r.window_right), (63, 0));
    assert_eq!(r.softmax_scale, 128f64.powf(-0.5));
    // Prefill 16 causal: window (63, 0), tiles (128, 128).
    let c = fa3::FA3
        .validate(&call("cuda-valid", "prefill-causal"))
        .resolved()
        .cloned()
        .expect("accepted");
    assert!(c.is_causal);
    assert_eq!(
        (c.tile_m, c.tile_n, c.window_left, c.window_right),
        (128, 128, 63, 0)
    );
    // causal + attention_chunk 16 is local with both sides capped at 15.
    let l = fa3::FA3
        .validate(&call("cuda-valid", "chunked-causal"))
        .resolved()
        .cloned()
        .expect("accepted");
    assert!(l.is_local && !l.is_causal);
    assert_eq!(
        (l.window_left, l.window_right, l.attention_chunk),
        (15, 0, 16)
    );
}

fn tensor(dtype: &str, shape: &[usize], device: Option<&str>) -> PyValue {
    let mut t = fa3conform::call::TensorArg::new(
        fa3conform::call::Dtype::from_torch_name(dtype).unwrap(),
        shape,
    );
    t.device = device.and_then(fa3conform::call::Device::from_name);
    PyValue::Tensor(t)
}

#[test]
fn every_cuda_hazard_is_raised_by_the_catalogue() {
    let raised: BTreeSet<&str> = catalogue()
        .values()
        .flat_map(|e| PROFILES.iter().flat_map(|p| p.validate(&e.call).hazards))
        .map(|h| h.code)
        .collect();
    let missing: Vec<&str> = registry::cuda::hazards()
        .map(|h| h.code)
        .filter(|c| !raised.contains(c))
        .collect();
    assert!(
        missing.is_empty(),
        "hazards no catalogue call raises: {missing:?}"
    );
}

#[test]
fn hazards_of_accepted_calls() {
    let sgl = &sgl_kernel::SGL_KERNEL;
    assert_eq!(
        hazards(sgl, &call("cuda-valid", "fa4-default-splits-lse")),
        [
            "H-SGL-FA4-ARG-DROPPED",
            "H-SGL-FA4-SPLITS-UNMODELLED",
            "H-SGL-FA4-RETURNS-2-TUPLE"
        ]
    );
    assert_eq!(
        hazards(sgl, &call("cuda-valid", "score-mod-fa3-path")),
        ["H-SGL-ARG-DROPPED", "H-SGL-ARG-DROPPED"]
    );
    for (id, code) in [
        ("negative-softcap", "H-CUDA-SOFTCAP-NEGATIVE"),
        ("zero-kv-heads", "H-CUDA-HEADS-K-ZERO"),
        (
            "cu-seqlens-k-new-without-k",
            "H-CUDA-CU-SEQLENS-K-NEW-WITHOUT-K",
        ),
        ("v-without-k", "H-CUDA-V-WITHOUT-K"),
        ("rotary-sin-without-cos", "H-CUDA-ROTARY-IGNORED"),
        ("descale-ignored-bf16", "H-CUDA-DESCALE-IGNORED"),
        (
            "scheduler-metadata-ignored",
            "H-CUDA-SCHEDULER-METADATA-IGNORED",
        ),
        ("empty-kv", "H-CUDA-EMPTY-KV"),
        ("return-lse", "H-CUDA-RETURNS-4-TUPLE"),
    ] {
        assert_eq!(hazards(&fa3::FA3, &call("cuda-valid", id)), [code], "{id}");
    }
}
