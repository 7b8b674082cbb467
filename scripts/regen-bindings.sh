#!/bin/sh
# Regenerates src/kernel/bindings.rs from kernels/include/fa3_host.h with bindgen (needs libclang,
# e.g. Debian's libclang-dev). `cargo test --features regen-bindings --test bindings` checks that
# the committed file is current.
set -eu
cd "$(dirname "$0")/.."
cargo build --lib --features regen-bindings --message-format=json-render-diagnostics \
    | sed -n 's/.*"reason":"build-script-executed".*"package_id":"[^"]*fa3conform[^"]*".*"out_dir":"\([^"]*\)".*/\1/p' \
    | tail -n 1 > target/.fa3-bindings-out-dir
out_dir=$(cat target/.fa3-bindings-out-dir)
cp "$out_dir/bindings.rs" src/kernel/bindings.rs
echo "src/kernel/bindings.rs regenerated from $out_dir/bindings.rs"
