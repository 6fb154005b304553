#!/usr/bin/env python3
"""tools/check_device_dispatch.py passes on src/ and fails on planted device branches.

Each case copies src/ to a temporary folder, appends one line, runs the
checker as CI does and expects exit 1 naming the planted file and line (or
exit 0 where the line is allowed).
"""

import unittest

from planted_src import ROOT, PlantedSourceTest


class CheckDeviceDispatch(PlantedSourceTest):
    CHECKER = ROOT / "tools" / "check_device_dispatch.py"

    def expect(self, relative: str, line: str, words: str | None):
        number = self.plant(relative, line)
        result = self.run_checker()
        if words is None:
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
            return
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertIn(f"{relative}:{number}: {words}", result.stdout)

    def test_the_tree_passes(self):
        result = self.run_checker()
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)

    def test_a_preprocessor_branch_in_an_op_front_fails(self):
        self.expect("ops/glu.cc", "#if OASR_WITH_CUDA", "reads OASR_WITH_CUDA in the preprocessor")

    def test_a_defined_test_in_a_quant_method_fails(self):
        self.expect("quant/methods/quant_method.cc", "#if defined(OASR_WITH_CUDA)",
                    "reads OASR_WITH_CUDA in the preprocessor")

    def test_a_cuda_branch_in_a_layer_fails(self):
        self.expect("layers/attention.cc", "  if (q.device().is_cuda()) return Tensor();",
                    "layers/ names the CUDA device")

    def test_a_cuda_branch_in_a_model_fails(self):
        self.expect("models/u2pp/u2pp_encoder.cc",
                    "  const bool gpu = device().type == DeviceType::kCUDA;",
                    "models/ names the CUDA device")

    def test_a_cuda_branch_in_a_search_fails(self):
        self.expect("decode/whisper_search.cc", "  model.to(Device::cuda(0));",
                    "decode/ names the CUDA device")

    def test_a_cuda_body_may_read_the_macro(self):
        self.expect("ops/cuda/glu.h", "#if OASR_WITH_CUDA", None)

    def test_asking_for_the_host_is_allowed(self):
        self.expect("decode/whisper_search.cc", "  const bool host = logits.device().is_cpu();",
                    None)

    def test_a_comment_naming_cuda_is_allowed(self):
        self.expect("layers/attention.cc", "// on CUDA the op front runs is_cuda() kernels", None)


if __name__ == "__main__":
    unittest.main()
