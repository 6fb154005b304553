// libFuzzer target: the server's multipart/form-data reader
// (server/multipart.h): the request's Content-Type value, a NUL, then the
// body.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "server/multipart.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string_view> parts =
      oasr::fuzz::split_parts(oasr::fuzz::as_text(data, size), 2);
  oasr::fuzz::run_parser([&] {
    const std::string boundary = oasr::server::multipart_boundary(parts[0]);
    size_t total = 0;
    for (const oasr::server::FormPart& part : oasr::server::parse_multipart(parts[1], boundary)) {
      // Each part's data must lie inside the body.
      if (!part.data.empty() &&
          (part.data.data() < parts[1].data() ||
           part.data.data() + part.data.size() > parts[1].data() + parts[1].size())) {
        std::fprintf(stderr, "oasr fuzz: FINDING: part '%s' points outside the body\n",
                     part.name.c_str());
        std::abort();
      }
      total += part.name.size() + part.filename.size() + part.data.size();
    }
    return total;
  });
  return 0;
}
