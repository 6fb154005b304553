#!/usr/bin/env bash
# Builds the held-out evaluation manifests of the bundled model on this machine,
# from installed Debian packages (scripts/setup.sh installs them):
#
#   tools/data/make_eval_sets.sh OUTDIR
#
# Writes into OUTDIR:
#   real_test.jsonl  120 Asterisk prompts, the fixed test split (asterisk_split.py)
#   real_dev.jsonl   40 Asterisk prompts (dev split); also real_train.jsonl, calib.jsonl
#   synth_test.jsonl 400 held-out sentences (build_text.py) rendered by the installed
#                    espeak-ng and flite (synthesize.py), wavs under OUTDIR/synth/test
#   SHA256SUMS       checksums of every manifest and wav (two runs must agree)
# Real audio paths are absolute (/usr/share/asterisk/...), synthetic ones relative
# to OUTDIR, so `oasr eval --manifest OUTDIR/NAME.jsonl` reads both.
#
# The same data the GPU run used: the split rules and seeds are those of
# prepare_local.sh / prepare_device.sh. The synthetic test sentences depend on
# the whole text corpus (sorted by hash after deduplication), so the nine text
# packages are fetched with `apt-get download` into OUTDIR/textdebs (7.8 MB, not
# installed). The voices are drawn as in the device calls 2-3, which had no
# festival: --engines espeak,flite --weights espeak=0.7,flite=0.3.
# A finished OUTDIR (OUTDIR/.complete) is left alone; delete it to rebuild.
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=$(realpath -m "$1")
python=${PYTHON:-/usr/bin/python3}
workers=${WORKERS:-$(nproc)}

# Checksums of the sentence lists the GPU run was trained/evaluated with
# (.devdata/text on the machine that prepared it). A mismatch means the Debian
# text or sound packages changed; the figures in ci/wer-reference.json then
# no longer apply to this test set.
expected_real_test_texts=bab0b4d4f9a65402a9adec3c2be3fb0c18e585828ab7113cedf2667df6a4f620
expected_synth_test_tsv=e046759d4a283bad7ce9a4a21edefff6504bc2c47472add0915c1cb925fecf9b
text_packages=(
  fortunes fortunes-min fortunes-debian-hints fortune-anarchism
  fortunes-bofh-excuses tfortunes jargon-text dict-devil wordnet-base
)

if [[ -f "$out/.complete" ]]; then
  echo "eval sets already built in $out (remove $out/.complete to rebuild)"
  exit 0
fi
start=$(date +%s)

for tool in espeak-ng flite dpkg-deb apt-get; do
  command -v "$tool" >/dev/null || {
    echo "error: $tool not found; run scripts/setup.sh (it installs espeak-ng, flite and the Asterisk prompts)" >&2
    exit 1
  }
done
[[ -f /usr/share/doc/asterisk-core-sounds-en/core-sounds-en.txt.gz && -d /usr/share/asterisk/sounds/en_US_f_Allison ]] || {
  echo "error: asterisk-core-sounds-en(-wav) is not installed; run scripts/setup.sh" >&2
  exit 1
}
mkdir -p "$out/text" "$out/textdebs" "$out/nostub"

# ---- real speech: the fixed split, read from the installed package ----------------
"$python" "$here/asterisk_split.py" --tree / --out "$out" --absolute-audio \
  --test-texts "$out/text/real_test_texts.txt"

# ---- synthetic test sentences, regenerated from the Debian text packages ----------
have_all=1
for pkg in "${text_packages[@]}"; do
  compgen -G "$out/textdebs/${pkg}_*.deb" >/dev/null || have_all=0
done
if [[ $have_all == 0 ]]; then
  rm -f "$out"/textdebs/*.deb
  (cd "$out/textdebs" && apt-get download "${text_packages[@]}") || {
    echo "error: 'apt-get download ${text_packages[*]}' failed; run 'apt-get update' (as root) and retry" >&2
    exit 1
  }
fi
"$python" "$here/build_text.py" --text-debs "$out/textdebs" \
  --real-test-texts "$out/text/real_test_texts.txt" --out "$out/text" >"$out/text/build_text.log"

check_sum() {  # name, actual, expected
  if [[ "$2" != "$3" ]]; then
    echo "warning: $1 differs from the list the bundled model was evaluated on" >&2
    echo "         (sha256 $2, expected $3): the Debian packages changed;" >&2
    echo "         WERs on this set are not comparable with ci/wer-reference.json" >&2
  fi
}
check_sum real_test_texts "$(sha256sum <"$out/text/real_test_texts.txt" | cut -d' ' -f1)" "$expected_real_test_texts"
check_sum synth_test.tsv "$(zcat "$out/text/synth_test.tsv.gz" | sha256sum | cut -d' ' -f1)" "$expected_synth_test_tsv"

# ---- render the synthetic test set with the installed engines ---------------------
# --tree / runs /usr/bin/espeak-ng and /usr/bin/flite; no stub libraries are
# needed (the installed libpcaudio is the real one), so --stub-lib is empty.
rm -f "$out/synth_errors.log"
"$python" "$here/synthesize.py" --tree / --stub-lib "$out/nostub" --text "$out/text" --out "$out" \
  --splits test --engines espeak,flite --weights espeak=0.7,flite=0.3 --workers "$workers" \
  >"$out/synthesize.log"
tail -n 4 "$out/synthesize.log"
if [[ -s "$out/synth_errors.log" ]]; then
  echo "error: some synthetic test sentences failed to render (see $out/synth_errors.log)" >&2
  exit 1
fi

(cd "$out" && sha256sum real_*.jsonl calib.jsonl synth_test.jsonl text/real_test_texts.txt \
  $(find synth/test -name '*.wav' | LC_ALL=C sort)) >"$out/SHA256SUMS"
for name in real_test real_dev synth_test; do
  printf '  %-10s %4d utterances, %6.1f min\n' "$name" "$(wc -l <"$out/$name.jsonl")" \
    "$("$python" -c 'import json,sys; print(sum(json.loads(l)["duration"] for l in open(sys.argv[1]))/60)' "$out/$name.jsonl")"
done
touch "$out/.complete"
echo "eval sets ready in $out ($(( $(date +%s) - start )) s); checksums in $out/SHA256SUMS"
