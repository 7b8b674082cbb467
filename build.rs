//! Builds the C host kernels (kernels/) into one static library.
//!
//! The forward tile (kernels/src/forward.c) is compiled once per instruction-set variant: a
//! portable one for every target and, on x86-64, AVX2+FMA and AVX-512 ones that the Rust side
//! selects at run time after detecting the CPU's features. `FA3_HOST_CHECKED` (index checks that
//! abort) is defined wherever Rust's debug assertions are on (`cargo test`, debug builds) and in any
//! profile with feature `checked-kernel` (the fuzz targets); feature `regen-bindings` regenerates
//! the Rust bindings into OUT_DIR (the committed copy is src/kernel/bindings.rs).
//!
//! It also writes the list of the validation catalogue's files (tests/catalog/*.json), which
//! src/conform/catalogue.rs compiles into the binary.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

const HEADER: &str = "kernels/include/fa3_host.h";
const CATALOGUE: &str = "tests/catalog";

fn base_build(out_dir: &Path, name: &str) -> cc::Build {
    let mut build = cc::Build::new();
    build
        .include("kernels/include")
        .include("kernels/src")
        .std("c11")
        .opt_level(3)
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .out_dir(out_dir.join(name));
    // The C code checks its indices wherever the Rust code checks its own: the tests run the
    // kernel checked, and release builds (benches, the installed binary) do not pay for it.
    if env::var_os("CARGO_FEATURE_CHECKED_KERNEL").is_some()
        || env::var_os("CARGO_CFG_DEBUG_ASSERTIONS").is_some()
    {
        build.define("FA3_HOST_CHECKED", None);
    }
    // The fuzz targets that run the kernel check its memory accesses with AddressSanitizer while
    // the Rust code, which needs no such check, runs uninstrumented; the binary links the runtime.
    if env::var_os("CARGO_FEATURE_ASAN_KERNEL").is_some() {
        build
            .flag("-fsanitize=address")
            .flag("-fno-omit-frame-pointer");
    }
    build
}

fn main() {
    println!("cargo:rerun-if-changed=kernels");
    println!("cargo:rerun-if-changed={HEADER}");
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let x86_64 = env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("x86_64");

    // (name, flags): the portable variant relies on the compiler's vectorisation for the target
    // baseline (SSE2 on x86-64, NEON on aarch64).
    let mut variants: Vec<(&str, &[&str])> = vec![("portable", &[])];
    if x86_64 {
        variants.push(("avx2", &["-mavx2", "-mfma"]));
        variants.push(("avx512", &["-mavx512f", "-mavx512vl", "-mavx2", "-mfma"]));
    }
    let mut objects = Vec::new();
    for (name, flags) in variants {
        let mut build = base_build(&out_dir, name);
        build
            .file("kernels/src/forward.c")
            .define("FA3_VARIANT", name)
            // Products may fuse into FMA in the tile's matrix loops.
            .flag("-ffp-contract=fast");
        for flag in flags {
            build.flag(flag);
        }
        objects.extend(build.compile_intermediates());
    }
    base_build(&out_dir, "common")
        .files(["kernels/src/common.c", "kernels/src/dispatch.c"])
        // Rotary and conversions round every operation, identically on every target.
        .flag("-ffp-contract=off")
        .objects(objects)
        .compile("fa3_host");

    embed_catalogue(&out_dir);

    #[cfg(feature = "regen-bindings")]
    regen_bindings(&out_dir);
}

/// Writes OUT_DIR/catalogue.rs: every `tests/catalog/*.json` as `(file name, text)` in name order,
/// so that the binary carries the validation catalogue wherever it is installed.
fn embed_catalogue(out_dir: &Path) {
    println!("cargo:rerun-if-changed={CATALOGUE}");
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let dir = manifest_dir.join(CATALOGUE);
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a readable catalogue entry").path())
        .filter(|path| path.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let entries: String = files
        .iter()
        .map(|path| {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .expect("UTF-8 name");
            let path = path.to_str().expect("UTF-8 path");
            format!("    ({name:?}, include_str!({path:?})),\n")
        })
        .collect();
    fs::write(out_dir.join("catalogue.rs"), format!("&[\n{entries}]\n"))
        .expect("writing OUT_DIR/catalogue.rs");
}

/// Writes OUT_DIR/bindings.rs; scripts/regen-bindings.sh copies it over the committed file, or with
/// `--check` fails on any difference (CI's drift check).
#[cfg(feature = "regen-bindings")]
fn regen_bindings(out_dir: &std::path::Path) {
    let bindings = bindgen::Builder::default()
        .header(HEADER)
        .raw_line(
            "// Generated by bindgen 0.71.1 from kernels/include/fa3_host.h; do not edit.\n\
             // Regenerate with scripts/regen-bindings.sh (cargo build --features regen-bindings).",
        )
        .allowlist_function("fa3_.*")
        .allowlist_type("fa3_.*")
        .allowlist_var("FA3_.*")
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .use_core()
        .formatter(bindgen::Formatter::Prettyplease)
        .generate()
        .expect("bindgen could not generate bindings from kernels/include/fa3_host.h");
    bindings
        .write_to_file(out_dir.join("bindings.rs"))
        .expect("writing OUT_DIR/bindings.rs");
}
