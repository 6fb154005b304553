#!/usr/bin/env bash
# Everything that must run on this (networked) machine before a device call.
#
#   tools/data/prepare_local.sh CARRY_DIR        (normally .devdata)
#
# Leaves in CARRY_DIR: debs/ (TTS engines, voices, real speech), lib/ (stub
# playback libraries), text/ (sentence lists for synthesize.py). Text-only
# packages go to build/data/textdebs and are not carried. Then carry
# CARRY_DIR to the GPU machine and run tools/data/prepare_device.sh there.
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 CARRY_DIR" >&2
  exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
carry_dir=$(realpath -m "$1")
text_deb_dir=$(realpath -m "$here/../../build/data/textdebs")
python=${PYTHON:-/usr/bin/python3}

"$here/fetch_debs.sh" "$carry_dir" "$text_deb_dir"

# The real test transcripts decide which sentences build_text.py must exclude;
# they come from the same split the device computes (asterisk_split.py).
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for deb in "$carry_dir"/debs/asterisk-core-sounds-en*.deb; do
  dpkg-deb -x "$deb" "$scratch"
done
mkdir -p "$carry_dir/text"
"$python" "$here/asterisk_split.py" --tree "$scratch" --test-texts "$carry_dir/text/real_test_texts.txt"
"$python" "$here/build_text.py" --text-debs "$text_deb_dir" \
  --real-test-texts "$carry_dir/text/real_test_texts.txt" --out "$carry_dir/text"

echo "carry folder ready: $carry_dir ($(du -sh "$carry_dir" | cut -f1))"
