// libFuzzer target: torch.save checkpoints (io/torch_checkpoint.h). An input
// that starts with "PK" is the whole file; any other input is the pickle
// (archive/data.pkl) of an otherwise valid archive with two storages ("0",
// 64 bytes; "1", 8 bytes), so mutations reach the storage and tensor hooks
// instead of dying in the zip's checksums.
#include <zip.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "io/torch_checkpoint.h"

namespace {

void add_entry(zip_t* archive, const char* name, std::string_view bytes) {
  zip_source_t* source = zip_source_buffer(archive, bytes.data(), bytes.size(), 0);
  if (source == nullptr || zip_file_add(archive, name, source, ZIP_FL_OVERWRITE) < 0) {
    std::fprintf(stderr, "oasr fuzz: cannot add %s: %s\n", name, zip_strerror(archive));
    std::abort();
  }
  // torch.save stores its entries uncompressed.
  zip_set_file_compression(archive, zip_name_locate(archive, name, 0), ZIP_CM_STORE, 0);
}

std::filesystem::path wrap_pickle(std::string_view pickle) {
  static const std::string storage0 = [] {
    std::string bytes(64, '\0');
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 37 + 1);
    return bytes;
  }();
  static const std::string storage1(8, '\x3f');
  const std::filesystem::path path = oasr::fuzz::scratch_dir() / "wrapped.pt";
  int error = 0;
  zip_t* archive = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &error);
  if (archive == nullptr) {
    std::fprintf(stderr, "oasr fuzz: cannot create %s (libzip error %d)\n", path.c_str(), error);
    std::abort();
  }
  add_entry(archive, "archive/data.pkl", pickle);
  add_entry(archive, "archive/byteorder", "little");
  add_entry(archive, "archive/data/0", storage0);
  add_entry(archive, "archive/data/1", storage1);
  add_entry(archive, "archive/version", "3\n");
  if (zip_close(archive) != 0) {
    std::fprintf(stderr, "oasr fuzz: cannot write %s: %s\n", path.c_str(), zip_strerror(archive));
    std::abort();
  }
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = oasr::fuzz::as_text(data, size);
  const std::filesystem::path path = input.substr(0, 2) == "PK"
                                         ? oasr::fuzz::write_scratch_file("raw.pt", input)
                                         : wrap_pickle(input);
  oasr::fuzz::run_parser([&] {
    const oasr::io::TorchStateDict state = oasr::io::load_torch_state_dict(path);
    uint64_t checksum = 0;
    for (const auto& [name, tensor] : state.tensors) {
      const oasr::Tensor dense = tensor.contiguous();
      const auto* bytes = static_cast<const uint8_t*>(dense.raw_data());
      for (size_t i = 0; i < dense.nbytes(); ++i) checksum += bytes[i];
      checksum += name.size();
    }
    return checksum + state.converted.size();
  });
  return 0;
}
