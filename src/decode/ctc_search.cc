#include "decode/ctc_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <utility>

#include "core/error.h"

namespace oasr::decode {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// ---- input checks ---------------------------------------------------------------

// A CPU float32 tensor of `rank` dimensions, made contiguous.
Tensor checked_log_probs(const Tensor& log_probs, int64_t rank, const char* what) {
  OASR_CHECK(log_probs.defined(), kInvalidArgument, what, ": log_probs is undefined");
  OASR_CHECK(log_probs.dim() == rank, kInvalidArgument, what, ": log_probs must have ", rank,
             " dimensions (", rank == 2 ? "[T, V]" : "[B, T, V]", "), got ", log_probs.str());
  OASR_CHECK(log_probs.dtype() == DType::kF32, kInvalidArgument, what,
             ": log_probs must be float32, got ", log_probs.str(),
             "; convert with .to(DType::kF32) first");
  OASR_CHECK(log_probs.device().is_cpu(), kInvalidArgument, what,
             ": log_probs must be on the CPU, got ", log_probs.str(),
             "; copy with .to(Device::cpu()) first");
  OASR_CHECK(log_probs.size(-1) > 0, kInvalidArgument, what,
             ": the vocabulary dimension of log_probs is empty: ", log_probs.str());
  return log_probs.contiguous();
}

// lengths int32/int64 [B], each in [0, max_frames].
std::vector<int64_t> checked_lengths(const Tensor& lengths, int64_t batch, int64_t max_frames,
                                     const char* what) {
  OASR_CHECK(lengths.defined(), kInvalidArgument, what, ": lengths is undefined");
  OASR_CHECK(lengths.device().is_cpu(), kInvalidArgument, what,
             ": lengths must be on the CPU, got ", lengths.str());
  OASR_CHECK(lengths.dim() == 1 && lengths.size(0) == batch, kInvalidArgument, what,
             ": lengths must be [", batch, "] to match log_probs' batch, got ", lengths.str());
  OASR_CHECK(lengths.dtype() == DType::kI64 || lengths.dtype() == DType::kI32, kInvalidArgument,
             what, ": lengths must be int32 or int64, got ", lengths.str());
  const Tensor dense = lengths.contiguous();
  std::vector<int64_t> out(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    out[b] = dense.dtype() == DType::kI64 ? dense.data<int64_t>()[b] : dense.data<int32_t>()[b];
    OASR_CHECK(out[b] >= 0 && out[b] <= max_frames, kInvalidArgument, what, ": lengths[", b,
               "] = ", out[b], " lies outside [0, ", max_frames, "] (the frames in log_probs)");
  }
  return out;
}

// Prefix beam search cannot reproduce WeNet's order on NaN scores (Python's
// sort on NaN keys has no total order), so such frames are refused.
void check_beam_search_row(std::span<const float> row, int64_t frame) {
  for (size_t v = 0; v < row.size(); ++v) {
    OASR_CHECK(!std::isnan(row[v]) && row[v] != std::numeric_limits<float>::infinity(),
               kInvalidArgument, "ctc_prefix_beam_search: log-prob at frame ", frame, ", token ", v,
               " is ", row[v],
               "; a log-probability must be finite or -inf (the model output "
               "is broken)");
  }
}

// ---- prefix beam search state -------------------------------------------------

// Prefixes are nodes of a trie: extending a prefix by a token is a child
// lookup, and a prefix is identified by its node id (0 = empty prefix).
class PrefixTrie {
 public:
  PrefixTrie() : parent_{-1}, token_{-1} {}

  int32_t child(int32_t node, int64_t token) {
    const auto [it, inserted] = children_.try_emplace(Key{node, token}, size());
    if (inserted) {
      parent_.push_back(node);
      token_.push_back(token);
    }
    return it->second;
  }
  // The prefix's last token; -1 for the empty prefix (no valid token is -1).
  int64_t last_token(int32_t node) const { return token_[node]; }

  std::vector<int64_t> tokens(int32_t node) const {
    std::vector<int64_t> out;
    for (; node != 0; node = parent_[node]) out.push_back(token_[node]);
    std::reverse(out.begin(), out.end());
    return out;
  }

 private:
  int32_t size() const { return static_cast<int32_t>(parent_.size()); }
  struct Key {
    int32_t node;
    int64_t token;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<int64_t>()(k.token * 1000003 + k.node);
    }
  };
  std::vector<int32_t> parent_;
  std::vector<int64_t> token_;
  std::unordered_map<Key, int32_t, KeyHash> children_;
};

