#!/usr/bin/env bash
# The shadow oracle in one command (tools/shadow/README.md):
#   tools/shadow/run.sh [--mate SRC] [--sglang SRC]
# builds the binaries, provisions target/shadow/ (venv with CPU torch, pinned upstream sources,
# the tvm-ffi signature stub), builds the input sets, runs every set through the real upstream
# Python (SGLang's wrapper, or mate's FA3 wrapper for the `mate-*` sets) and through `fa3conform
# certify` (profile musa, or mate), and compares them -> target/shadow/results/cmp/.
# SRC: a git dir or URL (fetch_upstream.py); only needed the first time.
# Environment: SHADOW_ENTRY=sglang|mate|all (whose sets run: SGLang's wrapper's, the default; mate's
#              `mate-*` sets; both), RANDOM_CASES=N (random set size, default 3000),
#              SHADOW_EXTRA=<JSONL of your own calls>, SHADOW_SETS="catalog mate-export ..." (these sets,
#              whatever SHADOW_ENTRY), TORCH_SITE=<site-packages with torch>, SHADOW_PROFILE=debug (the
#              debug binaries), SHADOW_BIN_DIR=<dir> (binaries built earlier, not rebuilt),
#              EXPORT_CASES=N (export set size, default 300).
set -euo pipefail
TOOL=$(cd "$(dirname "$0")" && pwd)
export FA3CONFORM_ROOT=${FA3CONFORM_ROOT:-$(cd "$TOOL/../.." && pwd)}
export SHADOW_WORK=${SHADOW_WORK:-$FA3CONFORM_ROOT/target/shadow}
WORK=$SHADOW_WORK
# SHADOW_PROFILE=debug uses the binaries `cargo test` builds (no second, release build of the crate)
export SHADOW_PROFILE=${SHADOW_PROFILE:-release}
# SHADOW_BIN_DIR=<dir> runs the fa3conform and fuzz-decode found there, unbuilt (a copy of an
# earlier build, for a before/after comparison while the tree changes)
export SHADOW_BIN_DIR=${SHADOW_BIN_DIR:-}
mkdir -p "$WORK"
start=$(date +%s)

# 1. the binaries certify and the input sets need. Built ones are copied into the work folder: a
# target directory shared with other checkouts (CARGO_TARGET_DIR) may get another tree's build of
# them while this run still needs them.
if [ -z "$SHADOW_BIN_DIR" ]; then
  profile_flag=$([ "$SHADOW_PROFILE" = release ] && echo --release || true)
  (cd "$FA3CONFORM_ROOT" && cargo build --quiet $profile_flag --features internal-testing --bin fa3conform --bin fuzz-decode)
  built=${CARGO_TARGET_DIR:-$FA3CONFORM_ROOT/target}/$SHADOW_PROFILE
  mkdir -p "$WORK/bin"
  cp "$built/fa3conform" "$built/fuzz-decode" "$WORK/bin/"
  export SHADOW_BIN_DIR=$WORK/bin
fi
FA3C=$SHADOW_BIN_DIR/fa3conform

# 2. a venv with CPU torch, tvm-ffi (its runtime and headers), jinja2 and packaging (what mate imports)
VENV=$WORK/venv
if ! "$VENV/bin/python" -c "import torch, numpy, tvm_ffi, packaging, jinja2" 2>/dev/null; then
  python3 -m venv "$VENV"
  if [ -n "${TORCH_SITE:-}" ]; then
    echo "$TORCH_SITE" > "$(ls -d "$VENV"/lib/python3*/site-packages)/zz_torch.pth"
  else
    "$VENV/bin/pip" install -q torch numpy
  fi
  "$VENV/bin/pip" install -q apache-tvm-ffi packaging jinja2
fi

# 3. the pinned upstream sources (once; see fetch_upstream.py for the sources it accepts)
python3 "$TOOL/fetch_upstream.py" --dest "$WORK/upstream" "$@" > /dev/null

# 4. the tvm-ffi signature stub (g++, once)
"$VENV/bin/python" "$TOOL/ffi_stub_build.py" > /dev/null

# 5. inputs
INPUTS=$WORK/inputs
"$VENV/bin/python" "$TOOL/prepare_inputs.py" --out "$INPUTS" --random "${RANDOM_CASES:-3000}" > /dev/null

# 6. both sides, per set: a `mate-*` set goes to mate's FA3 wrapper and the mate profile, every
# other set to SGLang's wrapper and the musa profile
RESULTS=$WORK/results
mkdir -p "$RESULTS"
sglang_sets="catalog extra export corpus random mutate"
mate_sets="mate-catalog mate-extra mate-export mate-corpus mate-random mate-mutate"
case ${SHADOW_ENTRY:-sglang} in
  sglang) default_sets=$sglang_sets ;;
  mate) default_sets=$mate_sets ;;
  all) default_sets="$sglang_sets $mate_sets" ;;
  *) echo "SHADOW_ENTRY must be sglang, mate or all" >&2; exit 2 ;;
esac
args=()
for s in ${SHADOW_SETS:-$default_sets}; do
  [ -s "$INPUTS/$s.jsonl" ] || continue
  case $s in mate-*) entry=mate profile=mate ;; *) entry=sglang profile=musa ;; esac
  "$VENV/bin/python" "$TOOL/harness.py" "$INPUTS/$s.jsonl" --entry $entry --out "$RESULTS/$s.shadow.jsonl"
  "$FA3C" certify --profile $profile --format json "$INPUTS/$s.jsonl" > "$RESULTS/$s.certify.json" || [ $? -eq 1 ]
  args+=(--set "$s" $profile "$INPUTS/$s.jsonl" "$RESULTS/$s.shadow.jsonl" "$RESULTS/$s.certify.json")
done

# 7. compare
CMP=$RESULTS/cmp
mkdir -p "$CMP"
"$FA3C" explain --list --format json > "$CMP/sites.json"
"$VENV/bin/python" "$TOOL/compare.py" "${args[@]}" --sites "$CMP/sites.json" --out "$CMP" > "$CMP/summary.txt" 2>&1 \
  || { cat "$CMP/summary.txt"; exit 1; }
end=$(date +%s)
echo "runtime: $((end - start)) s" >> "$CMP/summary.txt"
"$VENV/bin/python" -c 'import json, sys
for profile, figures in json.load(open(sys.argv[1]))["summary"]["profiles"].items():
    print(profile, json.dumps(figures["total"]))' "$CMP/comparison.json"
echo "disagreement classes: $(grep -c '^#' "$CMP/summary.txt" || true)  ($CMP/summary.txt, $CMP/comparison.json)"
echo "runtime: $((end - start)) s"
