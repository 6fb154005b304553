// oasr::Error — the one exception type the library throws on bad input or an
// unserviceable request. The CLI turns it into one stderr line and a non-zero
// exit; the server into an HTTP status. Library code never exits or aborts.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace oasr {

enum class ErrorCode {
  kInvalidArgument,  // a caller passed something malformed (shape, dtype, flag)
  kNotFound,         // a file, tensor or module that was named does not exist
  kCorruptFile,      // a file exists but its contents violate its format
  kIo,               // the OS refused a read/write/mmap
  kUnsupported,      // well-formed, but this build/backend cannot serve it
  kOutOfMemory,
  kInternal,   // a broken invariant inside oasr (a bug)
  kCancelled,  // the caller asked the work to stop (core/cancellation.h)
};

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string message)
      : std::runtime_error(std::move(message)), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

namespace detail {
template <typename... Args>
std::string concat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}
}  // namespace detail

}  // namespace oasr

// OASR_CHECK(cond, code, message parts...): throws oasr::Error when cond is false.
#define OASR_CHECK(cond, code, ...)                                                      \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      throw ::oasr::Error(::oasr::ErrorCode::code, ::oasr::detail::concat(__VA_ARGS__)); \
    }                                                                                    \
  } while (0)

#define OASR_THROW(code, ...) \
  throw ::oasr::Error(::oasr::ErrorCode::code, ::oasr::detail::concat(__VA_ARGS__))
