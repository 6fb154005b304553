#include "asr/recognizer.h"

#include "core/error.h"
#include "quantize/apply.h"

namespace oasr::engine {

std::unique_ptr<StreamingSession> Recognizer::start_session(const DecodeOptions&) const {
  OASR_THROW(kUnsupported, "this architecture has no streaming session");
}

std::unique_ptr<ContinuousDecoder> Recognizer::start_continuous(const DecodeOptions&,
                                                                int64_t) const {
  OASR_THROW(kUnsupported, "this architecture has no iteration-level (continuous) decoding");
}

quant::QuantizationInfo Recognizer::quantization_info() const {
  return quant::quantization_info(module(), quantization_spec());
}

}  // namespace oasr::engine
