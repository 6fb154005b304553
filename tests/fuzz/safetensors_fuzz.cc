// libFuzzer target: a .safetensors file (io/safetensors.h), opened and every
// tensor read byte by byte, so a header that lets a tensor reach outside the
// mapping shows up under ASan.
#include <cstddef>
#include <cstdint>

#include "fuzz_util.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path =
      oasr::fuzz::write_scratch_file("model.safetensors", oasr::fuzz::as_text(data, size));
  oasr::fuzz::run_parser([&] {
    const oasr::io::SafeTensorsFile file = oasr::io::SafeTensorsFile::open(path);
    uint64_t checksum = 0;
    for (const oasr::io::TensorInfo& info : file.infos()) {
      const oasr::Tensor tensor = file.get(info.name);
      const auto* bytes = static_cast<const uint8_t*>(tensor.raw_data());
      for (size_t i = 0; i < tensor.nbytes(); ++i) checksum += bytes[i];
    }
    for (const auto& [key, value] : file.metadata()) checksum += key.size() + value.size();
    (void)file.contains("missing");
    return checksum;
  });
  return 0;
}
