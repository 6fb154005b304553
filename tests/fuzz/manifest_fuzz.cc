// libFuzzer target: JSON-lines manifests (io/manifest.h, parse_manifest),
// with and without required transcripts.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "io/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(oasr::fuzz::as_text(data, size));
  for (const bool require_text : {true, false}) {
    oasr::io::ManifestOptions options;
    options.require_text = require_text;
    oasr::fuzz::run_parser(
        [&] { return oasr::io::parse_manifest(text, "fuzz.jsonl", "/data", options).size(); });
  }
  return 0;
}
