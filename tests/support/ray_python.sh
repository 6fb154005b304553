#!/bin/sh
# tests/ray's Python: .venv-ray, which scripts/setup.sh creates with Ray
# (ray[serve,data]), the openai SDK and pytest. Absent: exit 77, which ctest
# reports as a skip, with the reason.
here=$(CDPATH= cd -- "$(dirname -- "$0")/../.." && pwd)
python="$here/.venv-ray/bin/python"
if [ ! -x "$python" ]; then
  echo "ray python: $python does not exist; run 'bash scripts/setup.sh' (it creates .venv-ray" \
       "with Ray for tests/ray); skipping" >&2
  exit 77
fi
exec "$python" "$@"
