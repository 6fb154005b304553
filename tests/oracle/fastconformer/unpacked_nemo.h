// The NeMo oracle tests' way to plant a defect in a committed .nemo: its
// members unpacked into a fresh temporary directory (which NeMo's loader
// also serves), to be edited and then removed by the test.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include "io/tar_archive.h"

namespace oasr::testing {

inline std::filesystem::path unpacked_nemo_copy(const std::filesystem::path& archive,
                                                const std::string& name) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("oasr_nemo_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const io::TarArchive tar = io::read_tar_archive(archive);
  for (const io::TarMember& m : tar.members) {
    if (!m.regular) continue;
    std::ofstream out(dir / std::filesystem::path(m.name).filename(), std::ios::binary);
    const std::string bytes = tar.read(m);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  return dir;
}

}  // namespace oasr::testing
