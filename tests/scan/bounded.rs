//! Issue #16: `scan` is linear in its input in time and memory, its output is bounded per file, and
//! CR-only files (valid Python) parse. The memory tests run the binary under an address-space limit
//! (`ulimit -v`) with two threads and two malloc arenas, so that the limit measures the scan rather
//! than per-thread reservations; before the fix each of these inputs took gigabytes.

use fa3conform::scan::{Rule, Selection, scan_paths};
use fa3conform::tensor::DEFAULT_MEMORY_CAP;
use std::path::Path;
use std::process::Command;

/// Address space for the scans below: the binary, two threads, two arenas, and the input's parse.
const LIMIT_MB: usize = 1024;

/// `fa3conform scan ARGS` under [`LIMIT_MB`]: the exit code (`None` when a signal ended it, as an
/// allocation failure's abort does) and stdout.
fn scan_limited(path: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let output = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v {}; exec \"$0\" scan \"$@\"",
            LIMIT_MB * 1024
        ))
        .arg(env!("CARGO_BIN_EXE_fa3conform"))
        .arg(path)
        .args(extra)
        .env("RAYON_NUM_THREADS", "2")
        .env("MALLOC_ARENA_MAX", "2")
        .output()
        .expect("sh runs");
    (
        output.status.code(),
        String::from_utf8(output.stdout).expect("UTF-8 output"),
    )
}

/// A memory budget that admits the 14-16 MB files below (`scan` holds 512 bytes a token while it
/// parses): they must then run within [`LIMIT_MB`].
const LARGE_FILE_BUDGET: &str = "4294967296";

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

const IMPORT: &str = "from sgl_kernel.flash_attn import flash_attn_with_kvcache\n";

#[test]
fn deeply_nested_calls_are_refused_as_cpython_refuses_them() {
    // 10^5 nested calls (3.1 MB) aborted with an allocation failure; 10^4 with `ver=2` wrote
    // 6.9 GB. CPython rejects both (200 nested brackets at most): so does the scan, quickly.
    let dir = tempfile::tempdir().unwrap();
    for (n, call) in [
        (100_000, "flash_attn_with_kvcache("),
        (
            10_000,
            "flash_attn_with_kvcache(q, k, v, ver=2, scheduler_metadata=",
        ),
    ] {
        let source = format!("{IMPORT}{}None{}\n", call.repeat(n), ")".repeat(n));
        let path = write(dir.path(), &format!("nested{n}.py"), &source);
        let (code, out) = scan_limited(&path, &[]);
        assert_eq!(code, Some(1), "{n}: {out}");
        assert!(
            out.contains("FA3M900 SyntaxError: too many nested parentheses"),
            "{out}"
        );
        assert!(out.len() < 4096, "{n}: {} bytes of output", out.len());
    }
}

#[test]
fn many_calls_on_one_line_give_bounded_output_without_copying_the_line() {
    // 200,000 calls on one 14 MB line aborted: every call site copied the whole line.
    let dir = tempfile::tempdir().unwrap();
    let calls = 200_000;
    let call = "flash_attn_with_kvcache(query_states, key_cache, value_cache, ver=2); ";
    let source = format!("{IMPORT}{}\n", call.repeat(calls));
    assert!(source.len() > 14_000_000);
    let path = write(dir.path(), "one_line.py", &source);
    let (code, out) = scan_limited(&path, &["--memory-cap", LARGE_FILE_BUDGET]);
    assert_eq!(code, Some(1), "{}", &out[out.len().saturating_sub(2000)..]);
    assert!(out.len() < 400_000, "{} bytes of output", out.len());
    assert!(
        out.contains(&format!(
            "FA3M022 {} more diagnostics in this file were not reported",
            calls - 200
        )),
        "{}",
        &out[out.len().saturating_sub(2000)..]
    );
    assert!(out.contains(&format!("{calls} call sites in 1 file")));
    // Every excerpt is a window of the line, not the line.
    assert!(out.lines().all(|l| l.chars().count() < 400));
}

