#include "models/qwen2_audio/qwen2_audio_generation.h"

#include <algorithm>

#include "core/error.h"
#include "ops/top_candidates.h"

namespace oasr::models {
namespace {

layers::PagedKvCache make_pool(const Qwen2AudioModel& model, const Qwen2AudioBatchLimits& limits) {
  OASR_CHECK(limits.max_running >= 1 && limits.blocks >= 1 && limits.block_size >= 1,
             kInvalidArgument,
             "Qwen2-Audio generation: max_running, blocks and block_size must be positive, got ",
             limits.max_running, ", ", limits.blocks, ", ", limits.block_size);
  return model.make_cache(limits.blocks, limits.block_size);
}

// The argmax of each row of logits [S, V] (the first of equal maxima, as
// torch.argmax), computed where the logits are; one token a row to the host.
std::vector<int64_t> argmax_rows(const Tensor& logits) {
  const ops::TopCandidates best =
      ops::top_candidates(logits, Tensor(), Tensor(), 1, ops::CandidateRank::kByLogit);
  const auto* p = best.tokens.data<int64_t>();
  return {p, p + best.tokens.numel()};
}

}  // namespace

Qwen2AudioContinuousBatch::Qwen2AudioContinuousBatch(const Qwen2AudioModel& model,
                                                     std::vector<int64_t> eos_token_ids,
                                                     const Qwen2AudioBatchLimits& limits)
    : model_(model),
      eos_(std::move(eos_token_ids)),
      limits_(limits),
      cache_(make_pool(model, limits)) {}

void Qwen2AudioContinuousBatch::check_fits(int64_t prompt, int64_t max_new_tokens) const {
  const int64_t positions = model_.config().text.max_position_embeddings;
  OASR_CHECK(prompt >= 1 && prompt < positions, kInvalidArgument, "Qwen2-Audio generation: a ",
             prompt, "-token prompt does not leave room in the LM's ", positions, " positions");
  OASR_CHECK(max_new_tokens >= 1, kInvalidArgument,
             "Qwen2-Audio generation: max_new_tokens must be at least 1, got ", max_new_tokens);
  const int64_t longest = std::min(prompt + max_new_tokens, positions);
  OASR_CHECK(cache_.blocks_for(longest) <= limits_.blocks, kInvalidArgument,
             "Qwen2-Audio generation: a ", prompt, "-token prompt with max_new_tokens ",
             max_new_tokens, " may need ", cache_.blocks_for(longest), " KV blocks of ",
             limits_.block_size, " tokens but the pool has ", limits_.blocks,
             "; lower max_new_tokens or give the cache more blocks");
}

int64_t Qwen2AudioContinuousBatch::submit(Qwen2AudioRequest request) {
  check_fits(static_cast<int64_t>(request.ids.size()), request.max_new_tokens);
  const int64_t ticket = next_ticket_++;
  waiting_.push_back({ticket, std::move(request)});
  return ticket;
}

bool Qwen2AudioContinuousBatch::take_token(Running& running, int64_t token) const {
  if (std::find(eos_.begin(), eos_.end(), token) != eos_.end()) return true;
  running.tokens.push_back(token);
  if (static_cast<int64_t>(running.tokens.size()) >= running.request.max_new_tokens) return true;
  // The LM's last position: the next step would pass it.
  return cache_.length(running.sequence) >= model_.config().text.max_position_embeddings;
}

void Qwen2AudioContinuousBatch::admit(std::vector<Finished>& finished) {
  while (!waiting_.empty() && static_cast<int64_t>(running_.size()) < limits_.max_running) {
    const Qwen2AudioRequest& next = waiting_.front().request;
    // Its prompt and first generated token, and a block of headroom for each
    // sequence already running.
    const int64_t need = cache_.blocks_for(static_cast<int64_t>(next.ids.size()) + 1);
    if (cache_.free_blocks() - static_cast<int64_t>(running_.size()) < need) break;
    Waiting admitted = std::move(waiting_.front());
    waiting_.pop_front();
    Running running{admitted.ticket, std::move(admitted.request), cache_.open(), {}};
    const layers::PagedKvCache::SequenceId sequence = running.sequence;
    int64_t first = 0;
    try {
      const Tensor embeds = model_.embed_prompt(running.request.ids, running.request.audio);
      first = argmax_rows(model_.forward(embeds.unsqueeze(0), std::span(&sequence, 1), cache_))[0];
    } catch (...) {
      // The request waits again at the front, its blocks back in the pool.
      cache_.release(sequence);
      waiting_.push_front({running.ticket, std::move(running.request)});
      throw;
    }
    ++stats_.prefills;
    if (take_token(running, first)) {
      cache_.release(sequence);
      finished.push_back({running.ticket, std::move(running.tokens)});
      continue;
    }
    running_.push_back(std::move(running));
  }
  stats_.most_running = std::max(stats_.most_running, static_cast<int64_t>(running_.size()));
}

void Qwen2AudioContinuousBatch::preempt_newest() {
  Running newest = std::move(running_.back());
  running_.pop_back();
  cache_.release(newest.sequence);
  waiting_.push_front({newest.ticket, std::move(newest.request)});
  ++stats_.preemptions;
}

std::vector<Qwen2AudioContinuousBatch::Finished> Qwen2AudioContinuousBatch::iterate() {
  std::vector<Finished> finished;
  admit(finished);
  if (running_.empty()) return finished;
  std::vector<layers::PagedKvCache::SequenceId> sequences;
  const auto gather = [&] {
    sequences.clear();
    for (const Running& r : running_) sequences.push_back(r.sequence);
  };
  gather();
  while (running_.size() > 1 && cache_.blocks_needed(sequences, 1) > cache_.free_blocks()) {
    preempt_newest();
    gather();
  }
  std::vector<int64_t> inputs;
  for (const Running& r : running_) inputs.push_back(r.tokens.back());
  const Tensor logits = model_.step(
      Tensor::from_vector(inputs, {static_cast<int64_t>(inputs.size())}), sequences, cache_);
  ++stats_.decode_steps;
  const std::vector<int64_t> next = argmax_rows(logits);
  std::vector<Running> still;
  for (size_t r = 0; r < running_.size(); ++r) {
    Running& running = running_[r];
    if (take_token(running, next[r])) {
      cache_.release(running.sequence);
      finished.push_back({running.ticket, std::move(running.tokens)});
    } else {
      still.push_back(std::move(running));
    }
  }
  running_ = std::move(still);
  return finished;
}

}  // namespace oasr::models
