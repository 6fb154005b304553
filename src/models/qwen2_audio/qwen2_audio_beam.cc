#include "models/qwen2_audio/qwen2_audio_beam.h"

#include <algorithm>

#include "core/error.h"
#include "decode/whisper_search.h"
#include "ops/concat.h"

namespace oasr::models {
namespace {

using SequenceId = layers::PagedKvCache::SequenceId;

// The K beams of one request as K sequences of `cache` (row k = beam k).
class BeamStep final : public decode::WhisperDecoderStep {
 public:
  BeamStep(const Qwen2AudioModel& model, layers::PagedKvCache& cache,
           const Qwen2AudioRequest& request, int64_t beams)
      : model_(model), cache_(cache), request_(request), beams_(beams) {}
  ~BeamStep() override {
    for (const SequenceId id : rows_) cache_.release(id);
  }
  BeamStep(const BeamStep&) = delete;
  BeamStep& operator=(const BeamStep&) = delete;

  Tensor step(const Tensor& tokens) override {
    if (rows_.empty()) {
      // The prompt (every row holds the same one): computed for the first
      // beam, forked for the others, its logits repeated.
      rows_.push_back(cache_.open());
      const Tensor embeds = model_.embed_prompt(request_.ids, request_.audio);
      const Tensor logits = model_.forward(embeds.unsqueeze(0), std::span(rows_.data(), 1), cache_);
      while (static_cast<int64_t>(rows_.size()) < beams_) rows_.push_back(cache_.fork(rows_[0]));
      return ops::concat(std::vector<Tensor>(static_cast<size_t>(beams_), logits), 0);
    }
    return model_.step(tokens.contiguous().view({beams_}), rows_, cache_);
  }

  void reorder(std::span<const int64_t> source_rows) override {
    // The first beam continuing a sequence takes it; later ones fork it. A
    // sequence nobody continues is released first, so its blocks can serve
    // the forks' copies.
    std::vector<uint8_t> taken(rows_.size(), 0);
    for (const int64_t source : source_rows) taken[static_cast<size_t>(source)] = 1;
    for (size_t s = 0; s < rows_.size(); ++s) {
      if (taken[s] == 0) cache_.release(rows_[s]);
    }
    std::vector<SequenceId> next(rows_.size());
    std::vector<uint8_t> kept(rows_.size(), 0);
    for (size_t r = 0; r < source_rows.size(); ++r) {
      const auto source = static_cast<size_t>(source_rows[r]);
      if (kept[source] == 0) {
        next[r] = rows_[source];
        kept[source] = 1;
      } else {
        next[r] = cache_.fork(rows_[source]);
      }
    }
    rows_ = std::move(next);
  }

 private:
  const Qwen2AudioModel& model_;
  layers::PagedKvCache& cache_;
  const Qwen2AudioRequest& request_;
  int64_t beams_;
  std::vector<SequenceId> rows_;
};

}  // namespace

Qwen2AudioBeamResult qwen2_audio_beam_search(const Qwen2AudioModel& model,
                                             const Qwen2AudioRequest& request,
                                             const Qwen2AudioBeamOptions& options) {
  OASR_CHECK(options.beams >= 2, kInvalidArgument,
             "Qwen2-Audio beam search needs at least 2 beams (1 is greedy search), got ",
             options.beams);
  OASR_CHECK(!options.eos_token_ids.empty(), kInvalidArgument,
             "Qwen2-Audio beam search: generation_config.json names no eos_token_id");
  const auto prompt = static_cast<int64_t>(request.ids.size());
  const int64_t positions = model.config().text.max_position_embeddings;
  OASR_CHECK(prompt >= 1 && prompt < positions, kInvalidArgument, "Qwen2-Audio beam search: a ",
             prompt, "-token prompt does not leave room in the LM's ", positions, " positions");
  decode::WhisperSearchOptions search;
  search.prompt = request.ids;
  search.eos_token_id = options.eos_token_ids.front();
  search.more_eos_token_ids.assign(options.eos_token_ids.begin() + 1, options.eos_token_ids.end());
  search.pad_token_id = options.eos_token_ids.front();  // HF pads with eos when pad is unset
  search.max_length = std::min(prompt + request.max_new_tokens, positions);
  search.num_beams = options.beams;
  search.length_penalty = options.length_penalty;
  // The pool: the prompt's blocks once, and for each beam its generated
  // tokens, the copy of a partial block a fork makes, and one block of slack
  // for the step in flight.
  constexpr int64_t kBlockSize = 16;
  const int64_t generated_blocks = (request.max_new_tokens + kBlockSize - 1) / kBlockSize;
  const int64_t blocks =
      (prompt + kBlockSize - 1) / kBlockSize + options.beams * (generated_blocks + 2);
  layers::PagedKvCache cache = model.make_cache(blocks, kBlockSize);
  BeamStep step(model, cache, request, options.beams);
  const decode::WhisperHypothesis best = decode::whisper_beam_search(step, 1, search).front();
  return {best.tokens, best.score};
}

}  // namespace oasr::models
