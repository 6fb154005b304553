// libFuzzer target: WeNet's train.yaml (models/u2pp/wenet_config.h,
// parse_wenet_train_yaml, which validates what it returns).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "models/u2pp/wenet_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(oasr::fuzz::as_text(data, size));
  oasr::fuzz::run_parser([&] {
    const oasr::models::WenetTrainYaml yaml =
        oasr::models::parse_wenet_train_yaml(text, "train.yaml");
    return yaml.config.model.vocab_size + yaml.paths.cmvn_file.size();
  });
  return 0;
}
