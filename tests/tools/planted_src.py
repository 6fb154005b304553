"""A fresh copy of src/ per test, to plant one violation in and run a checker
of tools/ over it as CI does (tests/tools/test_check_*.py)."""

import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class PlantedSourceTest(unittest.TestCase):
    CHECKER: Path  # the tools/ script under test; set by each subclass

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.src = Path(self.tmp.name) / "src"
        shutil.copytree(ROOT / "src", self.src)

    def tearDown(self):
        self.tmp.cleanup()

    def plant(self, relative: str, line: str) -> int:
        """Appends `line` to src/relative; returns its line number."""
        path = self.src / relative
        lines = path.read_text().splitlines()
        lines.append(line)
        path.write_text("\n".join(lines) + "\n")
        return len(lines)

    def run_checker(self) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(self.CHECKER), "--src", str(self.src)],
                              capture_output=True, text=True, timeout=120)
