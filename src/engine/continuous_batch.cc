#include "engine/continuous_batch.h"

#include "audio/silence.h"
#include "core/logging.h"

namespace oasr::engine {

ContinuousBatch::ContinuousBatch(const ASREngine& engine)
    : engine_(engine),
      decoder_(engine.recognizer().start_continuous(engine.decode_options(),
                                                    engine.config().max_batch_size)) {}

int64_t ContinuousBatch::submit(Waveform samples, const DecodeOverrides& overrides,
                                const std::string& label) {
  try {
    const DecodeOptions options = engine_.resolve_decode(overrides);
    engine_.check_length(samples.size(), label);
    const int64_t ticket = next_ticket_;
    // Silence by the signal is an empty transcript, as in ASREngine::transcribe.
    if (audio::deviation_rms_dbfs(samples) < audio::kSilenceDbfs) {
      log::debug("{}: silence, empty transcript", label);
      silent_.push_back(ticket);
    } else {
      ticket_of_[decoder_->submit(samples, options)] = ticket;
    }
    ++next_ticket_;
    return ticket;
  } catch (const Error& e) {
    const std::string message = e.what();
    if (message.starts_with(label)) throw;
    throw Error(e.code(), label + ": " + message);
  }
}

std::vector<std::pair<int64_t, UtteranceResult>> ContinuousBatch::step() {
  std::vector<std::pair<int64_t, UtteranceResult>> out;
  for (const int64_t ticket : silent_) out.emplace_back(ticket, UtteranceResult{Transcript{}, {}});
  silent_.clear();
  if (decoder_->pending() == 0) return out;
  try {
    for (auto& [decoded, transcript] : decoder_->step()) {
      out.emplace_back(ticket_of_.at(decoded), UtteranceResult{std::move(transcript), {}});
      ticket_of_.erase(decoded);
    }
  } catch (...) {
    ticket_of_.clear();
    decoder_ = engine_.recognizer().start_continuous(engine_.decode_options(),
                                                     engine_.config().max_batch_size);
    throw;
  }
  return out;
}

}  // namespace oasr::engine
