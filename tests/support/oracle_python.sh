#!/bin/sh
# The oracle tests' Python, chosen when a test runs (not when the build is
# configured): the project venv that scripts/setup.sh creates, with the
# oracle packages (torch, safetensors, transformers, ...) in it.
here=$(CDPATH= cd -- "$(dirname -- "$0")/../.." && pwd)
python="$here/.venv/bin/python"
if [ ! -x "$python" ]; then
  echo "oracle python: $python does not exist; run 'bash scripts/setup.sh' (it creates the" \
       "project venv with the oracle packages), then run the tests again" >&2
  exit 1
fi
exec "$python" "$@"
