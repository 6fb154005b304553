// libFuzzer target: WeNet's global_cmvn statistics, JSON or Kaldi text
// (models/u2pp/wenet_dir.h, load_cmvn_stats).
#include <cstddef>
#include <cstdint>

#include "fuzz_util.h"
#include "models/u2pp/wenet_dir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = oasr::fuzz::write_scratch_file("global_cmvn", oasr::fuzz::as_text(data, size));
  oasr::fuzz::run_parser([&] {
    const oasr::models::Cmvn cmvn = oasr::models::load_cmvn_stats(path);
    float sum = 0.0f;
    for (int64_t i = 0; i < cmvn.mean.numel(); ++i) {
      sum += cmvn.mean.data<float>()[i] + cmvn.istd.data<float>()[i];
    }
    return sum;
  });
  return 0;
}
