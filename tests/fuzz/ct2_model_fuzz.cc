// libFuzzer target: CTranslate2's model.bin (io/ct2_model.h), opened, every
// variable read, every alias resolved and every integer scalar taken.
#include <cstddef>
#include <cstdint>

#include "fuzz_util.h"
#include "io/ct2_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = oasr::fuzz::write_scratch_file("model.bin", oasr::fuzz::as_text(data, size));
  oasr::fuzz::run_parser([&] {
    const oasr::io::Ct2Model model = oasr::io::Ct2Model::open(path);
    uint64_t checksum = model.binary_version() + model.spec_name().size();
    for (const oasr::io::Ct2VariableInfo& info : model.variables()) {
      const oasr::Tensor tensor = model.get(info.name);
      const auto* bytes = static_cast<const uint8_t*>(tensor.raw_data());
      for (size_t i = 0; i < tensor.nbytes(); ++i) checksum += bytes[i];
      if (info.shape.empty()) {
        oasr::fuzz::run_parser([&] { checksum += model.scalar_int(info.name); });
      }
    }
    for (const auto& [alias, target] : model.aliases()) {
      checksum += model.resolve(alias).size() + model.info(alias).nbytes;
      checksum += model.contains(alias + "_scale");
    }
    return checksum;
  });
  return 0;
}
