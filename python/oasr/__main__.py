"""``python -m oasr ARGS``: runs the ``oasr`` command-line tool with ARGS
(``transcribe``, ``eval``, ``quantize``, ``convert``, ``info``, ``bench``)."""

import os
import sys
from pathlib import Path


def cli_path() -> Path:
    """The ``oasr`` executable installed with this package."""
    return Path(__file__).resolve().parent / "bin" / "oasr"


def main() -> None:
    cli = cli_path()
    if not os.access(cli, os.X_OK):
        sys.stderr.write(f"oasr: error: the oasr command-line tool is missing from this install "
                         f"({cli}); reinstall the package with pip install .\n")
        raise SystemExit(1)
    os.execv(cli, ["oasr", *sys.argv[1:]])


if __name__ == "__main__":
    main()
