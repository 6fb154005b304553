// The Recognizer seam: what ASREngine asks of an architecture. One
// implementation per architecture (models/<arch>/*_recognizer.h), built by
// the make_recognizer of the architecture's descriptor
// (models/architecture.h), so the engine, the CLI, the server and the
// bindings serve every architecture through the same calls
// (docs/architecture.md, "Recognizers"). Below models/ in the library
// order: a model's folder implements it, the engine drives it.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "asr/engine_config.h"
#include "layers/module.h"
#include "quant/report.h"
#include "quant/spec.h"

namespace oasr::engine {

// Where a token sits in the audio, in seconds from the utterance's start.
struct TokenTime {
  double start = 0.0;
  double end = 0.0;
};

// One utterance's mono samples, borrowed for the length of a call: the
// caller's buffer (a std::vector, a numpy array handed over by the Python
// package without a copy) is read in place.
using Waveform = std::span<const float>;

// A stretch of an utterance with its times, in seconds from the start of
// the audio (Whisper's timestamp segments).
struct Segment {
  double start = 0.0;
  double end = 0.0;
  std::string text;
  std::vector<int64_t> tokens;  // the model's tokens of the segment, timestamps included
};

struct Transcript {
  std::string text;
  std::vector<int64_t> tokens;
  double score = 0.0;  // the chosen hypothesis' score under the decode method
  // One per token where the architecture aligns them (U2++: the CTC forced
  // alignment of the chosen hypothesis, decode/ctc_alignment.h); else empty.
  std::vector<TokenTime> token_times;
  // Where the architecture delimits segments itself (Whisper decoded with
  // timestamps); else empty.
  std::vector<Segment> segments;
};

// Audio in pieces -> partial results, then the final one.
class StreamingSession {
 public:
  virtual ~StreamingSession() = default;
  // Mono samples at the recognizer's sample rate, any piece size. Returns
  // the partial transcript after the newly computable part.
  virtual Transcript accept_waveform(std::span<const float> samples) = 0;
  virtual Transcript finish() = 0;  // refuses further input afterwards
  virtual bool finished() const = 0;
};

// Iteration-level decoding across calls (oasr-server's continuous
// batching): an utterance joins while others decode and leaves the step it
// finishes; each one's transcript is the one transcribe() gives it alone.
class ContinuousDecoder {
 public:
  virtual ~ContinuousDecoder() = default;
  // Queues a copy of one utterance with its own resolved decode options;
  // returns its ticket (0, 1, ... in submission order). Refuses one that
  // could never be decoded, naming the limit; nothing is queued then.
  virtual int64_t submit(Waveform samples, const DecodeOptions& options) = 0;
  // One iteration; the utterances that finished in it, with their tickets.
  // A throw leaves the decoder unusable: start another.
  virtual std::vector<std::pair<int64_t, Transcript>> step() = 0;
  // Utterances submitted and not yet returned by step().
  virtual int64_t pending() const = 0;
};

class Recognizer {
 public:
  virtual ~Recognizer() = default;

  // The rate transcribe() and sessions expect.
  virtual int sample_rate() const = 0;
  // The longest utterance transcribe() takes at once with `options` (resolved
  // decode options), and why (a model with a fixed positional table);
  // unbounded by default. ASREngine refuses longer audio up front with the
  // limit of its configured options, and oasr-server caps
  // --max-audio-seconds with it.
  struct AudioLimit {
    double seconds = std::numeric_limits<double>::infinity();
    std::string why;
  };
  virtual AudioLimit audio_limit(const DecodeOptions& options) const {
    (void)options;
    return {};
  }
  // The decode settings `overrides` asks for over the checkpoint's and the
  // architecture's defaults, validated; a method or knob this architecture
  // (or the chosen method) does not read is refused by name.
  virtual DecodeOptions resolve_decode(const DecodeOverrides& overrides) const = 0;
  // Mono samples in [-1, 1) at sample_rate(); results in input order, each
  // independent of the others in the call (batch invariance).
  virtual std::vector<Transcript> transcribe(std::span<const Waveform> utterances,
                                             const DecodeOptions& options,
                                             int64_t max_batch_size) const = 0;
  // Whether start_session() serves. Refusing a non-streaming architecture
  // is ASREngine's, by the architecture's name.
  virtual bool streams() const { return false; }
  virtual std::unique_ptr<StreamingSession> start_session(const DecodeOptions& options) const;
  // Whether start_continuous() serves; a decoder holds up to max_batch_size
  // sequences at once, its memory sized by `defaults` (the engine's resolved
  // decode options).
  virtual bool decodes_continuously() const { return false; }
  virtual std::unique_ptr<ContinuousDecoder> start_continuous(const DecodeOptions& defaults,
                                                              int64_t max_batch_size) const;
  // Token ids -> text, without special tokens.
  virtual std::string detokenize(std::span<const int64_t> tokens) const = 0;

  // The served module tree (quantization reports, calibration observers).
  virtual Module& module() = 0;
  const Module& module() const { return const_cast<Recognizer&>(*this).module(); }
  virtual const quant::QuantizationSpec& quantization_spec() const = 0;
  // Default: quant::quantization_info over module() and the spec.
  virtual quant::QuantizationInfo quantization_info() const;
};

// Length bucketing for a recognizer's transcribe(): `feats` (one tensor per
// utterance, frames first) sorted longest first so a batch pads little,
// decode_batch called on groups of at most max_batch_size (a cancellation
// checked before each), the results put back in input order. The caller's
// batches must be batch invariant for the order not to matter.
std::vector<Transcript> transcribe_in_length_buckets(
    const std::vector<Tensor>& feats, int64_t max_batch_size,
    const std::function<std::vector<Transcript>(const std::vector<Tensor>& batch)>& decode_batch);

// Builds the recognizer of one architecture for `config` (validated; its
// ckpt_dir holds that architecture).
using RecognizerFactory = std::function<std::unique_ptr<Recognizer>(const EngineConfig& config)>;

}  // namespace oasr::engine
