#include "decode/transducer_greedy.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace oasr::decode {
namespace {

// Index of the first maximum of v[0, n).
int64_t first_argmax(const float* v, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (v[i] > v[best]) best = i;
  }
  return best;
}

double log_softmax_at(const float* v, int64_t n, int64_t index) {
  double top = v[0];
  for (int64_t i = 1; i < n; ++i) top = std::max(top, static_cast<double>(v[i]));
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(v[i]) - top);
  return static_cast<double>(v[index]) - top - std::log(sum);
}

struct RowState {
  int64_t frames = 0;         // valid frames
  int64_t t = 0;              // the frame the row looks at
  int64_t last_frame = -1;    // the frame of its last emitted label
  int64_t emitted_there = 0;  // labels emitted on last_frame
};

}  // namespace

std::vector<TransducerHypothesis> transducer_greedy_search(TransducerSteps& steps,
                                                           std::span<const int64_t> frames_per_row,
                                                           const TransducerGreedyOptions& options) {
  OASR_CHECK(options.max_symbols > 0, kInvalidArgument, "max_symbols must be positive, got ",
             options.max_symbols);
  const bool tdt = !options.durations.empty();
  const int64_t token_classes = options.blank_id + 1;
  const int64_t classes = token_classes + static_cast<int64_t>(options.durations.size());
  const int64_t batch = static_cast<int64_t>(frames_per_row.size());
  std::vector<TransducerHypothesis> out(static_cast<size_t>(batch));
  std::vector<RowState> rows(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    OASR_CHECK(frames_per_row[b] >= 0, kInvalidArgument, "row ", b, " has ", frames_per_row[b],
               " frames");
    rows[b].frames = frames_per_row[b];
  }
  const auto active = [&rows](int64_t b) { return rows[b].t < rows[b].frames; };

  std::vector<int64_t> searching;
  for (int64_t b = 0; b < batch; ++b) {
    if (active(b)) searching.push_back(b);
  }
  std::vector<int64_t> found_rows, found_labels, frames, still;
  while (!searching.empty()) {
    // Stage 1: each searching row moves along its frames until a label.
    found_rows.clear();
    found_labels.clear();
    while (!searching.empty()) {
      frames.clear();
      for (int64_t b : searching) frames.push_back(rows[b].t);
      const Tensor logits = steps.joint(searching, frames);
      OASR_CHECK(logits.dim() == 2 && logits.size(0) == static_cast<int64_t>(searching.size()) &&
                     logits.size(1) == classes && logits.dtype() == DType::kF32,
                 kInternal, "the joint returned ", shape_str(logits.shape()), ", not [",
                 searching.size(), ", ", classes, "] float32");
      still.clear();
      for (size_t i = 0; i < searching.size(); ++i) {
        const int64_t b = searching[i];
        const float* v = logits.data<float>() + static_cast<int64_t>(i) * classes;
        const int64_t label = first_argmax(v, token_classes);
        const int64_t duration = tdt ? options.durations[static_cast<size_t>(first_argmax(
                                           v + token_classes, classes - token_classes))]
                                     : 0;
        RowState& r = rows[b];
        if (label == options.blank_id) {
          r.t += std::max<int64_t>(duration, 1);
          if (active(b)) still.push_back(b);
          continue;
        }
        TransducerHypothesis& h = out[b];
        h.tokens.push_back(label);
        h.frames.push_back(r.t);
        if (tdt) h.durations.push_back(duration);
        h.score += log_softmax_at(v, token_classes, label);
        r.emitted_there = r.last_frame == r.t ? r.emitted_there + 1 : 1;
        r.last_frame = r.t;
        r.t += duration;
        found_rows.push_back(b);
        found_labels.push_back(label);
      }
      searching.swap(still);
    }
    if (found_rows.empty()) break;
    // Stage 2: only the rows that emitted step their predictors.
    steps.predict(found_rows, found_labels);
    // Stage 3: a frame that emitted max_symbols labels is left.
    for (int64_t b : found_rows) {
      RowState& r = rows[b];
      if (active(b) && r.t == r.last_frame && r.emitted_there >= options.max_symbols) ++r.t;
      if (active(b)) searching.push_back(b);
    }
  }
  return out;
}

}  // namespace oasr::decode