struct PrefixScore {
  int32_t node;
  double blank_ending;     // log p of the paths ending in blank
  double nonblank_ending;  // log p of the paths ending in the last token
  double total() const { return log_add(blank_ending, nonblank_ending); }
};

// Next-frame hypotheses in first-insertion order (what WeNet's defaultdict
// iterates in), with -inf scores on creation.
class NextHypotheses {
 public:
  PrefixScore& at(int32_t node) {
    const auto [it, inserted] = slot_of_node_.try_emplace(node, entries_.size());
    if (inserted) entries_.push_back(PrefixScore{node, kNegInf, kNegInf});
    return entries_[it->second];
  }
  void clear() {
    entries_.clear();
    slot_of_node_.clear();
  }
  std::vector<PrefixScore>& entries() { return entries_; }

 private:
  std::vector<PrefixScore> entries_;
  std::unordered_map<int32_t, size_t> slot_of_node_;
};

std::vector<CtcHypothesis> prefix_beam_search_rows(const float* rows, int64_t frames, int64_t vocab,
                                                   const CtcPrefixBeamSearchOptions& options) {
  const int64_t candidates_per_frame = std::min(options.beam_size, vocab);
  PrefixTrie trie;
  std::vector<PrefixScore> current{PrefixScore{0, 0.0, kNegInf}};
  NextHypotheses next;
  std::vector<std::pair<double, PrefixScore>> ranked;

  for (int64_t t = 0; t < frames; ++t) {
    const std::span<const float> row(rows + t * vocab, static_cast<size_t>(vocab));
    check_beam_search_row(row, t);
    next.clear();
    for (const int64_t u : torch_cpu_topk(row, candidates_per_frame)) {
      const double prob = row[u];
      for (const PrefixScore& prefix : current) {
        if (u == options.blank_id) {
          PrefixScore& same = next.at(prefix.node);
          same.blank_ending = log_add(same.blank_ending, prefix.total() + prob);
        } else if (u == trie.last_token(prefix.node)) {
          // A repeated token without a blank in between extends nothing...
          PrefixScore& same = next.at(prefix.node);
          same.nonblank_ending = log_add(same.nonblank_ending, prefix.nonblank_ending + prob);
          // ...while after a blank it is a new occurrence of the token.
          PrefixScore& extended = next.at(trie.child(prefix.node, u));
          extended.nonblank_ending = log_add(extended.nonblank_ending, prefix.blank_ending + prob);
        } else {
          PrefixScore& extended = next.at(trie.child(prefix.node, u));
          extended.nonblank_ending = log_add(extended.nonblank_ending, prefix.total() + prob);
        }
      }
    }
    // WeNet ranks with sorted(..., reverse=True): descending and stable.
    ranked.clear();
    for (const PrefixScore& entry : next.entries()) ranked.emplace_back(entry.total(), entry);
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    const size_t kept = std::min(ranked.size(), static_cast<size_t>(options.beam_size));
    current.clear();
    for (size_t i = 0; i < kept; ++i) current.push_back(ranked[i].second);
  }

  std::vector<CtcHypothesis> nbest;
  nbest.reserve(current.size());
  for (const PrefixScore& hyp : current) {
    nbest.push_back(CtcHypothesis{trie.tokens(hyp.node), hyp.total()});
  }
  return nbest;
}

void check_beam_options(const CtcPrefixBeamSearchOptions& options) {
  OASR_CHECK(options.beam_size >= 1, kInvalidArgument,
             "ctc_prefix_beam_search: beam_size must be at least 1, got ", options.beam_size);
}

}  // namespace

double log_add(double a, double b) {
  if (a == kNegInf && b == kNegInf) return kNegInf;
  // Python's max() keeps the first of equal arguments.
  const double a_max = b > a ? b : a;
  const double sum = std::exp(a - a_max) + std::exp(b - a_max);
  return a_max + std::log(sum);
}

std::vector<int64_t> remove_duplicates_and_blank(std::span<const int64_t> frame_labels,
                                                 int64_t blank_id) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < frame_labels.size(); ++i) {
    const bool starts_run = i == 0 || frame_labels[i] != frame_labels[i - 1];
    if (starts_run && frame_labels[i] != blank_id) out.push_back(frame_labels[i]);
  }
  return out;
}

