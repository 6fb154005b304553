// U2ppRecognizer: the Recognizer of U2++ checkpoints (native oasr
// directories, WeNet experiments, or an in-memory source): Kaldi fbank,
// the Conformer encoder, CTC searches and attention rescoring as WeNet's
// recognize defines them.
//
// Offline utterances are batched by length (max_batch_size rows a batch,
// padded, masked); an utterance gives the same transcript alone or in any
// batch. With chunk_size > 0 each utterance is encoded chunk by chunk with
// attention and CNN caches (WeNet's simulate-streaming forward), which is
// exactly what a U2ppStreamingSession computes from audio given in pieces.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "asr/recognizer.h"
#include "audio/fbank.h"
#include "decode/ctc_endpoint.h"
#include "decode/ctc_search.h"
#include "decode/units.h"
#include "models/u2pp/model_source.h"
#include "models/u2pp/u2pp_model.h"
#include "models/u2pp/u2pp_streaming.h"

namespace oasr::engine {

// The decode options U2++ declares (u2pp_decode_options()), typed: what a
// request resolves to over the checkpoint's decode config.
struct U2ppDecode {
  std::string method;
  int64_t beam_size = 10;
  double ctc_weight = 0.0;
  double reverse_weight = 0.0;
  int64_t chunk_size = -1;   // decoding_chunk_size; -1 = offline
  int64_t left_chunks = -1;  // num_decoding_left_chunks; -1 = all
  // Streaming: end a segment at CTC endpoints (decode/ctc_endpoint.h) and
  // decode on from a fresh state.
  bool endpoint = false;
  double endpoint_silence = 1.0;      // rule 2's trailing silence, seconds
  double max_segment_seconds = 20.0;  // rule 3's segment length, seconds

  // Every key set (a resolved DecodeOptions of U2++'s keys).
  static U2ppDecode from(const DecodeOptions& options);
  DecodeOptions values() const;
};

// U2++'s decode keys: decode_method, beam_size, ctc_weight, reverse_weight,
// chunk_size, left_chunks, endpoint, endpoint_silence, max_segment_seconds
// (models/u2pp/u2pp_architecture.cc declares them).
std::vector<DecodeOptionSpec> u2pp_decode_options();

class U2ppRecognizer final : public Recognizer {
 public:
  explicit U2ppRecognizer(const EngineConfig& config);
  ~U2ppRecognizer() override;

  static constexpr const char* kMethods =
      "ctc_greedy_search, ctc_prefix_beam_search or attention_rescoring";

  int sample_rate() const override;
  AudioLimit audio_limit(const DecodeOptions& options) const override;
  DecodeOptions resolve_decode(const DecodeOverrides& overrides) const override;
  std::vector<Transcript> transcribe(std::span<const Waveform> utterances,
                                     const DecodeOptions& options,
                                     int64_t max_batch_size) const override;
  bool streams() const override { return true; }
  // Needs chunk_size > 0.
  std::unique_ptr<StreamingSession> start_session(const DecodeOptions& options) const override;
  std::string detokenize(std::span<const int64_t> tokens) const override;
  // Whether detokenized text separates words by spaces (BPE) rather than
  // running characters together (a character model's text).
  // Seconds per encoder frame: the subsampling rate x the fbank shift.
  double encoder_frame_seconds() const;
  bool words_are_spaced() const { return detokenize_.kind == decode::TokenizerKind::kBpe; }
  Module& module() override { return *model_; }
  const quant::QuantizationSpec& quantization_spec() const override { return spec_; }
  // With the fold links of U2++'s quantization layout.
  quant::QuantizationInfo quantization_info() const override;

  const models::ModelSource& source() const { return source_; }
  const models::U2ppModel& model() const { return *model_; }
  const audio::FbankComputer& fbank() const { return *fbank_; }
  // fbank [T, F] of mono samples at sample_rate() (before CMVN); refuses
  // audio shorter than one analysis window.
  Tensor features(std::span<const float> samples) const;
  // Decodes CTC log-probs [T', V] of one utterance (and its encoder output
  // [1, T', D] for attention rescoring) with `options`.
  Transcript decode_utterance(const Tensor& ctc_log_probs, const Tensor& encoder_out,
                              const U2ppDecode& options) const;

