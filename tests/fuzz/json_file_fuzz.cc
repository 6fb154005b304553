// libFuzzer target: the one JSON file reader (io/json_file.h) every config,
// index and tokenizer document goes through.
#include <cstddef>
#include <cstdint>

#include "fuzz_util.h"
#include "io/json_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = oasr::fuzz::write_scratch_file("config.json", oasr::fuzz::as_text(data, size));
  oasr::fuzz::run_parser([&] { return oasr::io::read_json_file(path).size(); });
  oasr::fuzz::run_parser([&] { return oasr::io::read_json_file_if_present(path).has_value(); });
  return 0;
}
