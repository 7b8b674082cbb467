//! AddressSanitizer for the C kernel only. fa3conform's feature `asan-kernel` compiles the kernel
//! with `-fsanitize=address`, and the kernel's objects come with fa3conform's code into every
//! target. The targets that run the kernel (`KERNEL_TARGETS`) link the C compiler's ASan runtime,
//! statically and whole as `gcc -static-libasan` does (rustc links with `-nodefaultlibs`, so
//! `-fsanitize=address` alone adds nothing): it checks the kernel's accesses, on the buffers the
//! Rust side allocates too, since its allocator replaces malloc. The other targets link
//! `asan_absent.c`'s empty constructor entry points instead and keep glibc's allocator (ASan's cut
//! `validate`'s throughput by more than half). A build under cargo-fuzz's own sanitizer
//! (`-Zsanitizer=address`) has rustc's runtime in every target, and needs neither.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The fuzz targets that run the C kernel.
const KERNEL_TARGETS: [&str; 2] = ["differential", "metadata"];

/// The C compiler the `cc` crate uses for the kernel.
fn compiler() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".into())
}

/// The path of `file` among the C compiler's libraries.
fn compiler_file(file: &str) -> String {
    let output = Command::new(compiler())
        .arg(format!("-print-file-name={file}"))
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", compiler()));
    let path = String::from_utf8(output.stdout).expect("a UTF-8 path");
    let path = path.trim();
    assert!(
        Path::new(path).is_absolute(),
        "{} has no {file}: install its AddressSanitizer runtime (Debian: gcc's libasan)",
        compiler()
    );
    path.to_string()
}

/// Compiles `asan_absent.c` into OUT_DIR.
fn absent_runtime_object() -> PathBuf {
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let object = out.join("asan_absent.o");
    let status = Command::new(compiler())
        .args(["-c", "-O2", "-fPIC", "asan_absent.c", "-o"])
        .arg(&object)
        .status()
        .unwrap_or_else(|e| panic!("running {}: {e}", compiler()));
    assert!(status.success(), "compiling asan_absent.c failed");
    object
}

fn main() {
    println!("cargo:rerun-if-changed=asan_absent.c");
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    println!("cargo:rerun-if-env-changed=CC");
    let rustflags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    if rustflags.split('\x1f').any(|flag| flag.starts_with("-Zsanitizer")) {
        return;
    }
    let absent = absent_runtime_object();
    println!("cargo:rustc-link-arg-bins={}", absent.display());
    let runtime = compiler_file("libasan.a");
    let preinit = compiler_file("libasan_preinit.o");
    for target in KERNEL_TARGETS {
        for arg in [
            "-Wl,--whole-archive",
            &runtime,
            "-Wl,--no-whole-archive",
            &preinit,
        ] {
            println!("cargo:rustc-link-arg-bin={target}={arg}");
        }
    }
}
