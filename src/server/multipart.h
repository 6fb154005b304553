// multipart/form-data (RFC 7578) as the OpenAI audio API sends it: the
// request body split into named parts, each a view into the body. Boost.Beast
// (the server's HTTP library) reads the body but does not split forms.
//
// Refused with oasr::Error (kInvalidArgument) and a message naming what is
// wrong: a Content-Type without a boundary, a body that does not start with
// the boundary, a part without Content-Disposition or name, a body that ends
// before the closing boundary (a truncated upload), more parts than allowed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace oasr::server {

struct FormPart {
  std::string name;          // Content-Disposition name=
  std::string filename;      // filename= (empty for plain fields)
  std::string content_type;  // the part's Content-Type (empty when absent)
  std::string_view data;     // into the body passed to parse_multipart
};

// The boundary of a `multipart/form-data; boundary=...` Content-Type value
// (quoted or not). Refused when the type is not multipart/form-data.
std::string multipart_boundary(std::string_view content_type);

// Splits `body` at `boundary`; at most `max_parts` parts.
std::vector<FormPart> parse_multipart(std::string_view body, std::string_view boundary,
                                      size_t max_parts = 64);

}  // namespace oasr::server
