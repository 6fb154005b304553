#!/usr/bin/env bash
# The README's "main job". STAND-IN until a bundled speech model lands: it
# runs the smallest end-to-end path that exists today. It builds the `oasr`
# CLI (cpu preset), writes a small transformer-like safetensors checkpoint with
# an independent writer (PyPI `safetensors` in .venv), lists it with
# `oasr info`, and shows that a truncated copy is refused with a one-line
# error. Exits 0 when all of that behaves as expected, non-zero otherwise.
#
# OASR_BUILD_DIR=dir uses (and configures, if needed) another CPU build
# directory instead of the preset's build/cpu.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'main: %s\n' "$*"; }
fail() { printf 'main: FAILED: %s\n' "$*" >&2; exit 1; }

say "NOTE: this is a stand-in for the main job until the bundled model lands;"
say "      no speech is recognised yet, only the checkpoint tooling is exercised."

# ---- build -------------------------------------------------------------------
if [ -n "${OASR_BUILD_DIR:-}" ]; then
  build_dir=$OASR_BUILD_DIR
  if [ ! -f "$build_dir/build.ninja" ]; then
    cmake -S . -B "$build_dir" -G Ninja -DOASR_WITH_CUDA=OFF >/dev/null
  fi
  cmake --build "$build_dir" --target oasr
else
  build_dir=build/cpu
  if [ ! -f "$build_dir/build.ninja" ]; then
    say "configuring the cpu preset"
    cmake --preset cpu >/dev/null
  fi
  cmake --build --preset cpu --target oasr
fi
oasr=$build_dir/oasr
[ -x "$oasr" ] || fail "$oasr was not built"

python=.venv/bin/python
if ! "$python" -c 'import safetensors, torch' 2>/dev/null; then
  fail "$python with safetensors and torch is missing; run: bash scripts/setup.sh"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/oasr-main.XXXXXX")
trap 'rm -rf "$work"' EXIT

# ---- a checkpoint written by the reference library ----------------------------
say "writing a small transformer-like checkpoint with PyPI safetensors"
"$python" - "$work/checkpoint" <<'EOF'
import os
import sys

import torch
from safetensors.torch import save_file

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
gen = torch.Generator().manual_seed(0)
d_model, d_ff, vocab = 64, 256, 100
tensors = {"encoder.embed.out.0.weight": torch.randn(d_model, 80, generator=gen)}
for i in range(2):
    p = f"encoder.encoders.{i}."
    for proj in ("linear_q", "linear_k", "linear_v", "linear_out"):
        tensors[p + f"self_attn.{proj}.weight"] = torch.randn(d_model, d_model, generator=gen).half()
        tensors[p + f"self_attn.{proj}.bias"] = torch.zeros(d_model).half()
    tensors[p + "feed_forward.w_1.weight"] = torch.randn(d_ff, d_model, generator=gen).bfloat16()
    tensors[p + "feed_forward.w_2.weight"] = torch.randn(d_model, d_ff, generator=gen).bfloat16()
    tensors[p + "norm_ff.weight"] = torch.ones(d_model)
    tensors[p + "norm_ff.bias"] = torch.zeros(d_model)
tensors["ctc.ctc_lo.weight"] = torch.randn(vocab, d_model, generator=gen)
tensors["ctc.ctc_lo.bias"] = torch.zeros(vocab)
tensors["encoder.global_cmvn.count"] = torch.tensor(1000, dtype=torch.int64)
save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
print(f"main: wrote {len(tensors)} tensors to {out}/model.safetensors")
EOF

say "\$ oasr info --summary CHECKPOINT"
"$oasr" info --summary "$work/checkpoint"
echo
say "\$ oasr info CHECKPOINT"
"$oasr" info "$work/checkpoint"
echo

# ---- a truncated copy must be refused -------------------------------------------
truncated=$work/truncated.safetensors
size=$(stat -c %s "$work/checkpoint/model.safetensors")
head -c $((size - 100)) "$work/checkpoint/model.safetensors" >"$truncated"
say "\$ oasr info $(basename "$truncated")   (cut 100 bytes short: expected to be refused)"
set +e
"$oasr" info "$truncated" >"$work/stdout" 2>"$work/stderr"
status=$?
set -e
cat "$work/stderr"
[ "$status" -eq 1 ] || fail "expected exit code 1 for the truncated copy, got $status"
[ "$(wc -l <"$work/stderr")" -eq 1 ] || fail "expected exactly one line on stderr"
grep -q '^oasr: error: .*truncated' "$work/stderr" || fail "the error does not say 'truncated'"
[ ! -s "$work/stdout" ] || fail "expected nothing on stdout for the truncated copy"
say "the truncated copy was refused as expected (exit code 1)"

say "ok (stand-in main job; the real one runs the bundled model once it lands)"
