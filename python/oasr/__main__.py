"""``python -m oasr ARGS``: runs the ``oasr`` command-line tool with ARGS
(``transcribe``, ``eval``, ``quantize``, ``convert``, ``info``, ``bench``);
``python -m oasr serve-ray CONFIG`` serves on a Ray cluster (oasr.ray)."""

import os
import sys
from pathlib import Path


def cli_path() -> Path:
    """The ``oasr`` executable installed with this package."""
    return Path(__file__).resolve().parent / "bin" / "oasr"


def main() -> None:
    if sys.argv[1:2] == ["serve-ray"]:
        from .ray.__main__ import main as ray_main

        raise SystemExit(ray_main(["serve", *sys.argv[2:]]))
    cli = cli_path()
    if not os.access(cli, os.X_OK):
        sys.stderr.write(f"oasr: error: the oasr command-line tool is missing from this install "
                         f"({cli}); reinstall the package with pip install .\n")
        raise SystemExit(1)
    os.execv(cli, ["oasr", *sys.argv[1:]])


if __name__ == "__main__":
    main()
