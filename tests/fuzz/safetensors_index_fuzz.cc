// libFuzzer target: a sharded safetensors checkpoint's
// model.safetensors.index.json (io/safetensors.h, SafeTensorsCheckpoint),
// beside two fixed, valid shards; every tensor it serves is read.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "io/safetensors.h"

namespace {

std::string le_u64(uint64_t value) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  return bytes;
}

std::string shard(const std::string& header, const std::string& data) {
  return le_u64(header.size()) + header + data;
}

// The shards the index may name: "a" and "b" in the first, "c" (and a
// second "b", which only the weight map can disambiguate) in the second.
void write_shards() {
  static const bool written = [] {
    oasr::fuzz::write_scratch_file("model-00001-of-00002.safetensors",
                                   shard(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                         R"("b":{"dtype":"I8","shape":[3],"data_offsets":[8,11]}})",
                                         std::string("\0\0\x80?\0\0\0@\x01\x02\x03", 11)));
    oasr::fuzz::write_scratch_file(
        "model-00002-of-00002.safetensors",
        shard(R"({"c":{"dtype":"F16","shape":[1,2],"data_offsets":[0,4]},)"
              R"("b":{"dtype":"I8","shape":[1],"data_offsets":[4,5]}})",
              std::string("\0<\0<\x07", 5)));
    return true;
  }();
  (void)written;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  write_shards();
  const auto path = oasr::fuzz::write_scratch_file("model.safetensors.index.json",
                                                   oasr::fuzz::as_text(data, size));
  oasr::fuzz::run_parser([&] {
    const auto checkpoint = oasr::io::SafeTensorsCheckpoint::open(path);
    uint64_t checksum = 0;
    for (const std::string& name : checkpoint.names()) {
      const oasr::Tensor tensor = checkpoint.get(name);
      const auto* bytes = static_cast<const uint8_t*>(tensor.raw_data());
      for (size_t i = 0; i < tensor.nbytes(); ++i) checksum += bytes[i];
    }
    return checksum + checkpoint.files().size();
  });
  return 0;
}
