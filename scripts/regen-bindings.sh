#!/bin/sh
# Regenerates src/kernel/bindings.rs from kernels/include/fa3_host.h with bindgen (needs libclang,
# e.g. Debian's libclang-dev). With --check it changes nothing and fails, showing the difference,
# when the committed file is not what bindgen generates today (CI's drift check).
#
# `cargo check` is enough: the build script generates the bindings into OUT_DIR, and a check build
# compiles no code of the crate.
set -eu
cd "$(dirname "$0")/.."
mode=write
case "${1:-}" in
  --check) mode=check ;;
  "") ;;
  *) echo "usage: scripts/regen-bindings.sh [--check]" >&2; exit 2 ;;
esac
out_dir=$(cargo check --lib --features regen-bindings --message-format=json-render-diagnostics |
  sed -n 's/.*"reason":"build-script-executed".*"package_id":"[^"]*fa3conform[^"]*".*"out_dir":"\([^"]*\)".*/\1/p' |
  tail -n 1)
[ -f "$out_dir/bindings.rs" ] || { echo "regen-bindings: the build script wrote no bindings.rs" >&2; exit 1; }
if [ "$mode" = check ]; then
  if ! diff -u src/kernel/bindings.rs "$out_dir/bindings.rs"; then
    echo "src/kernel/bindings.rs differs from bindgen's output (above); run scripts/regen-bindings.sh" >&2
    exit 1
  fi
  echo "src/kernel/bindings.rs is what bindgen generates from kernels/include/fa3_host.h"
else
  cp "$out_dir/bindings.rs" src/kernel/bindings.rs
  echo "src/kernel/bindings.rs regenerated from $out_dir/bindings.rs"
fi
