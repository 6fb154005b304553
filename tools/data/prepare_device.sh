#!/usr/bin/env bash
# The one command the GPU machine runs to build the speech corpus.
#
#   tools/data/prepare_device.sh CARRY_DIR DATA_DIR [WORKERS] [synthesize.py options...]
#
# CARRY_DIR is what prepare_local.sh built (debs/, lib/, text/). The debs are
# unpacked (dpkg-deb -x, never into /) into DATA_DIR/tts; nothing is installed.
# Writes into DATA_DIR:
#   real_{train,dev,test}.jsonl, calib.jsonl   Asterisk prompts (asterisk_split.py)
#   synth_{train,dev,test}.jsonl, synth/       rendered speech (synthesize.py)
# Manifest audio paths are relative to DATA_DIR. Extra options go to
# synthesize.py, e.g. --max-train 20000 --engines espeak,flite.
set -euo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: $0 CARRY_DIR DATA_DIR [WORKERS] [synthesize.py options...]" >&2
  exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
carry_dir=$(realpath "$1")
data_dir=$(realpath -m "$2")
workers=${3:-$(nproc)}
shift $(( $# >= 3 ? 3 : 2 ))
python=${PYTHON:-python3}
tree="$data_dir/tts"
start=$(date +%s)

mkdir -p "$tree"
if [[ ! -f "$tree/.unpacked" ]]; then
  for deb in "$carry_dir"/debs/*.deb; do
    dpkg-deb -x "$deb" "$tree"
  done
  touch "$tree/.unpacked"
fi
echo "unpacked $(ls "$carry_dir"/debs/*.deb | wc -l) debs into $tree ($(du -sh "$tree" | cut -f1))"

# Every library the engines load must come from the tree, the stubs or the base system.
missing=0
for binary in espeak-ng flite festival; do
  unresolved=$(LD_LIBRARY_PATH="$carry_dir/lib:$tree/usr/lib/x86_64-linux-gnu" ldd "$tree/usr/bin/$binary" \
    | grep "not found" || true)
  if [[ -n "$unresolved" ]]; then
    echo "warning: $binary cannot load: $unresolved (synthesize.py will skip it)" >&2
    missing=1
  fi
done
[[ $missing == 0 ]] && echo "all TTS engines resolve their libraries"

"$python" "$here/asterisk_split.py" --tree "$tree" --out "$data_dir"
"$python" "$here/synthesize.py" --tree "$tree" --stub-lib "$carry_dir/lib" --text "$carry_dir/text" \
  --out "$data_dir" --workers "$workers" "$@"

"$python" - "$data_dir" <<'PY'
import json, sys
from pathlib import Path
data_dir = Path(sys.argv[1])
print("summary (utterances, hours):")
for name in ("real_train", "real_dev", "real_test", "calib", "synth_train", "synth_dev", "synth_test"):
    path = data_dir / f"{name}.jsonl"
    if not path.is_file():
        continue
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    hours = sum(r.get("duration", 0.0) for r in rows) / 3600
    print(f"  {name:12s} {len(rows):7d} {hours:8.2f} h")
PY
echo "prepare_device done in $(( $(date +%s) - start )) s"