#[test]
fn a_large_ordinary_file_is_scanned_in_bounded_memory() {
    // A 50 MB file took 7.5 GB; 16 MB of model code with a call every 40 lines stays well under
    // the limit.
    let dir = tempfile::tempdir().unwrap();
    let mut source = String::from(IMPORT);
    let mut i: usize = 0;
    while source.len() < 16_000_000 {
        source.push_str(&format!(
            "\n\ndef layer_{i}(self, x, q, k_cache, v_cache, md):\n    \
             \"\"\"Layer {i}: projections and attention.\"\"\"\n    \
             y = torch.matmul(x, self.w_{i}.t()) * (1.0 / {i}.5)\n    \
             if md is not None and md.get(\"k{i}\") is not None:\n        \
             y = y + md[\"k{i}\"][..., :{i}]\n"
        ));
        if i % 8 == 0 {
            source.push_str(
                "    return flash_attn_with_kvcache(q, k_cache, v_cache, cu_seqlens_q=md.cu,\n        \
                 scheduler_metadata=md.sched, softcap=-1.0)\n",
            );
        }
        i += 1;
    }
    let path = write(dir.path(), "large.py", &source);
    let (code, out) = scan_limited(
        &path,
        &["--format", "json", "--memory-cap", LARGE_FILE_BUDGET],
    );
    assert_eq!(code, Some(0), "{}", &out[out.len().saturating_sub(2000)..]);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let calls = i.div_ceil(8);
    assert_eq!(report["summary"]["call_sites"], calls);
    assert_eq!(report["call_sites"].as_array().unwrap().len(), 1000);
    assert_eq!(report["summary"]["warnings"], 200);
    assert_eq!(report["summary"]["infos"], 1, "the truncation note");
}

#[test]
fn carriage_return_only_files_parse() {
    // Valid Python (universal newlines); reported as a syntax error before.
    let dir = tempfile::tempdir().unwrap();
    let source = format!(
        "{}def decode(q, k, v, cu, md):\r    return flash_attn_with_kvcache(q, k, v, \
         cu_seqlens_q=cu, scheduler_metadata=md, ver=2)\r",
        IMPORT.replace('\n', "\r")
    );
    let path = write(dir.path(), "classic_mac.py", &source);
    let result = scan_paths(&[path], &Selection::default(), DEFAULT_MEMORY_CAP).unwrap();
    let codes: Vec<Rule> = result.diagnostics.iter().map(|d| d.rule).collect();
    assert_eq!(codes, [Rule::VerNotThree]);
    assert_eq!(result.diagnostics[0].start.line, 3);
    assert_eq!(result.call_sites, 1);
}

#[test]
fn wrappers_that_call_themselves_or_fan_out_are_walked_in_bounded_time() {
    // The scan fuzz target's 30-minute campaign hung on a wrapper named like the entry point whose
    // body called itself a hundred times: every call walked 100^8 paths through it.
    let dir = tempfile::tempdir().unwrap();
    let recursive = format!(
        "from sgl_kernel.flash_attn import flash_attn_with_kvcache as _fa\n\n\
         def flash_attn_with_kvcache(*args, **kwargs):\n{}    return _fa(*args, **kwargs)\n\n\
         def decode(q, k, v, cu, md):\n    \
         return flash_attn_with_kvcache(q, k, v, cu_seqlens_q=cu, scheduler_metadata=md, ver=2)\n",
        "    flash_attn_with_kvcache(*args, **kwargs)\n".repeat(100)
    );
    // Four wrappers (named like the entry point, as the scan requires of wrappers), each calling
    // the next thirty times with distinct values of its own keyword: 30^4 paths, cut by the
    // walk's step budget.
    let wrapper = |level: usize| format!("flash_attn_with_kvcache_{level}");
    let mut fan_out = String::from(IMPORT);
    let keywords = ["softcap", "num_splits", "sm_margin", "attention_chunk"];
    for (level, keyword) in keywords.iter().enumerate() {
        fan_out += &format!("\ndef {}(q, k, v, **kw):\n", wrapper(level));
        for i in 0..30 {
            let next = wrapper(level + 1);
            fan_out += &format!("    {next}(q, k, v, {keyword}={i}, **kw)\n");
        }
    }
    fan_out += &format!(
        "\ndef {}(q, k, v, **kw):\n    return flash_attn_with_kvcache(q, k, v, **kw)\n\n\
         def decode(q, k, v):\n    return {}(q, k, v, ver=2)\n",
        wrapper(4),
        wrapper(0)
    );
    for (name, source) in [("recursive.py", recursive), ("fan_out.py", fan_out)] {
        let path = write(dir.path(), name, &source);
        let result = scan_paths(&[path], &Selection::default(), DEFAULT_MEMORY_CAP).unwrap();
        assert!(
            result
                .diagnostics
                .iter()
                .any(|d| d.rule == Rule::VerNotThree),
            "{name}: the ver=2 call is still found through the wrappers: {:?}",
            result.diagnostics
        );
    }
}
