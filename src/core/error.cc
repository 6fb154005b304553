#include "core/error.h"

namespace oasr {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ErrorCode::kNotFound:
      return "not_found";
    case ErrorCode::kCorruptFile:
      return "corrupt_file";
    case ErrorCode::kIo:
      return "io_error";
    case ErrorCode::kUnsupported:
      return "unsupported";
    case ErrorCode::kOutOfMemory:
      return "out_of_memory";
    case ErrorCode::kInternal:
      return "internal";
    case ErrorCode::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

}  // namespace oasr
