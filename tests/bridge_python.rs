//! The Python side of the device bridge: its unit tests, the pytest plugin's tests (pytester runs
//! of a fake test suite, certifying with this build's binary), and recorded calls read back by the
//! spec parser (what `fa3conform certify calls.jsonl` reads).

mod bridge_support;

use bridge_support::python_command;
use fa3conform::call::{Device, Dtype, PyValue};
use fa3conform::spec::parse_specs;

#[test]
fn python_unit_tests_pass() {
    let output = python_command()
        .args(["-m", "unittest", "discover", "-s", "tests/python", "-v"])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{log}");
    assert!(
        log.contains("Ran 32 tests"),
        "a Python test went missing:\n{log}"
    );
}

#[test]
fn pytest_plugin_tests_pass() {
    let output = python_command()
        .args([
            "-m",
            "pytest",
            "tests/python/pytest_plugin",
            "-p",
            "no:cacheprovider",
            "-q",
        ])
        .env("FA3CONFORM_BINARY", env!("CARGO_BIN_EXE_fa3conform"))
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{log}");
    assert!(
        log.contains("7 passed"),
        "a plugin test went missing:\n{log}"
    );
}

#[test]
fn recorded_calls_parse_as_call_specs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("calls.jsonl");
    let status = python_command()
        .arg("tests/python/record_fakes.py")
        .arg(&path)
        .status()
        .unwrap();
    assert!(status.success());
    let calls = parse_specs(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(calls.len(), 2, "one line per distinct signature");
    let decode = &calls[0];
    assert!(
        decode.id.starts_with("pid") && decode.id.ends_with("-1"),
        "{}",
        decode.id
    );
    let k_cache = decode.positional[1].as_tensor().unwrap();
    assert_eq!(k_cache.dtype, Dtype::Bfloat16);
    assert_eq!(k_cache.stride.as_deref(), Some(&[131072, 2048, 128, 1][..]));
    assert!(!k_cache.is_contiguous());
    assert_eq!(
        k_cache.device, None,
        "accelerator devices are left to the profile"
    );
    let leftpad = decode.passed("cache_leftpad").unwrap().as_tensor().unwrap();
    assert_eq!(leftpad.device, Some(Device::Cpu));
    let seqlens = decode.passed("cache_seqlens").unwrap().as_tensor().unwrap();
    assert_eq!(seqlens.int_values(), Some(vec![5, 9]));
    assert_eq!(
        decode.passed("softmax_scale"),
        Some(&PyValue::Float(f64::INFINITY))
    );
    assert_eq!(
        decode.passed("window_size"),
        Some(&PyValue::Tuple(vec![PyValue::Int(-1), PyValue::Int(0)]))
    );
    assert_eq!(decode.passed("score_mod").unwrap().type_name(), "function");
    assert!(matches!(decode.passed("pack_gqa"), Some(PyValue::List(_))));
    let varlen = &calls[1];
    assert_eq!(varlen.positional.len(), 4);
    assert_eq!(
        varlen.positional[3],
        PyValue::None,
        "k passed positionally as None"
    );
    let big = varlen.passed("cache_seqlens").unwrap().as_tensor().unwrap();
    assert_eq!((big.shape.as_slice(), &big.values), (&[70000][..], &None));
    assert_eq!(varlen.passed("max_seqlen_q"), Some(&PyValue::Int(3)));
}