std::vector<int64_t> torch_cpu_topk(std::span<const float> row, int64_t k) {
  const auto n = static_cast<int64_t>(row.size());
  OASR_CHECK(k >= 1 && k <= n, kInvalidArgument, "torch_cpu_topk: k = ", k, " must lie in [1, ", n,
             "] (the row length)");
  using Entry = std::pair<float, int64_t>;
  std::vector<Entry> queue(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) queue[j] = Entry{row[j], j};
  // torch's "largest" order: NaN first, then by value; equal values unordered,
  // so their final order is whatever the algorithm below leaves.
  const auto ranks_before = [](const Entry& x, const Entry& y) {
    return (std::isnan(x.first) && !std::isnan(y.first)) || x.first > y.first;
  };
  if (k * 64 <= n) {
    std::partial_sort(queue.begin(), queue.begin() + k, queue.end(), ranks_before);
  } else {
    std::nth_element(queue.begin(), queue.begin() + (k - 1), queue.end(), ranks_before);
    std::sort(queue.begin(), queue.begin() + (k - 1), ranks_before);
  }
  std::vector<int64_t> indices(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) indices[j] = queue[j].second;
  return indices;
}

std::vector<int64_t> ctc_greedy_search(const Tensor& log_probs, int64_t blank_id) {
  const Tensor dense = checked_log_probs(log_probs, 2, "ctc_greedy_search");
  const Tensor batched = dense.unsqueeze(0);
  const Tensor lengths = Tensor::from_vector<int64_t>({dense.size(0)}, {1});
  return ctc_greedy_search(batched, lengths, blank_id).front();
}

std::vector<std::vector<int64_t>> ctc_greedy_search(const Tensor& log_probs, const Tensor& lengths,
                                                    int64_t blank_id) {
  const Tensor dense = checked_log_probs(log_probs, 3, "ctc_greedy_search");
  const int64_t batch = dense.size(0), frames = dense.size(1), vocab = dense.size(2);
  const std::vector<int64_t> lens = checked_lengths(lengths, batch, frames, "ctc_greedy_search");
  const float* data = dense.data<float>();
  std::vector<std::vector<int64_t>> results(static_cast<size_t>(batch));
  std::vector<int64_t> best_per_frame;
  for (int64_t b = 0; b < batch; ++b) {
    // WeNet masks frames past the length to blank, which the collapse drops;
    // not visiting them is the same.
    best_per_frame.clear();
    for (int64_t t = 0; t < lens[b]; ++t) {
      const float* row = data + (b * frames + t) * vocab;
      best_per_frame.push_back(
          torch_cpu_topk(std::span<const float>(row, static_cast<size_t>(vocab)), 1).front());
    }
    results[b] = remove_duplicates_and_blank(best_per_frame, blank_id);
  }
  return results;
}

std::vector<CtcEmission> ctc_greedy_emissions(const Tensor& log_probs, int64_t blank_id) {
  const Tensor dense = checked_log_probs(log_probs, 2, "ctc_greedy_emissions");
  const int64_t frames = dense.size(0), vocab = dense.size(1);
  const float* data = dense.data<float>();
  std::vector<CtcEmission> out;
  int64_t previous = blank_id;
  for (int64_t t = 0; t < frames; ++t) {
    const int64_t best =
        torch_cpu_topk(std::span<const float>(data + t * vocab, static_cast<size_t>(vocab)), 1)
            .front();
    // The same rule as remove_duplicates_and_blank.
    if ((t == 0 || best != previous) && best != blank_id) out.push_back({best, t});
    previous = best;
  }
  return out;
}

std::vector<CtcHypothesis> ctc_prefix_beam_search(const Tensor& log_probs,
                                                  const CtcPrefixBeamSearchOptions& options) {
  check_beam_options(options);
  const Tensor dense = checked_log_probs(log_probs, 2, "ctc_prefix_beam_search");
  return prefix_beam_search_rows(dense.data<float>(), dense.size(0), dense.size(1), options);
}

std::vector<std::vector<CtcHypothesis>> ctc_prefix_beam_search(
    const Tensor& log_probs, const Tensor& lengths, const CtcPrefixBeamSearchOptions& options) {
  check_beam_options(options);
  const Tensor dense = checked_log_probs(log_probs, 3, "ctc_prefix_beam_search");
  const int64_t batch = dense.size(0), frames = dense.size(1), vocab = dense.size(2);
  const std::vector<int64_t> lens =
      checked_lengths(lengths, batch, frames, "ctc_prefix_beam_search");
  std::vector<std::vector<CtcHypothesis>> results;
  results.reserve(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    results.push_back(
        prefix_beam_search_rows(dense.data<float>() + b * frames * vocab, lens[b], vocab, options));
  }
  return results;
}

}  // namespace oasr::decode
