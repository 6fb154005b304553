#include "models/whisper/whisper_model_step.h"

#include "core/error.h"

namespace oasr::decode {

WhisperModelStep::WhisperModelStep(const models::WhisperModel& model,
                                   const models::WhisperModel::CrossKv& cross,
                                   std::vector<int64_t> cross_rows, int64_t capacity_tokens)
    : model_(model),
      cross_(cross),
      cross_rows_(std::move(cross_rows)),
      cache_(model.make_cache(static_cast<int64_t>(cross_rows_.size()), capacity_tokens)) {}

Tensor WhisperModelStep::step(const Tensor& tokens) {
  ++calls_;
  const Tensor logits = model_.decode(tokens, cross_, cross_rows_, cache_);  // [R, n, V]
  // The last position's rows, where the model is served: on a device the
  // search reduces them there (decode/whisper_search.h).
  return logits.select(1, logits.size(1) - 1).contiguous();
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
