#!/usr/bin/env bash
# Downloads the Debian packages the data pipeline needs, without installing them.
#
#   tools/data/fetch_debs.sh CARRY_DIR [TEXT_DEB_DIR]
#
# CARRY_DIR/debs   : what the GPU machine unpacks with `dpkg-deb -x` (real speech,
#                    TTS programs, their voices and the non-base libraries they
#                    load). This is carried, so its total is kept under ~50 MB.
# CARRY_DIR/lib    : libpcaudio.so.0 and libpulse-simple.so.0, no-op stand-ins
#                    built from pcaudio_stub.c / pulse_simple_stub.c (espeak-ng and
#                    festival link them for playback only).
# TEXT_DEB_DIR     : text sources used only here by build_text.py (not carried);
#                    default build/data/textdebs in the repository (ignored).
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: $0 CARRY_DIR [TEXT_DEB_DIR]" >&2
  exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
carry_dir=$(realpath -m "$1")
text_deb_dir=$(realpath -m "${2:-$here/../../build/data/textdebs}")

# Packages unpacked on the GPU machine. libpcaudio0 is deliberately absent (stub).
# libasound2(+data) and libgomp1 are not on a bare Ubuntu 24.04. libestools2.5 also
# loads libpulse-simple.so.0 (playback only): replaced by pulse_simple_stub.c.
carried_packages=(
  asterisk-core-sounds-en asterisk-core-sounds-en-wav
  espeak-ng libespeak-ng1 espeak-ng-data libsonic0
  flite libflite1 libasound2 libasound2-data
  festival libestools2.5 libgomp1 festlex-cmu festlex-poslex
  festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts
)
# English text packages, read here only.
text_packages=(
  fortunes fortunes-min fortunes-debian-hints fortune-anarchism
  fortunes-bofh-excuses tfortunes jargon-text dict-devil wordnet-base
)

download_into() {
  local dir=$1
  shift
  mkdir -p "$dir"
  # apt-get download writes into the current directory.
  (cd "$dir" && apt-get download "$@") || {
    echo "apt-get download failed; running 'apt-get update' once and retrying" >&2
    apt-get update -qq
    (cd "$dir" && apt-get download "$@")
  }
}

# Start clean so a superseded version of a package is never unpacked too.
rm -f "$carry_dir"/debs/*.deb "$text_deb_dir"/*.deb
download_into "$carry_dir/debs" "${carried_packages[@]}"
download_into "$text_deb_dir" "${text_packages[@]}"

mkdir -p "$carry_dir/lib"
gcc -shared -fPIC -O2 -Wall -Wextra -Wl,-soname,libpcaudio.so.0 \
  -o "$carry_dir/lib/libpcaudio.so.0" "$here/pcaudio_stub.c"
gcc -shared -fPIC -O2 -Wall -Wextra -Wl,-soname,libpulse-simple.so.0 \
  -Wl,--version-script="$here/pulse_simple_stub.map" \
  -o "$carry_dir/lib/libpulse-simple.so.0" "$here/pulse_simple_stub.c"

echo "carried debs (compressed sizes):"
du -ch "$carry_dir"/debs/*.deb | sed 's/^/  /'
echo "carry folder total: $(du -sh "$carry_dir" | cut -f1)"
echo "text debs (not carried): $(du -ch "$text_deb_dir"/*.deb | tail -1 | cut -f1)"
