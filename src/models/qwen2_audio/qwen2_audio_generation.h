// Iteration-level (continuous) batching of Qwen2-Audio's greedy generation:
// requests join the running batch at any decode step and leave it the step
// they finish, giving their KV blocks back at once (layers/paged_kv_cache.h).
//
//   Qwen2AudioContinuousBatch run(model, eos, {.max_running = 16, .blocks = 4096});
//   run.submit({prompt_ids, audio_tokens, max_new_tokens});  // any time
//   while (!run.idle()) for (auto& done : run.iterate()) ...;  // done.ticket, done.tokens
//
// One iteration admits waiting requests in arrival order while fewer than
// max_running run and the pool keeps a block of headroom for each running
// sequence; each admitted prompt is prefilled on its own (one forward over
// its n tokens). Then every running sequence takes one decode step together
// (one forward over [S, 1]); each row's next token is the argmax of its own
// logits. When a step needs more blocks than are free, the most recently
// admitted sequence is preempted: its blocks go back and the request waits
// at the front of the queue to start over. Each row's computation reads only
// its own sequence (the GEMMs are row-independent, the attention reads each
// sequence's own blocks), so a request's tokens do not depend on what else
// runs, when it joined, or whether it was preempted (tests/oracle/
// test_qwen2_audio.cc checks that).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "layers/paged_kv_cache.h"
#include "models/qwen2_audio/qwen2_audio_model.h"

namespace oasr::models {

struct Qwen2AudioRequest {
  std::vector<int64_t> ids;  // the prompt, audio placeholders expanded
  Tensor audio;              // the audio tokens the placeholders take (encode_audio's)
  int64_t max_new_tokens = 1;
};

struct Qwen2AudioBatchLimits {
  int64_t max_running = 1;  // sequences decoded together
  int64_t blocks = 0;       // the KV pool
  int64_t block_size = 16;
};

class Qwen2AudioContinuousBatch {
 public:
  Qwen2AudioContinuousBatch(const Qwen2AudioModel& model, std::vector<int64_t> eos_token_ids,
                            const Qwen2AudioBatchLimits& limits);

  // Queues a request; returns its ticket (0, 1, ... in submission order).
  // Refuses one whose prompt and max_new_tokens could never fit the pool or
  // the LM's positions, naming both.
  int64_t submit(Qwen2AudioRequest request);
  // submit's refusal on its own, before the prompt is built: a prompt of
  // `prompt_tokens` generating up to max_new_tokens fits the pool alone.
  void check_fits(int64_t prompt_tokens, int64_t max_new_tokens) const;
  bool idle() const { return waiting_.empty() && running_.empty(); }
  int64_t waiting() const { return static_cast<int64_t>(waiting_.size()); }

  struct Finished {
    int64_t ticket = 0;
    std::vector<int64_t> tokens;  // generated, end-of-text excluded
  };
  // One iteration (admissions, then one decode step); the requests that
  // finished in it.
  std::vector<Finished> iterate();

  // Counters of the run so far.
  struct Stats {
    int64_t decode_steps = 0;
    int64_t prefills = 0;
    int64_t preemptions = 0;
    int64_t most_running = 0;
  };
  const Stats& stats() const { return stats_; }

 private:
  struct Waiting {
    int64_t ticket;
    Qwen2AudioRequest request;
  };
  struct Running {
    int64_t ticket;
    Qwen2AudioRequest request;
    layers::PagedKvCache::SequenceId sequence;
    std::vector<int64_t> tokens;
  };
  // Takes the argmax of the sequence's logits; true when the request is done
  // (end of text, its token budget, or the LM's last position).
  bool take_token(Running& running, int64_t token) const;
  void admit(std::vector<Finished>& finished);
  void preempt_newest();

  const Qwen2AudioModel& model_;
  std::vector<int64_t> eos_;
  Qwen2AudioBatchLimits limits_;
  layers::PagedKvCache cache_;
  std::deque<Waiting> waiting_;
  std::vector<Running> running_;  // in admission order
  int64_t next_ticket_ = 0;
  Stats stats_;
};

}  // namespace oasr::models
