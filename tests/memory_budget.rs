//! The memory budget's bounds hold: with a counting global allocator, every call of the examples
//! is run at the smallest `--memory-cap` that admits it (found by bisection), and the heap it then
//! takes at its peak (above what was live before) must be within that cap — for `run` (the f64
//! reference, with `--out`) and `certify --numerics` (tensors, both references, the kernel path).
//! What the bounds leave out on the Rust heap (allocations of fixed size) is allowed for as
//! [`SLACK`].

use fa3conform::certify::numerics::{self, Numerics};
use fa3conform::memory::Budget;
use fa3conform::musa::{InjectionCache, MusaOptions};
use fa3conform::reference::Stack;
use fa3conform::run::{RunOptions, run};
use fa3conform::spec::{call_to_json, parse_specs};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Heap bytes the bounds do not count: allocations that do not grow with the input (rayon's jobs,
/// vectors of a few entries). The kernel path's tile workspaces are the C code's, not counted here.
const SLACK: usize = 256 << 10;

/// The system allocator, counting the bytes live and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let live = LIVE.fetch_add(bytes, Ordering::SeqCst) + bytes;
    PEAK.fetch_max(live, Ordering::SeqCst);
}

// SAFETY: every call is forwarded to the system allocator unchanged; only counters are kept.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Old and new blocks both live while the contents move.
        grew(new_size);
        let moved = unsafe { System.realloc(ptr, layout, new_size) };
        LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
        moved
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// What `f` returns and the heap bytes it took at its peak above what was live when it started.
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = LIVE.load(Ordering::SeqCst);
    PEAK.store(before, Ordering::SeqCst);
    let value = f();
    (value, PEAK.load(Ordering::SeqCst) - before)
}

/// A cap within 0.5% above the smallest in `1..=high` at which `admitted(cap)` holds (it is
/// monotone in the cap).
fn smallest_cap(high: usize, admitted: impl Fn(usize) -> bool) -> usize {
    assert!(admitted(high), "not admitted even at {high} bytes");
    let (mut low, mut high) = (0, high);
    while high - low > high / 200 {
        let middle = low + (high - low) / 2;
        match admitted(middle) {
            true => high = middle,
            false => low = middle,
        }
    }
    high
}

/// Every call of the examples (the forward passes aside), one spec file each.
fn example_calls() -> Vec<String> {
    let mut specs = Vec::new();
    for entry in std::fs::read_dir("examples").unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("forward-") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for call in parse_specs(&text).unwrap() {
            specs.push(call_to_json(&call).to_string());
        }
    }
    specs.extend(MORE_CALLS.iter().map(|s| s.to_string()));
    specs
}

/// Beyond the examples: a varlen prefill appending rotated keys, a windowed decode with softcap
/// and pack-GQA over uneven lengths, a long decode that splits.
const MORE_CALLS: [&str; 3] = [
    r#"{"id": "varlen-append-rotary", "seed": 4, "args": {
        "q": {"tensor": {"shape": [40, 8, 64], "dtype": "float16"}},
        "k_cache": {"tensor": {"shape": [3, 512, 2, 64], "dtype": "float16"}},
        "v_cache": {"tensor": {"shape": [3, 512, 2, 64], "dtype": "float16"}},
        "k": {"tensor": {"shape": [3, 15, 2, 64], "dtype": "float16"}},
        "v": {"tensor": {"shape": [3, 15, 2, 64], "dtype": "float16"}},
        "cu_seqlens_q": {"tensor": {"shape": [4], "dtype": "int32", "values": [0, 10, 25, 40]}},
        "max_seqlen_q": 15,
        "cache_seqlens": {"tensor": {"shape": [3], "dtype": "int32", "values": [100, 200, 5]}},
        "rotary_cos": {"tensor": {"shape": [512, 32], "dtype": "float16"}},
        "rotary_sin": {"tensor": {"shape": [512, 32], "dtype": "float16"}},
        "rotary_interleaved": true, "causal": true, "return_softmax_lse": true}}"#,
    r#"{"id": "window-softcap", "seed": 5, "args": {
        "q": {"tensor": {"shape": [8, 1, 16, 128], "dtype": "bfloat16"}},
        "k_cache": {"tensor": {"shape": [8, 1024, 4, 128], "dtype": "bfloat16"}},
        "v_cache": {"tensor": {"shape": [8, 1024, 4, 128], "dtype": "bfloat16"}},
        "cache_seqlens": {"tensor": {"shape": [8], "dtype": "int32",
                                     "values": [1000, 17, 512, 1, 900, 300, 64, 1024]}},
        "window_size": [256, 0], "softcap": 30.0, "causal": true, "pack_gqa": true,
        "return_softmax_lse": true}}"#,
    r#"{"id": "long-decode", "seed": 6, "args": {
        "q": {"tensor": {"shape": [1, 1, 32, 128], "dtype": "bfloat16"}},
        "k_cache": {"tensor": {"shape": [1, 4096, 8, 128], "dtype": "bfloat16"}},
        "v_cache": {"tensor": {"shape": [1, 4096, 8, 128], "dtype": "bfloat16"}},
        "cache_seqlens": {"tensor": {"shape": [1], "dtype": "int32", "values": [4000]}},
        "num_splits": 0, "return_softmax_lse": true}}"#,
];

/// One test, so that no other test's allocations land in the counts.
#[test]
fn what_the_budget_admits_stays_within_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let spec_path = dir.path().join("call.json");
    let out_path = dir.path().join("out.safetensors");
    let mut measured = 0;
    for spec in example_calls() {
        std::fs::write(&spec_path, &spec).unwrap();
        let run_with = |cap: usize| {
            let _ = std::fs::remove_file(&out_path);
            run(&RunOptions {
                spec: spec_path.clone(),
                stack: Stack::Musa,
                memory_cap: cap,
                out: Some(out_path.clone()),
            })
        };
        // Calls the reference cannot evaluate (the stack rejects them) are refused at any cap.
        if run_with(1 << 30).is_ok() {
            let cap = smallest_cap(1 << 30, |cap| run_with(cap).is_ok());
            let (result, peak) = peak_of(|| run_with(cap));
            assert!(result.is_ok());
            assert!(
                peak <= cap + SLACK,
                "run: peak {peak} over the cap {cap}: {spec}"
            );
            eprintln!("run: cap {cap}, peak {peak}");
            measured += 1;
        }

        let call = &parse_specs(&spec).unwrap()[0];
        let check_with = |cap: usize| {
            let options = MusaOptions {
                memory: Budget::new(cap),
                ..MusaOptions::default()
            };
            numerics::check(call, &mut InjectionCache::default(), &options)
        };
        let refused =
            |n: &Numerics| matches!(n, Numerics::NotRun(why) if why.contains("memory cap"));
        if !matches!(check_with(1 << 30), Numerics::NotRun(_)) {
            let cap = smallest_cap(1 << 30, |cap| !refused(&check_with(cap)));
            let (numbers, peak) = peak_of(|| check_with(cap));
            assert!(!refused(&numbers));
            assert!(
                peak <= cap + SLACK,
                "certify --numerics: peak {peak} over the cap {cap}: {spec}"
            );
            eprintln!("certify --numerics: cap {cap}, peak {peak}");
            measured += 1;
        }
    }
    eprintln!("{measured} runs measured");
    assert!(measured >= 16, "{measured} runs measured");
}
