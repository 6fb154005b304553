#!/usr/bin/env python3
"""tools/check_includes.py passes on src/ and fails on planted violations.

Each case copies src/ to a temporary folder, plants one include that breaks
a rule of the library order, runs the checker as CI does and expects exit 1
with the planted file and line named; the unmodified copy must pass.
"""

import unittest

from planted_src import ROOT, PlantedSourceTest


class CheckIncludes(PlantedSourceTest):
    CHECKER = ROOT / "tools" / "check_includes.py"

    def expect_violation(self, relative: str, include: str, words: str):
        line = self.plant(relative, f'#include "{include}"')
        result = self.run_checker()
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertIn(f"{relative}:{line}:", result.stdout)
        self.assertIn(words, result.stdout)

    def test_the_tree_passes(self):
        result = self.run_checker()
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)

    def test_an_upward_include_fails(self):
        # ops/ sits below layers/: a kernel front that reaches up to a layer.
        self.expect_violation("ops/gemm.h", "layers/linear.h",
                              "runs against the library order: ops/ does not link layers/")

    def test_models_including_the_engine_fails(self):
        self.expect_violation("models/whisper/whisper_recognizer.h", "engine/asr_engine.h",
                              "models/ does not link engine/")

    def test_a_sideways_include_fails(self):
        # audio/ and decode/ are siblings: neither links the other.
        self.expect_violation("audio/fbank.h", "decode/ctc_search.h",
                              "audio/ does not link decode/")

    def test_one_architecture_reaching_into_another_fails(self):
        self.expect_violation("models/whisper/whisper_dir.cc", "models/u2pp/model_source.h",
                              "reaches into models/u2pp/ from models/whisper/")

    def test_the_registry_including_an_architecture_fails(self):
        self.expect_violation("models/architecture.cc", "models/u2pp/u2pp_recognizer.h",
                              "reaches into models/u2pp/ from the shared models/ files")

    def test_a_link_cycle_fails(self):
        cmake = self.src / "CMakeLists.txt"
        cmake.write_text(cmake.read_text() +
                         "\ntarget_link_libraries(oasr_core PUBLIC oasr_engine)\n")
        result = self.run_checker()
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("link graph has a cycle", result.stdout)

    def test_a_folder_outside_the_libraries_fails(self):
        stray = self.src / "stray"
        stray.mkdir()
        (stray / "thing.h").write_text('#include "core/error.h"\n')
        result = self.run_checker()
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("folder 'stray/' is no library", result.stdout)


if __name__ == "__main__":
    unittest.main()
