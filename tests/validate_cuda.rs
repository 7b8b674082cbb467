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

/// `(catalogue file, entry id, fa3, fa3-stable, sgl-kernel)`: the site each profile must reject
/// the entry with, or `ok` for acceptance.
const EXPECTED: &[(&str, &str, &str, &str, &str)] = &[
    ("cuda-valid", "decode-gqa", "ok", "ok", "ok"),
    ("cuda-valid", "prefill-causal", "ok", "ok", "ok"),
    ("cuda-valid", "paged-decode", "ok", "ok", "ok"),
    ("cuda-valid", "varlen-q", "ok", "ok", "ok"),
    ("cuda-valid", "append-kv", "ok", "ok", "ok"),
    ("cuda-valid", "append-kv-varlen", "ok", "ok", "ok"),
    ("cuda-valid", "rotary-append", "ok", "ok", "ok"),
    ("cuda-valid", "fp8-descales", "ok", "ok", "ok"),
    ("cuda-valid", "local-window", "ok", "ok", "ok"),
    ("cuda-valid", "local-window-list", "ok", "ok", "ok"),
    ("cuda-valid", "chunked-causal", "ok", "ok", "ok"),
    ("cuda-valid", "mla-qv", "ok", "ok", "ok"),
    ("cuda-valid", "softcap-splits", "ok", "ok", "ok"),
    ("cuda-valid", "no-cache-seqlens", "ok", "ok", "ok"),
    ("cuda-valid", "batch-idx", "ok", "ok", "ok"),
    ("cuda-valid", "leftpad", "ok", "ok", "ok"),
    ("cuda-valid", "scheduler-metadata", "ok", "ok", "ok"),
    ("cuda-valid", "scheduler-metadata-ignored", "ok", "ok", "ok"),
    ("cuda-valid", "int-cache-seqlens", "ok", "ok", "ok"),
    (
        "cuda-valid",
        "int-cache-seqlens-varlen",
        "fa3.B-20d",
        "fa3.B-20d",
        "ok",
    ),
    (
        "cuda-valid",
        "strided-cache-seqlens",
        "ok",
        "ok",
        "fa3.B-20c",
    ),
    (
        "cuda-valid",
        "sinks",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "ok",
    ),
    (
        "cuda-valid",
        "ver-3",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "ok",
    ),
    (
        "cuda-valid",
        "ver-2",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "ok",
    ),
    (
        "cuda-valid",
        "ver-none",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "ok",
    ),
    (
        "cuda-valid",
        "ver-string-4",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "ok",
    ),
    (
        "cuda-valid",
        "ver-4-fa4",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "ok",
    ),
    (
        "cuda-valid",
        "ver-4-fa4-qv-dropped",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "ok",
    ),
    ("cuda-valid", "return-lse", "ok", "ok", "ok"),
    ("cuda-valid", "empty-kv", "ok", "ok", "ok"),
    ("cuda-valid", "descale-ignored-bf16", "ok", "ok", "ok"),
    ("cuda-valid", "v-without-k", "ok", "ok", "ok"),
    ("cuda-valid", "rotary-sin-without-cos", "ok", "ok", "ok"),
    ("cuda-valid", "window-tensor", "ok", "ok", "ok"),
    (
        "cuda-valid",
        "fp8-descale-bf16-stable",
        "aten.scalar-type",
        "ok",
        "aten.scalar-type",
    ),
    (
        "cuda-python",
        "k-cache-strided",
        "fa3.A-1",
        "fa3.A-1",
        "sgl.B3-1",
    ),
    (
        "cuda-python",
        "v-cache-strided",
        "fa3.A-2",
        "fa3.A-2",
        "sgl.B3-2",
    ),
    (
        "cuda-python",
        "k-cache-none",
        "py.binding-missing",
        "py.binding-missing",
        "py.binding-missing",
    ),
    (
        "cuda-python",
        "k-cache-none-passed",
        "py.no-attribute",
        "py.no-attribute",
        "py.no-attribute",
    ),
    (
        "cuda-python",
        "k-cache-0d",
        "aten.dim-no-dims",
        "aten.dim-no-dims",
        "aten.dim-no-dims",
    ),
    (
        "cuda-python",
        "q-0d",
        "py.tuple-index",
        "py.tuple-index",
        "py.tuple-index",
    ),
    (
        "cuda-python",
        "q-0d-with-scale",
        "py.tuple-index",
        "py.tuple-index",
        "aten.dim-no-dims",
    ),
    (
        "cuda-python",
        "zero-head-dim",
        "py.zero-power",
        "py.zero-power",
        "py.zero-power",
    ),
    (
        "cuda-python",
        "int-seqlens-overflow",
        "aten.full-overflow",
        "aten.full-overflow",
        "aten.full-overflow",
    ),
    (
        "cuda-python",
        "window-none",
        "py.not-subscriptable",
        "py.not-subscriptable",
        "py.not-subscriptable",
    ),
    (
        "cuda-python",
        "window-short-tuple",
        "py.tuple-index",
        "py.tuple-index",
        "py.tuple-index",
    ),
    (
        "cuda-python",
        "window-short-list",
        "py.list-index",
        "py.list-index",
        "py.list-index",
    ),
    (
        "cuda-python",
        "window-short-str",
        "py.str-index",
        "py.str-index",
        "py.str-index",
    ),
    (
        "cuda-python",
        "window-short-tensor",
        "aten.tensor-index",
        "aten.tensor-index",
        "aten.tensor-index",
    ),
    (
        "cuda-python",
        "window-float",
        "torch.op-arg-type",
        "torch.op-arg-type",
        "torch.op-arg-type",
    ),
    (
        "cuda-python",
        "batch-idx-list",
        "torch.op-arg-type",
        "torch.op-arg-type",
        "py.no-attribute",
    ),
    (
        "cuda-python",
        "all-on-cpu",
        "torch.no-kernel",
        "torch.no-kernel",
        "torch.no-kernel",
    ),
    (
        "cuda-python",
        "chunk-string",
        "torch.op-arg-type",
        "torch.op-arg-type",
        "py.int-literal",
    ),
    (
        "cuda-python",
        "chunk-string-digits",
        "torch.op-arg-type",
        "torch.op-arg-type",
        "ok",
    ),
    (
        "cuda-python",
        "chunk-nan",
        "torch.op-arg-type",
        "torch.op-arg-type",
        "py.int-nan",
    ),
    (
        "cuda-python",
        "chunk-inf",
        "torch.op-arg-type",
        "torch.op-arg-type",
        "py.int-inf",
    ),
    (
        "cuda-python",
        "chunk-list",
        "torch.op-arg-type",
        "torch.op-arg-type",
        "py.int-type",
    ),
    (
        "cuda-python",
        "chunk-tensor-2",
        "torch.op-arg-type",
        "torch.op-arg-type",
        "aten.tensor-to-scalar",
    ),
    (
        "cuda-python",
        "chunk-none",
        "torch.op-arg-type",
        "torch.op-arg-type",
        "ok",
    ),
    (
        "cuda-python",
        "unexpected-keyword-ver",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "ok",
    ),
    (
        "cuda-python",
        "out-keyword",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
    ),
    (
        "cuda-python",
        "multiple-values-q",
        "py.binding-multiple-values",
        "py.binding-multiple-values",
        "py.binding-multiple-values",
    ),
    (
        "cuda-python",
        "missing-v-cache",
        "py.binding-missing",
        "py.binding-missing",
        "py.binding-missing",
    ),
    (
        "cuda-python",
        "too-many-positional",
        "py.binding-too-many",
        "py.binding-too-many",
        "ok",
    ),
    (
        "cuda-python",
        "too-many-positional-sgl",
        "py.binding-too-many",
        "py.binding-too-many",
        "py.binding-too-many",
    ),
    ("cuda-mha-fwd", "q-float32", "fa3.B-2", "fa3.B-2", "fa3.B-2"),
    ("cuda-mha-fwd", "k-float16", "fa3.B-4", "fa3.B-4", "fa3.B-4"),
    ("cuda-mha-fwd", "v-float16", "fa3.B-5", "fa3.B-5", "fa3.B-5"),
    ("cuda-mha-fwd", "q-cpu", "fa3.B-6", "fa3.B-6", "fa3.B-6"),
    ("cuda-mha-fwd", "k-cpu", "fa3.B-7", "fa3.B-7", "fa3.B-7"),
    ("cuda-mha-fwd", "v-cpu", "fa3.B-8", "fa3.B-8", "fa3.B-8"),
    (
        "cuda-mha-fwd",
        "page-table-cpu",
        "fa3.B-10a",
        "fa3.B-10a",
        "fa3.B-10a",
    ),
    (
        "cuda-mha-fwd",
        "page-table-int64",
        "fa3.B-10b",
        "fa3.B-10b",
        "fa3.B-10b",
    ),
    (
        "cuda-mha-fwd",
        "cu-seqlens-q-cpu",
        "fa3.B-11a",
        "fa3.B-11a",
        "fa3.B-11a",
    ),
    (
        "cuda-mha-fwd",
        "cu-seqlens-q-2d-strided",
        "fa3.B-11b",
        "fa3.B-11b",
        "fa3.B-11b",
    ),
    (
        "cuda-mha-fwd",
        "cu-seqlens-q-int64",
        "fa3.B-11c",
        "fa3.B-11c",
        "fa3.B-11c",
    ),
    (
        "cuda-mha-fwd",
        "cu-seqlens-q-no-max",
        "fa3.B-11d",
        "fa3.B-11d",
        "fa3.B-11d",
    ),
    (
        "cuda-mha-fwd",
        "q-1d",
        "aten.dim-range",
        "aten.dim-range",
        "aten.dim-range",
    ),
    (
        "cuda-mha-fwd",
        "cache-batch-mismatch",
        "fa3.B-13",
        "fa3.B-13",
        "fa3.B-13",
    ),
    (
        "cuda-mha-fwd",
        "head-dim-320",
        "fa3.B-14",
        "fa3.B-14",
        "fa3.B-14",
    ),
    (
        "cuda-mha-fwd",
        "heads-6-over-4",
        "fa3.B-15",
        "fa3.B-15",
        "fa3.B-15",
    ),
    (
        "cuda-mha-fwd",
        "v-head-96",
        "fa3.B-16a",
        "fa3.B-16a",
        "fa3.B-16a",
    ),
    (
        "cuda-mha-fwd",
        "fp8-v-head-512",
        "fa3.B-16c",
        "fa3.B-16c",
        "fa3.B-16c",
    ),
    (
        "cuda-mha-fwd",
        "q-3d-not-varlen",
        "fa3.B-17a",
        "fa3.B-17a",
        "fa3.B-17a",
    ),
    (
        "cuda-mha-fwd",
        "q-4d-varlen",
        "fa3.B-17b",
        "fa3.B-17b",
        "fa3.B-17b",
    ),
    (
        "cuda-mha-fwd",
        "cu-seqlens-q-2d",
        "fa3.B-17c",
        "fa3.B-17c",
        "fa3.B-17c",
    ),
    (
        "cuda-mha-fwd",
        "k-head-64",
        "fa3.B-18a",
        "fa3.B-18a",
        "fa3.B-18a",
    ),
    (
        "cuda-mha-fwd",
        "v-seqlen-32",
        "fa3.B-18b",
        "fa3.B-18b",
        "fa3.B-18b",
    ),
    (
        "cuda-mha-fwd",
        "paged-k-head-64",
        "fa3.B-18c",
        "fa3.B-18c",
        "fa3.B-18c",
    ),
    (
        "cuda-mha-fwd",
        "paged-v-pages-6",
        "fa3.B-18d",
        "fa3.B-18d",
        "fa3.B-18d",
    ),
    (
        "cuda-mha-fwd",
        "page-table-3d",
        "fa3.B-18e",
        "fa3.B-18e",
        "fa3.B-18e",
    ),
    (
        "cuda-mha-fwd",
        "page-table-1d",
        "aten.dim-range",
        "aten.dim-range",
        "aten.dim-range",
    ),
    (
        "cuda-mha-fwd",
        "seqlens-int64",
        "fa3.B-20a",
        "fa3.B-20a",
        "fa3.B-20a",
    ),
    (
        "cuda-mha-fwd",
        "seqlens-cpu",
        "fa3.B-20b",
        "fa3.B-20b",
        "fa3.B-20b",
    ),
    (
        "cuda-mha-fwd",
        "seqlens-2d-strided",
        "fa3.B-20c",
        "fa3.B-20c",
        "fa3.B-20c",
    ),
    (
        "cuda-mha-fwd",
        "seqlens-len-3",
        "fa3.B-20d",
        "fa3.B-20d",
        "fa3.B-20d",
    ),
    (
        "cuda-mha-fwd",
        "leftpad-int64",
        "fa3.B-21a",
        "fa3.B-21a",
        "fa3.B-21a",
    ),
    (
        "cuda-mha-fwd",
        "leftpad-cpu",
        "fa3.B-21b",
        "fa3.B-21b",
        "fa3.B-21b",
    ),
    (
        "cuda-mha-fwd",
        "leftpad-2d-strided",
        "fa3.B-21c",
        "fa3.B-21c",
        "fa3.B-21c",
    ),
    (
        "cuda-mha-fwd",
        "leftpad-len-3",
        "fa3.B-21d",
        "fa3.B-21d",
        "fa3.B-21d",
    ),
    (
        "cuda-mha-fwd",
        "head-dim-100",
        "fa3.B-23",
        "fa3.B-23",
        "fa3.B-23",
    ),
    (
        "cuda-mha-fwd",
        "fp8-head-dim-72",
        "fa3.B-23",
        "fa3.B-23",
        "fa3.B-23",
    ),
    (
        "cuda-mha-fwd",
        "v-head-100",
        "fa3.B-24",
        "fa3.B-24",
        "fa3.B-24",
    ),
    (
        "cuda-mha-fwd",
        "k-without-v",
        "fa3.B-27a",
        "fa3.B-27a",
        "fa3.B-27a",
    ),
    (
        "cuda-mha-fwd",
        "k-without-seqlens",
        "fa3.B-27b",
        "fa3.B-27b",
        "fa3.B-27b",
    ),
    (
        "cuda-mha-fwd",
        "k-prefill-longer-than-cache",
        "fa3.B-27c",
        "fa3.B-27c",
        "fa3.B-27c",
    ),
    (
        "cuda-mha-fwd",
        "cu-k-new-cpu",
        "fa3.B-27d1",
        "fa3.B-27d1",
        "fa3.B-27d1",
    ),
    (
        "cuda-mha-fwd",
        "cu-k-new-2d-strided",
        "fa3.B-27d2",
        "fa3.B-27d2",
        "fa3.B-27d2",
    ),
    (
        "cuda-mha-fwd",
        "cu-k-new-int64",
        "fa3.B-27d3",
        "fa3.B-27d3",
        "fa3.B-27d3",
    ),
    (
        "cuda-mha-fwd",
        "k-new-float16",
        "fa3.B-27e",
        "fa3.B-27e",
        "fa3.B-27e",
    ),
    (
        "cuda-mha-fwd",
        "v-new-float16",
        "fa3.B-27f",
        "fa3.B-27f",
        "fa3.B-27f",
    ),
    (
        "cuda-mha-fwd",
        "k-new-cpu",
        "fa3.B-27g1",
        "fa3.B-27g1",
        "fa3.B-27g1",
    ),
    (
        "cuda-mha-fwd",
        "v-new-cpu",
        "fa3.B-27g2",
        "fa3.B-27g2",
        "fa3.B-27g2",
    ),
    (
        "cuda-mha-fwd",
        "k-new-1d",
        "aten.dim-range",
        "aten.dim-range",
        "aten.dim-range",
    ),
    (
        "cuda-mha-fwd",
        "k-new-heads-4",
        "fa3.B-27i1",
        "fa3.B-27i1",
        "fa3.B-27i1",
    ),
    (
        "cuda-mha-fwd",
        "v-new-seqlen-2",
        "fa3.B-27i2",
        "fa3.B-27i2",
        "fa3.B-27i2",
    ),
    (
        "cuda-mha-fwd",
        "k-new-4d-varlen",
        "fa3.B-27i3",
        "fa3.B-27i3",
        "fa3.B-27i3",
    ),
    (
        "cuda-mha-fwd",
        "v-new-2-rows-varlen",
        "fa3.B-27i4",
        "fa3.B-27i4",
        "fa3.B-27i4",
    ),
    (
        "cuda-mha-fwd",
        "cu-k-new-len-4",
        "fa3.B-27i5",
        "fa3.B-27i5",
        "fa3.B-27i5",
    ),
    (
        "cuda-mha-fwd",
        "sched-meta-cpu",
        "fa3.B-28a",
        "fa3.B-28a",
        "fa3.B-28a",
    ),
    (
        "cuda-mha-fwd",
        "sched-meta-size-10",
        "fa3.B-28b",
        "fa3.B-28b",
        "fa3.B-28b",
    ),
    (
        "cuda-mha-fwd",
        "sched-meta-strided",
        "fa3.B-28c",
        "fa3.B-28c",
        "fa3.B-28c",
    ),
    (
        "cuda-mha-fwd",
        "sched-meta-int64",
        "fa3.B-28d",
        "fa3.B-28d",
        "fa3.B-28d",
    ),
    (
        "cuda-mha-fwd",
        "causal-sched-meta-size",
        "fa3.B-28b",
        "fa3.B-28b",
        "fa3.B-28b",
    ),
    (
        "cuda-mha-fwd",
        "qv-head-128",
        "fa3.B-29a",
        "fa3.B-29a",
        "fa3.B-29a",
    ),
    (
        "cuda-mha-fwd",
        "qv-v-head-64",
        "fa3.B-29b",
        "fa3.B-29b",
        "fa3.B-29b",
    ),
    (
        "cuda-mha-fwd",
        "qv-fp8",
        "fa3.B-29c",
        "fa3.B-29c",
        "fa3.B-29c",
    ),
    (
        "cuda-mha-fwd",
        "qv-float16",
        "fa3.B-29e",
        "fa3.B-29e",
        "fa3.B-29e",
    ),
    (
        "cuda-mha-fwd",
        "qv-cpu",
        "fa3.B-29f",
        "fa3.B-29f",
        "fa3.B-29f",
    ),
    (
        "cuda-mha-fwd",
        "qv-0d",
        "aten.dim-no-dims",
        "aten.dim-no-dims",
        "aten.dim-no-dims",
    ),
    (
        "cuda-mha-fwd",
        "qv-last-stride-2",
        "fa3.B-29g",
        "fa3.B-29g",
        "fa3.B-29g",
    ),
    (
        "cuda-mha-fwd",
        "qv-head-256",
        "fa3.B-29h1",
        "fa3.B-29h1",
        "fa3.B-29h1",
    ),
    (
        "cuda-mha-fwd",
        "qv-4d-varlen",
        "fa3.B-29h2",
        "fa3.B-29h2",
        "fa3.B-29h2",
    ),
    (
        "cuda-mha-fwd",
        "rotary-without-k",
        "fa3.B-30a",
        "fa3.B-30a",
        "fa3.B-30a",
    ),
    (
        "cuda-mha-fwd",
        "rotary-cos-cpu",
        "fa3.B-30b1",
        "fa3.B-30b1",
        "fa3.B-30b1",
    ),
    (
        "cuda-mha-fwd",
        "rotary-cos-column-slice",
        "fa3.B-30b2",
        "fa3.B-30b2",
        "fa3.B-30b2",
    ),
    (
        "cuda-mha-fwd",
        "rotary-cos-1d",
        "aten.dim-range",
        "aten.dim-range",
        "aten.dim-range",
    ),
    (
        "cuda-mha-fwd",
        "rotary-dim-160",
        "fa3.B-30c",
        "fa3.B-30c",
        "fa3.B-30c",
    ),
    (
        "cuda-mha-fwd",
        "rotary-dim-40",
        "fa3.B-30d",
        "fa3.B-30d",
        "fa3.B-30d",
    ),
    (
        "cuda-mha-fwd",
        "paged-rotary-short",
        "fa3.B-30e",
        "fa3.B-30e",
        "fa3.B-30e",
    ),
    (
        "cuda-mha-fwd",
        "rotary-cos-3d",
        "fa3.B-30f",
        "fa3.B-30f",
        "fa3.B-30f",
    ),
    (
        "cuda-mha-fwd",
        "rotary-cos-float16",
        "fa3.B-30g",
        "fa3.B-30g",
        "fa3.B-30g",
    ),
    (
        "cuda-mha-fwd",
        "rotary-without-sin",
        "fa3.B-30h",
        "fa3.B-30h",
        "fa3.B-30h",
    ),
    (
        "cuda-mha-fwd",
        "rotary-sin-cpu",
        "fa3.B-30i1",
        "fa3.B-30i1",
        "fa3.B-30i1",
    ),
    (
        "cuda-mha-fwd",
        "rotary-sin-column-slice",
        "fa3.B-30i2",
        "fa3.B-30i2",
        "fa3.B-30i2",
    ),
    (
        "cuda-mha-fwd",
        "rotary-sin-shorter",
        "fa3.B-30j",
        "fa3.B-30j",
        "fa3.B-30j",
    ),
    (
        "cuda-mha-fwd",
        "rotary-sin-float16",
        "fa3.B-30k",
        "fa3.B-30k",
        "fa3.B-30k",
    ),
    (
        "cuda-mha-fwd",
        "rotary-seqlens-cpu",
        "fa3.B-30l1",
        "fa3.B-30l1",
        "fa3.B-30l1",
    ),
    (
        "cuda-mha-fwd",
        "rotary-seqlens-2d-strided",
        "fa3.B-30l2",
        "fa3.B-30l2",
        "fa3.B-30l2",
    ),
    (
        "cuda-mha-fwd",
        "rotary-seqlens-int64",
        "fa3.B-30l3",
        "fa3.B-30l3",
        "fa3.B-30l3",
    ),
    (
        "cuda-mha-fwd",
        "rotary-seqlens-len-3",
        "fa3.B-30l4",
        "fa3.B-30l4",
        "fa3.B-30l4",
    ),
    (
        "cuda-mha-fwd",
        "batch-idx-cpu",
        "fa3.B-31a",
        "fa3.B-31a",
        "fa3.B-31a",
    ),
    (
        "cuda-mha-fwd",
        "batch-idx-2d-strided",
        "fa3.B-31b",
        "fa3.B-31b",
        "fa3.B-31b",
    ),
    (
        "cuda-mha-fwd",
        "batch-idx-int64",
        "fa3.B-31c",
        "fa3.B-31c",
        "fa3.B-31c",
    ),
    (
        "cuda-mha-fwd",
        "num-splits-300",
        "fa3.B-32",
        "fa3.B-32",
        "fa3.B-32",
    ),
    (
        "cuda-mha-fwd",
        "q-descale-cpu",
        "fa3.B-33a",
        "fa3.B-33a",
        "fa3.B-33a",
    ),
    (
        "cuda-mha-fwd",
        "q-descale-scalar",
        "fa3.B-33b",
        "fa3.B-33b",
        "fa3.B-33b",
    ),
    (
        "cuda-mha-fwd",
        "k-descale-cpu",
        "fa3.B-33c",
        "fa3.B-33c",
        "fa3.B-33c",
    ),
    (
        "cuda-mha-fwd",
        "k-descale-scalar",
        "fa3.B-33d",
        "fa3.B-33d",
        "fa3.B-33d",
    ),
    (
        "cuda-mha-fwd",
        "v-descale-cpu",
        "fa3.B-33e",
        "fa3.B-33e",
        "fa3.B-33e",
    ),
    (
        "cuda-mha-fwd",
        "v-descale-scalar",
        "fa3.B-33f",
        "fa3.B-33f",
        "fa3.B-33f",
    ),
    (
        "cuda-mha-fwd",
        "num-splits-2-pow-32",
        "fa3.B-35",
        "fa3.B-35",
        "fa3.B-35",
    ),
    (
        "cuda-mha-fwd",
        "sinks-float32",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.E3-29a",
    ),
    (
        "cuda-mha-fwd",
        "sinks-cpu",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.E3-29b",
    ),
    (
        "cuda-mha-fwd",
        "sinks-per-kv-head",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.E3-29c",
    ),
    (
        "cuda-mha-fwd",
        "sinks-strided",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.E3-29d",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-append-kv",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.FA4-2",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-rotary",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.FA4-3",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-leftpad",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.FA4-4",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-descale",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.FA4-5",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-page-table-int64",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.FA4I-1",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-page-table-strided",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.FA4I-2",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-page-table-rows-3",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.FA4I-3",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-cache-batch-3",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.FA4I-4",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-v-seqlen-32",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.FA4I-5",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-paged-k-head-64",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.FA4I-6",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-paged-v-pages-6",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.FA4I-7",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-cu-seqlens-2d",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.FA4I-8",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-seqlens-len-3",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.FA4I-9",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-int-seqlens",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "py.no-attribute",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-fp8",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.FA4I-10",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-k-float16",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.FA4I-11",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-seqlens-int64",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.FA4I-12",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-seqlens-strided",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.FA4I-13",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-sinks-per-kv-head",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.FA4I-14",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-sinks-float32",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.FA4I-15",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-seqlens-cpu",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.FA4I-16",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-heads-6-over-4",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.FA4I-17",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-zero-kv-heads",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "py.modulo-zero",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-head-dim-320",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.FA4I-18",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-head-dim-100",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.FA4I-19",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-v-head-100",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.FA4I-20",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-softcap-score-mod",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.FA4I-21",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-paged",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.FA4I-22",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-splits-2",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "sgl.FA4I-23",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-q-1d",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "py.unpack",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-window-float",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "ok",
    ),
    (
        "cuda-sgl-fa4",
        "fa4-float-ver",
        "py.binding-unexpected-keyword",
        "py.binding-unexpected-keyword",
        "ok",
    ),
];

