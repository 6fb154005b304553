// The Whisper search's decoder step on the real model: rows of a KvCache,
// each attending one encoder output row, one WhisperModel::decode call per
// step, KvCache::reorder_rows after a beam step.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "decode/whisper_search.h"
#include "layers/kv_cache.h"
#include "models/whisper/whisper_model.h"

namespace oasr::decode {

class WhisperModelStep final : public WhisperDecoderStep {
 public:
  // cross: the cross-attention keys/values of B encoder rows; row r of the
  // search attends encoder row cross_rows[r]. The cache holds
  // cross_rows.size() rows of capacity_tokens tokens (the search's max_length).
  WhisperModelStep(const models::WhisperModel& model, const models::WhisperModel::CrossKv& cross,
                   std::vector<int64_t> cross_rows, int64_t capacity_tokens);

  // Logits of the last position [R, V], on the model's device in its dtype.
  Tensor step(const Tensor& tokens) override;
  void reorder(std::span<const int64_t> source_rows) override;
  // On the CPU every row of a decode step is computed on its own (the
  // decoder's row-dot linears, per-row attention and norms), so dropping
  // finished rows leaves the others' bits unchanged; on CUDA the GEMMs'
  // algorithm is fixed per weight shape (ops/gemm.h), the same rule.
  bool retain(std::span<const int64_t> rows) override;

  const layers::KvCache& cache() const { return cache_; }
  int64_t calls() const { return calls_; }  // decoder calls so far (one per search step)

 private:
  const models::WhisperModel& model_;
  const models::WhisperModel::CrossKv& cross_;
  std::vector<int64_t> cross_rows_;
  layers::KvCache cache_;
  int64_t calls_ = 0;
};

// Row layout of whisper_search for `batch` utterances and `beams` beams:
// row b * beams + k attends encoder row b.
std::vector<int64_t> whisper_cross_rows(int64_t batch, int64_t beams);

}  // namespace oasr::decode
