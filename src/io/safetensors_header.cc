#include "io/safetensors_header.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/json_error.h"
#include "io/tensor_extent.h"

namespace oasr::io::detail {

namespace {

// Ordered, so tensors sharing an offset (empty ones) keep the header's order.
using json = nlohmann::ordered_json;

// Dtype names the safetensors format defines that oasr has no DType for. A
// file using one is well formed, so it is refused as unsupported rather than
// as corrupt.
constexpr std::string_view kForeignSafetensorsDtypes[] = {
    "BOOL", "I16",     "U16",     "U32",     "U64",     "F64",
    "C64",  "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4"};

std::string known_dtype_list() {
  std::string list;
  for (DType d : kAllDTypes) {
    if (!list.empty()) list += ", ";
    list += dtype_safetensors_name(d);
  }
  return list;
}

// A JSON value for an error message, cut short so a huge value cannot flood it.
std::string excerpt(const json& value) {
  std::string text = value.dump();
  constexpr size_t kMax = 60;
  if (text.size() > kMax) text = text.substr(0, kMax) + "...";
  return text;
}

std::string range_str(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

// A non-negative JSON integer (nlohmann parses those as number_unsigned).
bool is_count(const json& value) {
  return value.is_number_unsigned();
}

struct EntryParser {
  const std::string& file;
  uint64_t data_bytes;

  [[noreturn]] void fail(const std::string& name, const std::string& defect) const {
    OASR_THROW(kCorruptFile, file, ": tensor '", name, "': ", defect);
  }

  DType parse_dtype(const std::string& name, const json& entry) const {
    const auto it = entry.find("dtype");
    if (it == entry.end()) fail(name, "the entry has no \"dtype\"");
    if (!it->is_string()) fail(name, "\"dtype\" must be a string, got " + excerpt(*it));
    const std::string text = it->get<std::string>();
    if (const auto dtype = parse_safetensors_dtype(text)) return *dtype;
    const bool foreign =
        std::find(std::begin(kForeignSafetensorsDtypes), std::end(kForeignSafetensorsDtypes),
                  text) != std::end(kForeignSafetensorsDtypes);
    if (foreign) {
      OASR_THROW(kUnsupported, file, ": tensor '", name, "' has dtype '", text,
                 "', which oasr does not support (supported: ", known_dtype_list(), ")");
    }
    fail(name, "unknown dtype '" + text + "' (known: " + known_dtype_list() + ")");
  }

  Shape parse_shape(const std::string& name, const json& entry) const {
    const auto it = entry.find("shape");
    if (it == entry.end()) fail(name, "the entry has no \"shape\"");
    const std::string expected = "\"shape\" must be an array of non-negative integers, got ";
    if (!it->is_array()) fail(name, expected + excerpt(*it));
    Shape shape;
    for (const json& dim : *it) {
      if (!is_count(dim) ||
          dim.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        fail(name, expected + excerpt(*it));
      }
      shape.push_back(static_cast<int64_t>(dim.get<uint64_t>()));
    }
    return shape;
  }

  std::pair<uint64_t, uint64_t> parse_offsets(const std::string& name, const json& entry) const {
    const auto it = entry.find("data_offsets");
    if (it == entry.end()) fail(name, "the entry has no \"data_offsets\"");
    if (!it->is_array() || it->size() != 2 || !is_count((*it)[0]) || !is_count((*it)[1])) {
      fail(name,
           "\"data_offsets\" must be two non-negative integers [begin, end], got " + excerpt(*it));
    }
    const uint64_t begin = (*it)[0].get<uint64_t>();
    const uint64_t end = (*it)[1].get<uint64_t>();
    if (begin > end) {
      fail(name, "data_offsets " + range_str(begin, end) + " begin after they end");
    }
    return {begin, end};
  }

  // The byte count a dtype and shape need, refusing sizes that overflow.
  uint64_t needed_bytes(const std::string& name, DType dtype, const Shape& shape) const {
    const std::optional<uint64_t> bytes = tensor_nbytes(shape, dtype_size(dtype));
    if (!bytes) fail(name, "shape " + shape_str(shape) + " is too large to address");
    return *bytes;
  }

  TensorInfo parse(const std::string& name, const json& entry) const {
    if (!entry.is_object()) {
      fail(name, std::string("the entry is a JSON ") + entry.type_name() +
                     ", expected an object with dtype, shape and data_offsets");
    }
    TensorInfo info;
    info.name = name;
    info.dtype = parse_dtype(name, entry);
    info.shape = parse_shape(name, entry);
    const auto [begin, end] = parse_offsets(name, entry);
    const uint64_t needed = needed_bytes(name, info.dtype, info.shape);
    if (end - begin != needed) {
      std::ostringstream defect;
      defect << "data " << range_str(begin, end) << " holds " << end - begin << " bytes but "
             << dtype_safetensors_name(info.dtype) << " " << shape_str(info.shape) << " needs "
             << needed << " (" << shape_numel(info.shape) << " elements of "
             << dtype_size(info.dtype) << " bytes)";
      fail(name, defect.str());
    }
    if (end > data_bytes) {
      OASR_THROW(kCorruptFile, file, ": tensor '", name, "' data ", range_str(begin, end),
                 " ends past the end of the file (", data_bytes,
                 " data bytes): the file is truncated");
    }
    info.data_begin = static_cast<size_t>(begin);
    info.data_end = static_cast<size_t>(end);
    return info;
  }
};

std::map<std::string, std::string> parse_metadata(const std::string& file, const json& value) {
  OASR_CHECK(value.is_object(), kCorruptFile, file,
             ": \"__metadata__\" must be an object of string values, got a JSON ",
             value.type_name());
  std::map<std::string, std::string> metadata;
  for (const auto& [key, item] : value.items()) {
    OASR_CHECK(item.is_string(), kCorruptFile, file, ": \"__metadata__\" value of '", key,
               "' must be a string, got ", excerpt(item));
    metadata.emplace(key, item.get<std::string>());
  }
  return metadata;
}

// Two tensors may not share bytes (empty ranges share none).
void check_no_overlap(const std::string& file, const std::vector<TensorInfo>& sorted) {
  const TensorInfo* furthest = nullptr;  // the tensor reaching furthest so far
  for (const TensorInfo& info : sorted) {
    if (info.data_begin == info.data_end) continue;
    if (furthest != nullptr && info.data_begin < furthest->data_end) {
      OASR_THROW(kCorruptFile, file, ": tensors '", furthest->name, "' data ",
                 range_str(furthest->data_begin, furthest->data_end), " and '", info.name,
                 "' data ", range_str(info.data_begin, info.data_end), " overlap");
    }
    if (furthest == nullptr || info.data_end > furthest->data_end) furthest = &info;
  }
}

}  // namespace

uint64_t parse_header_length(const std::string& file_label, const unsigned char* prefix,
                             uint64_t file_size) {
  OASR_CHECK(file_size >= kHeaderLengthPrefixBytes, kCorruptFile, file_label, ": the file is ",
             file_size,
             " bytes, shorter than the 8-byte header length: it is truncated or "
             "not a safetensors file");
  uint64_t length = 0;
  for (size_t i = 0; i < kHeaderLengthPrefixBytes; ++i) {
    length |= static_cast<uint64_t>(prefix[i]) << (8 * i);
  }
  // "{}" is the smallest header there is.
  OASR_CHECK(length >= 2, kCorruptFile, file_label, ": header length ", length,
             " is too small for a JSON object: not a safetensors file");
  OASR_CHECK(length <= kMaxHeaderBytes, kCorruptFile, file_label, ": header length ", length,
             " is absurd (the limit is ", kMaxHeaderBytes,
             " bytes): the file is corrupt or not a safetensors file");
  OASR_CHECK(length <= file_size - kHeaderLengthPrefixBytes, kCorruptFile, file_label,
             ": header length ", length, " exceeds the ", file_size - kHeaderLengthPrefixBytes,
             " bytes after the length prefix: the file is truncated inside its header");
  return length;
}

SafeTensorsHeader parse_header_json(const std::string& file_label, std::string_view json_text,
                                    uint64_t data_bytes) {
  // Duplicate top-level keys would make a tensor name ambiguous; nlohmann
  // keeps the last silently, so they are caught while parsing.
  std::set<std::string> seen_keys;
  std::string duplicate;
  const json::parser_callback_t track_keys = [&](int depth, json::parse_event_t event,
                                                 json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key && duplicate.empty()) {
      const std::string key = parsed.get<std::string>();
      if (!seen_keys.insert(key).second) duplicate = key;
    }
    return true;
  };
  json header;
  try {
    header = json::parse(json_text.begin(), json_text.end(), track_keys);
  } catch (const json::exception& e) {
    OASR_THROW(kCorruptFile, file_label, ": the header is not valid JSON (", json_error_text(e),
               "): the file is corrupt or not a safetensors file");
  }
  OASR_CHECK(header.is_object(), kCorruptFile, file_label, ": the header is a JSON ",
             header.type_name(), ", expected an object of tensor entries");
  OASR_CHECK(duplicate.empty(), kCorruptFile, file_label, ": the header lists '", duplicate,
             "' twice");

  SafeTensorsHeader result;
  result.header_bytes = json_text.size();
  result.data_bytes = data_bytes;
  const EntryParser entries{file_label, data_bytes};
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      result.metadata = parse_metadata(file_label, value);
    } else {
      result.tensors.push_back(entries.parse(name, value));
    }
  }
  std::stable_sort(result.tensors.begin(), result.tensors.end(),
                   [](const TensorInfo& a, const TensorInfo& b) {
                     if (a.data_begin != b.data_begin) return a.data_begin < b.data_begin;
                     return a.data_end < b.data_end;
                   });
  check_no_overlap(file_label, result.tensors);
  return result;
}

}  // namespace oasr::io::detail
