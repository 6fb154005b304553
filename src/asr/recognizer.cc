#include "asr/recognizer.h"

#include <algorithm>
#include <numeric>

#include "core/cancellation.h"
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

std::vector<Transcript> transcribe_in_length_buckets(
    const std::vector<Tensor>& feats, int64_t max_batch_size,
    const std::function<std::vector<Transcript>(const std::vector<Tensor>& batch)>& decode_batch) {
  OASR_CHECK(max_batch_size >= 1, kInvalidArgument, "max_batch_size must be >= 1, got ",
             max_batch_size);
  std::vector<size_t> order(feats.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return feats[a].size(0) > feats[b].size(0); });
  std::vector<Transcript> results(feats.size());
  const size_t batch = static_cast<size_t>(max_batch_size);
  for (size_t start = 0; start < order.size(); start += batch) {
    throw_if_cancelled();
    const size_t end = std::min(order.size(), start + batch);
    std::vector<Tensor> group;
    for (size_t i = start; i < end; ++i) group.push_back(feats[order[i]]);
    std::vector<Transcript> decoded = decode_batch(group);
    for (size_t i = start; i < end; ++i) results[order[i]] = std::move(decoded[i - start]);
  }
  return results;
}

}  // namespace oasr::engine
