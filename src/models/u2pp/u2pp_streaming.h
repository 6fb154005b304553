// U2ppStreamingEncoder: the encoder side of a streaming session. It takes
// fbank frames in pieces of any size and runs WeNet's forward_chunk on each
// full window as soon as it has arrived, carrying the attention and CNN
// caches; finish() runs the last, shorter window. The frames returned over
// a whole utterance are exactly those of forward_chunk_by_chunk on all of its
// frames at once (same windows, same calls), whatever the piece sizes.
#pragma once

#include <cstdint>
#include <vector>

#include "models/u2pp/u2pp_encoder.h"

namespace oasr::models {

class U2ppStreamingEncoder {
 public:
  // decoding_chunk_size > 0 encoder frames per chunk; num_decoding_left_chunks
  // < 0 keeps the whole history in the attention cache. `encoder` must
  // outlive this object.
  U2ppStreamingEncoder(const ConformerEncoder& encoder, int64_t decoding_chunk_size,
                       int64_t num_decoding_left_chunks = -1);

  // Appends fbank frames (float32 [n, F] or [1, n, F], before CMVN) and
  // returns the encoder frames that became computable, [1, k, D] (k a
  // multiple of the chunk size, possibly 0). Refused after finish().
  Tensor accept(const Tensor& fbank);
  // End of input: the remaining windows (the last one truncated), [1, k, D].
  Tensor finish();
  // Back to the start of a new utterance (caches and buffered frames dropped).
  void reset();
  // Appends fbank frames like accept() but runs nothing; next_window() runs.
  void append(const Tensor& fbank);
  // Runs the next window if it is complete (or, after finish_input(), while
  // one still holds right_context + 1 frames): [1, chunk, D], or an
  // undefined tensor when no window can run yet.
  Tensor next_window();
  // No more frames will come: next_window() runs the last, shorter windows.
  void finish_input();
  // Starts a new segment at the next window: caches and the position offset
  // back to zero, the buffered frames (from the next window's start on)
  // kept, so the segment is exactly a fresh stream over the frames from
  // there on. Returns the fbank frames consumed since the stream began.
  int64_t restart_segment();
  int64_t frames_consumed() const { return consumed_; }  // fbank frames behind the buffer
  int64_t frames_buffered() const { return static_cast<int64_t>(buffer_.size()) / feature_dim_; }

  int64_t frames_out() const { return offset_; }  // encoder frames produced so far
  bool finished() const { return finished_; }

 private:
  // Runs windows while next_window() gives one.
  Tensor drain();
  // The checks append() applies to a piece of fbank frames.
  void check_frames(const Tensor& fbank) const;

  const ConformerEncoder& encoder_;
  int64_t chunk_;
  int64_t required_cache_size_;
  int64_t feature_dim_;
  int64_t context_;            // right_context + 1 fbank frames: the least one output needs
  int64_t stride_;             // fbank frames between window starts
  int64_t window_;             // fbank frames of a full window
  std::vector<float> buffer_;  // fbank frames from the next window's start on
  Tensor att_cache_;
  Tensor cnn_cache_;
  int64_t offset_ = 0;
  int64_t consumed_ = 0;  // fbank frames dropped from the buffer's front so far
  bool input_finished_ = false;
  bool finished_ = false;
};

}  // namespace oasr::models
