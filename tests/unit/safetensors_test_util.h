// Helpers shared by the safetensors unit tests: raw file assembly straight
// from the format definition (8-byte little-endian header length, JSON
// header, data section), so the reader can be tested on bytes our writer did
// not produce, and a check that a refusal carries the expected code and text.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <string>

#include "core/error.h"

namespace oasr::testing {

inline std::string read_file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_file_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

inline std::string le_u64(uint64_t value) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  return bytes;
}

// A complete safetensors file: length prefix, header text, data bytes.
inline std::string safetensors_bytes(const std::string& header, const std::string& data) {
  return le_u64(header.size()) + header + data;
}

// Runs `action`, which must throw oasr::Error with `code` and a message that
// contains every one of `needles`.
inline ::testing::AssertionResult throws_error(const std::function<void()>& action, ErrorCode code,
                                               std::initializer_list<std::string> needles) {
  try {
    action();
  } catch (const Error& e) {
    if (e.code() != code) {
      return ::testing::AssertionFailure()
             << "error code " << error_code_name(e.code()) << ", expected " << error_code_name(code)
             << "; message: " << e.what();
    }
    const std::string message = e.what();
    for (const std::string& needle : needles) {
      if (message.find(needle) == std::string::npos) {
        return ::testing::AssertionFailure() << "message lacks \"" << needle << "\": " << message;
      }
    }
    return ::testing::AssertionSuccess() << message;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-oasr exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "nothing was thrown";
}

}  // namespace oasr::testing
