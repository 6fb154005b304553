// The Whisper search's decoder step on the real model: rows of a KvCache,
// each attending one encoder output row, one WhisperModel::decode call per
// step, KvCache::reorder_rows after a beam step.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/device_graph_cache.h"
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
  // What the step's CUDA graphs did so far (benchmarks, tests).
  DeviceGraphCache::Stats graph_stats() const { return graphs_->stats(); }

 private:
  // Where device graphs exist (CUDA) and the fused cached attention serves
  // the step (OASR_FUSED_ATTENTION on, its shapes): the step's kernels read
  // its position and cross rows on the device, and from a row count's
  // second step on they run as one recorded graph
  // (core/device_graph_cache.h; OASR_CUDA_GRAPHS=0 runs them eagerly, with
  // the same bits).
  bool device_step() const;

  const models::WhisperModel& model_;
  const models::WhisperModel::CrossKv& cross_;
  std::vector<int64_t> cross_rows_;
  layers::KvCache cache_;
  int64_t calls_ = 0;
  // Graphs of this step's cache and cross memory only: their addresses are
  // recorded, and both live as long as this object.
  std::unique_ptr<DeviceGraphCache> graphs_ = std::make_unique<DeviceGraphCache>();
};

// Row layout of whisper_search for `batch` utterances and `beams` beams:
// row b * beams + k attends encoder row b.
std::vector<int64_t> whisper_cross_rows(int64_t batch, int64_t beams);

}  // namespace oasr::decode
