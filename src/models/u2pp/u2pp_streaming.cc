#include "models/u2pp/u2pp_streaming.h"

#include <algorithm>

#include "core/error.h"
#include "models/u2pp/u2pp_blocks.h"
#include "ops/concat.h"

namespace oasr::models {

U2ppStreamingEncoder::U2ppStreamingEncoder(const ConformerEncoder& encoder,
                                           int64_t decoding_chunk_size,
                                           int64_t num_decoding_left_chunks)
    : encoder_(encoder),
      chunk_(decoding_chunk_size),
      required_cache_size_(decoding_chunk_size * num_decoding_left_chunks),
      feature_dim_(encoder.config().input_dim) {
  OASR_CHECK(decoding_chunk_size > 0, kInvalidArgument,
             "U2++ streaming: decoding_chunk_size must be positive, got ", decoding_chunk_size);
  OASR_CHECK(encoder.config().use_dynamic_chunk || encoder.config().static_chunk_size > 0,
             kUnsupported,
             "U2++ streaming: the model was trained without chunks (use_dynamic_chunk false, "
             "static_chunk_size 0), so it cannot stream");
  const SubsamplingGeometry geometry = encoder.subsampling();
  context_ = geometry.right_context + 1;
  stride_ = geometry.rate * chunk_;
  window_ = (chunk_ - 1) * geometry.rate + context_;
}

void U2ppStreamingEncoder::reset() {
  buffer_.clear();
  att_cache_ = Tensor();
  cnn_cache_ = Tensor();
  offset_ = 0;
  consumed_ = 0;
  input_finished_ = false;
  finished_ = false;
}

int64_t U2ppStreamingEncoder::restart_segment() {
  att_cache_ = Tensor();
  cnn_cache_ = Tensor();
  offset_ = 0;
  return consumed_;
}

void U2ppStreamingEncoder::check_frames(const Tensor& fbank) const {
  OASR_CHECK(!finished_ && !input_finished_, kInvalidArgument,
             "U2++ streaming: frames after the end of input; call reset() for a new utterance");
  const bool rank2 = fbank.dim() == 2;
  OASR_CHECK((rank2 || (fbank.dim() == 3 && fbank.size(0) == 1)) &&
                 fbank.size(-1) == feature_dim_ && fbank.dtype() == DType::kF32 &&
                 fbank.device().is_cpu(),
             kInvalidArgument, "U2++ streaming: fbank must be host float32 [n, ", feature_dim_,
             "] or [1, n, ", feature_dim_, "], got ", fbank.str());
}

void U2ppStreamingEncoder::append(const Tensor& fbank) {
  check_frames(fbank);
  const Tensor frames = fbank.contiguous();
  const float* data = frames.data<float>();
  buffer_.insert(buffer_.end(), data, data + frames.numel());
}

Tensor U2ppStreamingEncoder::accept(const Tensor& fbank) {
  append(fbank);
  return drain();
}

void U2ppStreamingEncoder::finish_input() {
  OASR_CHECK(!finished_ && !input_finished_, kInvalidArgument,
             "U2++ streaming: the end of input was already given");
  input_finished_ = true;
}

Tensor U2ppStreamingEncoder::finish() {
  OASR_CHECK(!finished_, kInvalidArgument, "U2++ streaming: finish() called twice");
  if (!input_finished_) finish_input();
  Tensor out = drain();
  finished_ = true;
  return out;
}

Tensor U2ppStreamingEncoder::next_window() {
  const int64_t available = static_cast<int64_t>(buffer_.size()) / feature_dim_;
  // forward_chunk_by_chunk starts a window wherever `context` frames
  // remain; before the end of input only complete windows can run.
  if (available < (input_finished_ ? context_ : window_)) return Tensor();
  const int64_t frames = std::min(window_, available);
  Tensor window = Tensor::from_vector<float>(
      std::vector<float>(buffer_.begin(), buffer_.begin() + frames * feature_dim_),
      {1, frames, feature_dim_});
  auto chunk =
      encoder_.forward_chunk(window, offset_, required_cache_size_, att_cache_, cnn_cache_);
  att_cache_ = chunk.att_cache;
  cnn_cache_ = chunk.cnn_cache;
  offset_ += chunk.out.size(1);
  const int64_t consumed = std::min(stride_, available);
  buffer_.erase(buffer_.begin(), buffer_.begin() + consumed * feature_dim_);
  consumed_ += consumed;
  return chunk.out;
}

Tensor U2ppStreamingEncoder::drain() {
  std::vector<Tensor> outputs;
  for (Tensor out = next_window(); out.defined(); out = next_window()) outputs.push_back(out);
  if (outputs.empty()) {
    return Tensor::empty({1, 0, encoder_.output_size()}, encoder_.dtype(), encoder_.device());
  }
  return outputs.size() == 1 ? outputs.front() : ops::concat(outputs, 1);
}

}  // namespace oasr::models
