#include "models/u2pp/model_source.h"

#include "core/error.h"

namespace oasr::models {

const char* to_string(CheckpointFormat format) {
  return format == CheckpointFormat::kNative ? "native" : "wenet";
}

}  // namespace oasr::models
