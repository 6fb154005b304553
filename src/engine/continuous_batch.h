// Iteration-level (continuous) batching across requests, for oasr-server:
// an utterance joins the running batch at any decode step and leaves it the
// step it finishes, so a short request never waits for a long one and a new
// one never waits for a batch to drain. The architecture's decoder
// (Recognizer::start_continuous) does the scheduling; this class adds what
// ASREngine::transcribe_each adds to a batch: each request's own decode
// overrides resolved and validated, the length check, silence as an empty
// transcript, and errors that start with the request's label.
//
//   auto batch = engine.start_continuous();
//   const int64_t ticket = batch->submit(samples, overrides, "request 7");
//   while (batch->pending() > 0)
//     for (auto& [ticket, result] : batch->step()) ...;
//
// A request's transcript equals what transcribe() gives it alone (the
// decoder's batch invariance; tests/server/test_continuous_batching.py).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "asr/recognizer.h"
#include "engine/asr_engine.h"

namespace oasr::engine {

class ContinuousBatch {
 public:
  explicit ContinuousBatch(const ASREngine& engine);

  // Queues one utterance (mono, at the engine's rate, copied) with its own
  // decode overrides; returns its ticket. Refuses (oasr::Error starting with
  // `label`) a bad override, audio outside the engine's length limits or one
  // the decoder could never fit; nothing is queued then.
  int64_t submit(Waveform samples, const DecodeOverrides& overrides, const std::string& label);
  // One iteration: the requests that finished in it. A throw (the device
  // failing, a stop request) loses every pending request: their tickets are
  // dropped, and the batch is empty and usable again.
  std::vector<std::pair<int64_t, UtteranceResult>> step();
  // Requests submitted and not yet returned by step().
  int64_t pending() const { return static_cast<int64_t>(silent_.size()) + decoder_->pending(); }

 private:
  const ASREngine& engine_;
  std::unique_ptr<ContinuousDecoder> decoder_;
  std::vector<int64_t> silent_;                     // tickets answered by the next step
  std::unordered_map<int64_t, int64_t> ticket_of_;  // the decoder's ticket -> ours
  int64_t next_ticket_ = 0;
};

}  // namespace oasr::engine