fn catalogue() -> BTreeMap<(String, String), KvCacheCall> {
    let mut calls = BTreeMap::new();
    for entry in std::fs::read_dir("tests/catalog").expect("tests/catalog exists") {
        let path = entry.expect("readable directory").path();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        if !name.starts_with("cuda-") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable catalogue file");
        for call in parse_specs(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display())) {
            calls.insert((name.clone(), call.id.clone()), call);
        }
    }
    calls
}

fn site_of(verdict: &Verdict) -> &'static str {
    match &verdict.outcome {
        Outcome::Accepted(_) => "ok",
        Outcome::Rejected(r) => r.site,
    }
}

fn call(file: &str, id: &str) -> KvCacheCall {
    catalogue()
        .remove(&(file.to_string(), id.to_string()))
        .unwrap_or_else(|| panic!("{file}/{id} is not in the catalogue"))
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
    let calls = catalogue();
    let mut failures = Vec::new();
    for &(file, id, fa3, stable, sgl) in EXPECTED {
        let call = calls
            .get(&(file.to_string(), id.to_string()))
            .unwrap_or_else(|| panic!("{file}/{id} missing from the catalogue"));
        for (profile, want) in PROFILES.iter().zip([fa3, stable, sgl]) {
            let verdict = profile.validate(call);
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
    assert_eq!(
        EXPECTED.len(),
        calls.len(),
        "every catalogue entry has an expectation"
    );
}

#[test]
fn every_site_of_every_cuda_profile_is_reached_by_the_catalogue() {
    let calls = catalogue();
    for profile in PROFILES {
        let reached: BTreeSet<&str> = calls
            .values()
            .filter_map(|c| profile.validate(c).rejection().map(|r| r.site))
            .collect();
        let missing: Vec<&str> = profile
            .sites()
            .into_iter()
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
        for id in profile.sites() {
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
            "flash_attn_3::_flash_attn_forward() Expected a value of type 'int' for argument 'window_size_left' but instead found type 'float'.",
        ),
        (
            "cuda-python",
            "batch-idx-list",
            "flash_attn_3::_flash_attn_forward() Expected a value of type 'Optional[Tensor]' for argument 'kv_batch_idx' but instead found type 'list'.",
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
            "sgl_kernel::fwd() Expected a value of type 'int' for argument 'window_size_left' but instead found type 'float'.",
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
        "flash_attn_3::_flash_attn_forward() Expected a value of type 'int' for argument 'attention_chunk' but instead found type 'NoneType'."
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
