// libFuzzer target: a native checkpoint's oasr_config.json (read as
// load_native_dir reads it: io/json_file.h, then
// models/u2pp/native_checkpoint.h's parse_native_config).
#include <cstddef>
#include <cstdint>

#include "fuzz_util.h"
#include "io/json_file.h"
#include "models/u2pp/native_checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path =
      oasr::fuzz::write_scratch_file("oasr_config.json", oasr::fuzz::as_text(data, size));
  oasr::fuzz::run_parser([&] {
    const oasr::models::WenetConfig config =
        oasr::models::parse_native_config(oasr::io::read_json_file(path), path.string());
    return config.model.vocab_size;
  });
  return 0;
}
