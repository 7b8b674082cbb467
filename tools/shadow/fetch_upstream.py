#!/usr/bin/env python3
"""Puts the pinned upstream Python the shadow oracle runs into an ignored folder (never into git).

    python3 tools/shadow/fetch_upstream.py --mate SRC --sglang SRC [--dest target/shadow/upstream]

SRC is a git directory (a clone, bare or not, or its `.git`) or a URL that `git clone` accepts; a
URL is cloned once, blobless, into DEST/.clones. Defaults: the projects' GitHub URLs.

  mate    MooreThreads/mate @ MATE_COMMIT (v0.2.2): `git archive` of the whole tree -> DEST/mate
  sglang  four files of sgl-project/sglang -> DEST/sglang/<path as in the repository>:
          the MUSA wrapper module and the three support modules its `flash_attn_with_kvcache` runs
          (distributed/utils.py, environ.py, runtime_context.py).
          From SGLANG_COMMIT when SRC has it. Otherwise reconstructed from RECONSTRUCT_BASE, the
          nearest commit of the bytedance-iaas/sglang mirror (`fetch` of the search tool gives it):
          the support modules as they are there, the wrapper with the three arguments that differ
          in the backend class (RECONSTRUCT_EDITS), and the result checked against the blob id of
          the wrapper text the code store holds for SGLANG_COMMIT (RECONSTRUCTED_WRAPPER_BLOB).

DEST/PROVENANCE.json records what was taken from where. Nothing is fetched when it is already there
with the same provenance.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tarfile
import io
from pathlib import Path

MATE_COMMIT = "3f58cc3ef034b32ae723dd95fb8e3c66d60cab03"
MATE_URL = "https://github.com/MooreThreads/mate.git"

SGLANG_COMMIT = "082898472f454cfef2178e1df791786bc43a8ae3"
SGLANG_URL = "https://github.com/sgl-project/sglang.git"
WRAPPER = "python/sglang/srt/hardware_backend/musa/attention/flashattention_backend.py"
SUPPORT = ("python/sglang/srt/distributed/utils.py", "python/sglang/srt/environ.py",
           "python/sglang/srt/runtime_context.py")

# bytedance-iaas/sglang, 2026-07-09: the stored commit whose wrapper is nearest the pinned one.
RECONSTRUCT_BASE = "1f15308dca98f9366c4b8a59ad7708c17b557309"
# (1-based line, argument name): the pinned commit passes None there; the base passes an expression.
RECONSTRUCT_EDITS = ((408, "cu_seqlens_k_new"), (439, "cu_seqlens_k_new"), (602, "cu_seqlens_k_new"))
# git blob id of the reconstructed wrapper; its text equals the code store's copy of the file at
# SGLANG_COMMIT (40,190 characters, 951 lines; `flash_attn_with_kvcache` compared line by line).
RECONSTRUCTED_WRAPPER_BLOB = "00ab8118ae9a26edf976878424023a5905b7589f"


def git(gitdir: Path, *args: str, binary: bool = False):
    out = subprocess.run(["git", "--git-dir", str(gitdir), *args], capture_output=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {out.stderr.decode(errors='replace').strip()}")
    return out.stdout if binary else out.stdout.decode().strip()


def has_commit(gitdir: Path, commit: str) -> bool:
    return subprocess.run(["git", "--git-dir", str(gitdir), "cat-file", "-e", f"{commit}^{{commit}}"],
                          capture_output=True).returncode == 0


def git_dir_of(source: str, clones: Path, name: str, commits: tuple) -> Path:
    """The git directory of SOURCE, cloning a URL (blobless) and fetching the wanted commits."""
    path = Path(source)
    if path.exists():
        for candidate in (path / ".git", path):
            if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir():
                return candidate.resolve()
        raise SystemExit(f"{source}: not a git directory")
    gitdir = clones / f"{name}.git"
    if not gitdir.exists():
        clones.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "clone", "--bare", "--filter=blob:none", source, str(gitdir)], check=True)
    for commit in commits:
        if not has_commit(gitdir, commit):
            subprocess.run(["git", "--git-dir", str(gitdir), "fetch", "--filter=blob:none", "origin", commit],
                           capture_output=True)
    return gitdir


def blob_id(data: bytes) -> str:
    out = subprocess.run(["git", "hash-object", "--stdin"], input=data, capture_output=True, check=True)
    return out.stdout.decode().strip()


def fetch_mate(source: str, dest: Path, clones: Path) -> dict:
    gitdir = git_dir_of(source, clones, "mate", (MATE_COMMIT,))
    if not has_commit(gitdir, MATE_COMMIT):
        raise SystemExit(f"{source}: has no commit {MATE_COMMIT} (mate v0.2.2)")
    target = dest / "mate"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    archive = git(gitdir, "archive", "--format=tar", MATE_COMMIT, binary=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    return {"source": source, "commit": MATE_COMMIT, "tree": git(gitdir, "rev-parse", f"{MATE_COMMIT}^{{tree}}")}


def reconstruct_wrapper(base_text: bytes) -> bytes:
    lines = base_text.decode().split("\n")
    for number, name in RECONSTRUCT_EDITS:
        line = lines[number - 1]
        head, sep, _ = line.partition(f"{name}=")
        if not sep or head.strip():
            raise SystemExit(f"reconstruction: line {number} of the base wrapper does not pass {name}=: {line!r}")
        lines[number - 1] = f"{head}{name}=None,"
    return "\n".join(lines).encode()


def fetch_sglang(source: str, dest: Path, clones: Path) -> dict:
    gitdir = git_dir_of(source, clones, "sglang", (SGLANG_COMMIT, RECONSTRUCT_BASE))
    files = {}
    if has_commit(gitdir, SGLANG_COMMIT):
        for path in (WRAPPER, *SUPPORT):
            files[path] = git(gitdir, "show", f"{SGLANG_COMMIT}:{path}", binary=True)
        how = {"commit": SGLANG_COMMIT, "how": "taken from the pinned commit"}
        if blob_id(files[WRAPPER]) != RECONSTRUCTED_WRAPPER_BLOB:
            print(f"note: the pinned wrapper differs from the reconstruction ({RECONSTRUCTED_WRAPPER_BLOB}); "
                  "the pinned text is used", file=sys.stderr)
    elif has_commit(gitdir, RECONSTRUCT_BASE):
        for path in SUPPORT:
            files[path] = git(gitdir, "show", f"{RECONSTRUCT_BASE}:{path}", binary=True)
        files[WRAPPER] = reconstruct_wrapper(git(gitdir, "show", f"{RECONSTRUCT_BASE}:{WRAPPER}", binary=True))
        got = blob_id(files[WRAPPER])
        if got != RECONSTRUCTED_WRAPPER_BLOB:
            raise SystemExit(f"reconstructed wrapper has blob {got}, expected {RECONSTRUCTED_WRAPPER_BLOB}")
        how = {"commit": SGLANG_COMMIT, "how": f"reconstructed from {RECONSTRUCT_BASE} "
               f"(wrapper: {len(RECONSTRUCT_EDITS)} argument edits, blob {RECONSTRUCTED_WRAPPER_BLOB}; "
               "support modules as at the base)"}
    else:
        raise SystemExit(f"{source}: has neither {SGLANG_COMMIT} (sgl-project/sglang) nor "
                         f"{RECONSTRUCT_BASE} (bytedance-iaas/sglang)")
    target = dest / "sglang"
    shutil.rmtree(target, ignore_errors=True)
    for path, data in files.items():
        out = target / path
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
    return {"source": source, **how, "blobs": {p: blob_id(d) for p, d in files.items()}}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mate", default=MATE_URL, help="git dir or URL of MooreThreads/mate")
    ap.add_argument("--sglang", default=SGLANG_URL,
                    help="git dir or URL of sgl-project/sglang (or of the bytedance-iaas/sglang mirror)")
    ap.add_argument("--dest", type=Path, default=Path("target/shadow/upstream"))
    args = ap.parse_args(argv)
    dest = args.dest.resolve()
    record = dest / "PROVENANCE.json"
    provenance = json.loads(record.read_text()) if record.exists() else {}
    clones = dest / ".clones"
    if provenance.get("mate", {}).get("commit") != MATE_COMMIT or not (dest / "mate/mate").is_dir():
        provenance["mate"] = fetch_mate(args.mate, dest, clones)
    if provenance.get("sglang", {}).get("commit") != SGLANG_COMMIT or not (dest / "sglang" / WRAPPER).is_file():
        provenance["sglang"] = fetch_sglang(args.sglang, dest, clones)
    record.write_text(json.dumps(provenance, indent=1) + "\n")
    print(json.dumps(provenance, indent=1))


if __name__ == "__main__":
    main()
