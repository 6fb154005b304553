#include "models/whisper/whisper_model_step.h"

#include <algorithm>

#include "core/device_graph.h"
#include "core/env.h"
#include "core/error.h"
#include "ops/cached_attention.h"

namespace oasr::decode {

WhisperModelStep::WhisperModelStep(const models::WhisperModel& model,
                                   const models::WhisperModel::CrossKv& cross,
                                   std::vector<int64_t> cross_rows, int64_t capacity_tokens)
    : model_(model),
      cross_(cross),
      cross_rows_(std::move(cross_rows)),
      cache_(model.make_cache(static_cast<int64_t>(cross_rows_.size()), capacity_tokens)) {}

bool WhisperModelStep::device_step() const {
  // One path wherever graphs can be recorded, replayed or not
  // (OASR_CUDA_GRAPHS=0 runs the same kernels eagerly).
  // The step's attention must be the fused kernel there (it reads the
  // position on the device): its shapes are asked first.
  const layers::KvCache::Layout& layout = cache_.layout();
  const int64_t frames = cross_.keys.empty() ? 0 : cross_.keys.front().size(2);
  return device_graphs_supported(layout.device) && env::fused_attention_enabled() &&
         ops::cached_attention_shape_fusable(layout.head_dim,
                                             std::max(layout.capacity_tokens, frames));
}

Tensor WhisperModelStep::step(const Tensor& tokens) {
  ++calls_;
  // The last position's rows, where the model is served: on a device the
  // search reduces them there (decode/whisper_search.h).
  const auto last_position = [](const Tensor& logits) {  // [R, n, V] -> [R, V]
    return logits.select(1, logits.size(1) - 1).contiguous();
  };
  if (!device_step()) return last_position(model_.decode(tokens, cross_, cross_rows_, cache_));
  OASR_CHECK(tokens.defined() && tokens.dim() == 2 && tokens.size(1) > 0 &&
                 (tokens.dtype() == DType::kI64 || tokens.dtype() == DType::kI32),
             kInvalidArgument, "Whisper decode: tokens must be int64 [rows, n] with n >= 1, got ",
             tokens.defined() ? tokens.str() : std::string("undefined"));
  const int64_t past = cache_.length();
  const int64_t n = tokens.size(1);
  // A replay skips decode()'s host checks: the capacity (and so the learned
  // positions, make_cache() keeps it within them) is checked here first.
  OASR_CHECK(past + n <= cache_.capacity(), kInvalidArgument, "KV cache is full: it holds ", past,
             " tokens and ", n, " more would exceed its capacity of ", cache_.capacity(),
             " tokens; create the cache with a larger capacity (or stop decoding earlier)");
  // The ids are checked here, on the host: the step's embedding reads them
  // on the device without a copy back (ops::embedding_device_ids).
  const Tensor ids = tokens.to(Device::cpu()).to(DType::kI64).contiguous();
  const int64_t vocab = model_.config().vocab_size;
  for (int64_t i = 0; i < ids.numel(); ++i) {
    const int64_t id = ids.data<int64_t>()[i];
    OASR_CHECK(id >= 0 && id < vocab, kInvalidArgument, "Whisper decode: token id ", id,
               " (at flat position ", i, " of tokens ", shape_str(tokens.shape()),
               ") is outside the vocabulary [0, ", vocab, ")");
  }
  const Device device = cache_.layout().device;
  const std::vector<Tensor> inputs = {
      ids.to(device), Tensor::from_vector<int32_t>({static_cast<int32_t>(past)}, {1}).to(device),
      Tensor::from_vector<int64_t>(cross_rows_, {static_cast<int64_t>(cross_rows_.size())})
          .to(device)};
  const DeviceWork work = [&](const std::vector<Tensor>& in) {
    // A declined recording ran this host side already (its count included).
    cache_.truncate(past);
    const models::WhisperDeviceStep on_device{in[1], in[2]};
    return std::vector<Tensor>{
        last_position(model_.decode(in[0], cross_, cross_rows_, cache_, on_device))};
  };
  // The cross rows choose the host's checks only; the kernels read them on
  // the device. They are in the key so a graph is never replayed for a
  // mapping the host did not check with it.
  std::string key = "whisper decode rows";
  for (const int64_t r : cross_rows_) key += " " + std::to_string(r);
  Tensor logits = graphs_->run(key, device, work, inputs).front();
  // A replay wrote the step's keys and values on the device without running
  // the host side of `work`.
  if (cache_.length() == past) cache_.advance(n);
  return logits;
}

void WhisperModelStep::reorder(std::span<const int64_t> source_rows) {
  cache_.reorder_rows(source_rows);
}

bool WhisperModelStep::retain(std::span<const int64_t> rows) {
  cache_.retain_rows(rows);
  std::vector<int64_t> kept;
  kept.reserve(rows.size());
  for (const int64_t r : rows) kept.push_back(cross_rows_[static_cast<size_t>(r)]);
  cross_rows_ = std::move(kept);
  return true;
}

std::vector<int64_t> whisper_cross_rows(int64_t batch, int64_t beams) {
  OASR_CHECK(batch >= 1 && beams >= 1, kInvalidArgument, "whisper_cross_rows: batch ", batch,
             " and beams ", beams, " must be >= 1");
  std::vector<int64_t> rows;
  rows.reserve(static_cast<size_t>(batch * beams));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t k = 0; k < beams; ++k) rows.push_back(b);
  }
  return rows;
}

}  // namespace oasr::decode
