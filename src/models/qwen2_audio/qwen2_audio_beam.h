// Beam search for Qwen2-Audio: transformers' generate(num_beams=K) (its
// _beam_search loop with BeamSearchScorer) through decode/whisper_search.h's
// beam search, which is that algorithm over an abstract decoder step, here
// run on the LM's paged KV cache.
//
// One utterance's K beams are K sequences of one cache. The prompt (audio
// and text) is computed once, for the first beam; the others fork it
// (layers/paged_kv_cache.h: the full blocks shared, not copied). Each step
// the search reorders the beams: a beam that continues itself keeps its
// sequence, one that continues another forks it, and a sequence no beam
// continues is released, so the prompt's blocks are held once however the
// beams move. Result for result the same as generate() (tests/oracle/
// test_qwen2_audio.cc, fixture: make_qwen2_audio_case.py's beam_search).
#pragma once

#include <cstdint>
#include <vector>

#include "models/qwen2_audio/qwen2_audio_generation.h"
#include "models/qwen2_audio/qwen2_audio_model.h"

namespace oasr::models {

struct Qwen2AudioBeamOptions {
  int64_t beams = 5;
  double length_penalty = 1.0;
  std::vector<int64_t> eos_token_ids;  // generation_config.json's; the first also pads
};

struct Qwen2AudioBeamResult {
  std::vector<int64_t> tokens;  // generated, end-of-text excluded
  double score = 0.0;           // HF's sequences_scores
};

// Beam search of one request (its prompt ids, audio tokens, max_new_tokens)
// on a cache of its own, sized for the request's beams.
Qwen2AudioBeamResult qwen2_audio_beam_search(const Qwen2AudioModel& model,
                                             const Qwen2AudioRequest& request,
                                             const Qwen2AudioBeamOptions& options);

}  // namespace oasr::models
