// multipart/form-data parsing; see multipart.h.
#include "server/multipart.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace oasr::server {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// The value of `key` among `; key=value` parameters (quotes removed); empty
// when absent. Parameter names compare case-insensitively.
std::string parameter(std::string_view header_value, std::string_view key) {
  size_t pos = header_value.find(';');
  while (pos != std::string_view::npos) {
    std::string_view rest = header_value.substr(pos + 1);
    size_t end = 0;
    bool quoted = false;
    while (end < rest.size() && (quoted || rest[end] != ';')) {
      if (rest[end] == '"') quoted = !quoted;
      if (quoted && rest[end] == '\\' && end + 1 < rest.size()) ++end;
      ++end;
    }
    const std::string_view item = trim(rest.substr(0, end));
    const size_t equals = item.find('=');
    if (equals != std::string_view::npos && lower(trim(item.substr(0, equals))) == key) {
      std::string_view value = trim(item.substr(equals + 1));
      if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
        std::string unquoted;
        for (size_t i = 1; i + 1 < value.size(); ++i) {
          if (value[i] == '\\' && i + 2 < value.size()) ++i;
          unquoted += value[i];
        }
        return unquoted;
      }
      return std::string(value);
    }
    pos = end < rest.size() ? pos + 1 + end : std::string_view::npos;
  }
  return {};
}

}  // namespace

std::string multipart_boundary(std::string_view content_type) {
  const std::string_view type = trim(content_type.substr(0, content_type.find(';')));
  OASR_CHECK(lower(type) == "multipart/form-data", kInvalidArgument, "Content-Type '", content_type,
             "': the request body must be multipart/form-data (a form with a 'file' field)");
  std::string boundary = parameter(content_type, "boundary");
  OASR_CHECK(!boundary.empty() && boundary.size() <= 200, kInvalidArgument, "Content-Type '",
             content_type,
             "': multipart/form-data needs a boundary= parameter of 1-200 characters");
  return boundary;
}

std::vector<FormPart> parse_multipart(std::string_view body, std::string_view boundary,
                                      size_t max_parts) {
  const std::string delimiter = "--" + std::string(boundary);
  // The first delimiter may follow a preamble; RFC 2046 lets senders put text there.
  size_t pos = body.find(delimiter);
  OASR_CHECK(pos != std::string_view::npos, kInvalidArgument,
             "multipart body: the boundary from Content-Type never occurs in the body");
  std::vector<FormPart> parts;
  const std::string next_delimiter = "\r\n" + delimiter;
  while (true) {
    pos += delimiter.size();
    OASR_CHECK(pos + 2 <= body.size(), kInvalidArgument,
               "multipart body ends after a boundary (the upload was truncated)");
    if (body.substr(pos, 2) == "--") return parts;  // the closing delimiter
    // Transport padding then CRLF after the delimiter.
    while (pos < body.size() && (body[pos] == ' ' || body[pos] == '\t')) ++pos;
    OASR_CHECK(body.substr(pos, 2) == "\r\n", kInvalidArgument,
               "multipart body: a boundary line is not followed by CRLF");
    pos += 2;
    OASR_CHECK(parts.size() < max_parts, kInvalidArgument, "multipart body: more than ", max_parts,
               " parts; the transcription API takes a handful of fields");
    FormPart part;
    bool disposition = false;
    // Part headers, up to the empty line.
    while (true) {
      const size_t line_end = body.find("\r\n", pos);
      OASR_CHECK(line_end != std::string_view::npos, kInvalidArgument,
                 "multipart body ends inside a part's headers (the upload was truncated)");
      const std::string_view line = body.substr(pos, line_end - pos);
      pos = line_end + 2;
      if (line.empty()) break;
      const size_t colon = line.find(':');
      OASR_CHECK(colon != std::string_view::npos, kInvalidArgument,
                 "multipart body: a part header line has no ':'");
      const std::string header = lower(trim(line.substr(0, colon)));
      const std::string_view value = trim(line.substr(colon + 1));
      if (header == "content-disposition") {
        OASR_CHECK(lower(trim(value.substr(0, value.find(';')))) == "form-data", kInvalidArgument,
                   "multipart body: a part's Content-Disposition is '", value, "', not form-data");
        part.name = parameter(value, "name");
        part.filename = parameter(value, "filename");
        disposition = true;
      } else if (header == "content-type") {
        part.content_type = std::string(value);
      }
    }
    OASR_CHECK(disposition && !part.name.empty(), kInvalidArgument, "multipart body: part ",
               parts.size() + 1, " has no Content-Disposition: form-data; name=\"...\"");
    const size_t data_end = body.find(next_delimiter, pos);
    OASR_CHECK(data_end != std::string_view::npos, kInvalidArgument, "multipart body: field '",
               part.name, "' is not closed by the boundary (the upload was truncated)");
    part.data = body.substr(pos, data_end - pos);
    parts.push_back(std::move(part));
    pos = data_end + 2;  // at the delimiter
  }
}

}  // namespace oasr::server
