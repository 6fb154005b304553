#include "engine/recognizer.h"

#include <deque>
#include <utility>

#include "core/error.h"
#include "models/architecture.h"
#include "models/u2pp/native_checkpoint.h"
#include "models/u2pp/u2pp_recognizer.h"
#include "models/whisper/whisper_convert.h"
#include "models/whisper/whisper_recognizer.h"
#include "quant/apply.h"

namespace oasr::engine {
namespace {

struct RegisteredRecognizer {
  std::string architecture;
  RecognizerFactory factory;
  std::vector<std::string> decode_methods;
};

// Deque: a registration never moves the factories handed out before it.
std::deque<RegisteredRecognizer>& registry() {
  static std::deque<RegisteredRecognizer> recognizers = [] {
    std::deque<RegisteredRecognizer> builtins;
    builtins.push_back({models::kU2ppArchitectureName, u2pp_recognizer_factory(),
                        U2ppRecognizer::decode_methods()});
    builtins.push_back({models::kWhisperArchitectureName, whisper_recognizer_factory(),
                        WhisperRecognizer::decode_methods()});
    return builtins;
  }();
  return recognizers;
}

}  // namespace

std::unique_ptr<StreamingSession> Recognizer::start_session(const DecodeOptions&) const {
  OASR_THROW(kUnsupported, "this architecture has no streaming session");
}

quant::QuantizationInfo Recognizer::quantization_info() const {
  return quant::quantization_info(module(), quantization_spec());
}

void register_recognizer(std::string architecture, RecognizerFactory factory,
                         std::vector<std::string> decode_methods) {
  OASR_CHECK(!architecture.empty() && factory, kInvalidArgument, "register_recognizer: '",
             architecture, "' needs an architecture name and a factory");
  OASR_CHECK(find_recognizer(architecture) == nullptr, kInvalidArgument,
             "register_recognizer: a recognizer for '", architecture, "' is already registered");
  registry().push_back({std::move(architecture), std::move(factory), std::move(decode_methods)});
}

const RecognizerFactory* find_recognizer(std::string_view architecture) {
  for (const RegisteredRecognizer& entry : registry()) {
    if (entry.architecture == architecture) return &entry.factory;
  }
  return nullptr;
}

std::string architectures_taking(std::string_view method) {
  std::string names;
  for (const RegisteredRecognizer& entry : registry()) {
    for (const std::string& taken : entry.decode_methods) {
      if (taken != method) continue;
      const models::Architecture* architecture = models::find_architecture(entry.architecture);
      names += (names.empty() ? "" : ", ") +
               (architecture != nullptr ? architecture->display_name : entry.architecture);
      break;
    }
  }
  return names;
}

}  // namespace oasr::engine