 private:
  // resolve_decode without what needs the built model (the right decoder).
  U2ppDecode resolve_knobs(const DecodeOverrides& overrides) const;
  std::vector<Transcript> transcribe_batch(const std::vector<Tensor>& feats,
                                           const U2ppDecode& options) const;
  // decode_utterance in three phases, so a batch runs the host ones
  // row-parallel: the CTC search (the best path, or the prefix beam's
  // n-best for rescoring), attention rescoring on the model's device, then
  // the text and the tokens' CTC alignment times.
  struct CtcSearch {
    Transcript best;                           // not rescoring: the answer's tokens
    std::vector<decode::CtcHypothesis> nbest;  // rescoring: its candidates
  };
  CtcSearch search_ctc(const Tensor& ctc_log_probs, const U2ppDecode& options) const;
  Transcript rescore(const CtcSearch& searched, const Tensor& encoder_out,
                     const U2ppDecode& options) const;
  void finish(Transcript& t, const Tensor& ctc_log_probs) const;

  std::filesystem::path ckpt_dir_;  // names the checkpoint in messages
  models::ModelSource source_;
  std::unique_ptr<models::U2ppModel> model_;
  quant::QuantizationSpec spec_;
  std::optional<audio::FbankComputer> fbank_;
  decode::UnitTable units_;
  decode::DetokenizeOptions detokenize_;
};

// Audio in pieces -> partial results, then the final one. Partial results
// are the CTC prefix beam search (greedy for ctc_greedy_search) over the
// encoder frames of the open segment; finish() applies the session's decode
// method, giving exactly what transcribe() gives with the same chunk_size.
//
// With `endpoint`, a segment ends where WeNet's runtime ends one (CTC
// endpoints: decode/ctc_endpoint.h, checked after every chunk): it is
// decoded with the session's method, reported in the Transcript's segments
// (start and end in seconds of the stream), and the stream goes on from a
// fresh encoder state at the next chunk's first frame. A segment is then
// exactly transcribe() of its own audio, [start, end) of the stream, and
// memory stays bounded however long the stream runs (rule 3 bounds a
// segment's length). accept_waveform() returns the open segment's partial
// result and the segments its audio ended; finish() returns the whole
// stream: every token and segment, the text the segments' texts joined by a
// space where words are spaced (else run together).
class U2ppStreamingSession final : public StreamingSession {
 public:
  U2ppStreamingSession(const U2ppRecognizer& recognizer, const U2ppDecode& options);

  Transcript accept_waveform(std::span<const float> samples) override;
  Transcript finish() override;
  bool finished() const override { return finished_; }

 private:
  // Runs every window the encoder can, checking for an endpoint after each.
  void run_windows();
  void append_encoder_frames(const Tensor& frames);
  // Decodes the open segment, records it, and restarts the encoder there.
  // `last_frame_end`: the fbank frame after the segment's last frame.
  void end_segment(int64_t last_frame_end);
  // The session's decode method over the open segment's encoder frames.
  Transcript decode_open_segment() const;
  Transcript partial() const;
  // Seconds of the stream at fbank frame f's start / at the end of the
  // window of frames that ends before frame f.
  double frame_start_seconds(int64_t frame) const;
  double frames_end_seconds(int64_t frame_end) const;

  const U2ppRecognizer& recognizer_;
  U2ppDecode options_;
  models::U2ppStreamingEncoder encoder_;
  std::optional<decode::CtcEndpoint> endpointer_;
  int64_t window_frames_;  // fbank frames of a full encoder window
  // Samples from the start of the next fbank frame on.
  std::vector<float> pending_samples_;
  std::vector<Tensor> encoder_chunks_;  // [1, k, D] each, of the open segment
  std::vector<Tensor> ctc_chunks_;      // [1, k, V] each, for partial results
  bool segment_has_token_ = false;      // a frame of the open segment is not blank at best
  int64_t segment_first_frame_ = 0;     // the open segment's first fbank frame
  std::vector<Segment> segments_;       // the ended segments, in order
  size_t segments_returned_ = 0;        // how many accept_waveform() has returned
  Transcript ended_;                    // tokens and token times of the ended segments
  bool finished_ = false;
};

// What the U2++ descriptor (models/u2pp/u2pp_architecture.cc) builds.
RecognizerFactory u2pp_recognizer_factory();

}  // namespace oasr::engine
