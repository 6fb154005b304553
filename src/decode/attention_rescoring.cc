#include "decode/attention_rescoring.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace oasr::decode {
namespace {

// Reads an int32/int64 CPU tensor of `rank` dimensions as int64 values.
std::vector<int64_t> read_ids(const Tensor& ids, int64_t rank, const char* what, const char* name) {
  OASR_CHECK(ids.defined(), kInvalidArgument, what, ": ", name, " is undefined");
  OASR_CHECK(ids.dim() == rank, kInvalidArgument, what, ": ", name, " must have ", rank,
             " dimension(s), got ", ids.str());
  OASR_CHECK(ids.device().is_cpu(), kInvalidArgument, what, ": ", name, " must be on the CPU, got ",
             ids.str());
  OASR_CHECK(ids.dtype() == DType::kI64 || ids.dtype() == DType::kI32, kInvalidArgument, what, ": ",
             name, " must be int32 or int64, got ", ids.str());
  const Tensor dense = ids.contiguous();
  std::vector<int64_t> out(static_cast<size_t>(dense.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = dense.dtype() == DType::kI64 ? dense.data<int64_t>()[i] : dense.data<int32_t>()[i];
  }
  return out;
}

size_t longest(const std::vector<std::vector<int64_t>>& rows) {
  size_t width = 0;
  for (const auto& row : rows) width = std::max(width, row.size());
  return width;
}

// The decoder output [N, L + 1, V] as a contiguous CPU float32 tensor: a
// device output (the decoder ran on a GPU) comes back to the host here, and
// a 16-bit one is widened exactly; a CPU float32 output is used as it is.
Tensor checked_decoder_output(const Tensor& out, int64_t hyps, int64_t positions, int64_t eos,
                              const char* name) {
  OASR_CHECK(out.dim() == 3 && out.size(0) == hyps && out.size(1) == positions, kInvalidArgument,
             "attention rescoring: the ", name, " decoder output must be [", hyps, ", ", positions,
             ", V] (hypotheses, longest hypothesis + 1, vocabulary), got ", out.str());
  OASR_CHECK(
      out.dtype() == DType::kF32 || out.dtype() == DType::kF16 || out.dtype() == DType::kBF16,
      kInvalidArgument, "attention rescoring: the ", name,
      " decoder output must be float32, float16 or bfloat16, got ", out.str());
  OASR_CHECK(eos >= 0 && eos < out.size(2), kInvalidArgument, "attention rescoring: eos id ", eos,
             " lies outside the ", name, " decoder's vocabulary of ", out.size(2));
  return out.to(Device::cpu()).to(DType::kF32).contiguous();
}

// Sum in float32 of the decoder log-probs of a hypothesis' tokens and of
// <eos> after them, in WeNet's order (token j first to last, read at
// position position_of(j)); each addition is rounded to float32, as WeNet's
// 0-dim float32 tensors are.
template <typename PositionOf>
float decoder_path_score(const Tensor& out, int64_t hyp_index, const std::vector<int64_t>& tokens,
                         int64_t eos, PositionOf position_of) {
  const int64_t positions = out.size(1), vocab = out.size(2);
  const float* base = out.data<float>() + hyp_index * positions * vocab;
  float score = 0.0f;
  for (size_t j = 0; j < tokens.size(); ++j) {
    score += base[static_cast<int64_t>(position_of(j)) * vocab + tokens[j]];
  }
  score += base[static_cast<int64_t>(tokens.size()) * vocab + eos];
  return score;
}

}  // namespace

SpecialTokens SpecialTokens::wenet_default(int64_t vocab_size) {
  OASR_CHECK(vocab_size >= 2, kInvalidArgument,
             "SpecialTokens: a vocabulary needs at least blank and <sos/eos>, got size ",
             vocab_size);
  return SpecialTokens{0, vocab_size - 1, vocab_size - 1, -1};
}

Tensor pad_token_lists(const std::vector<std::vector<int64_t>>& rows, int64_t pad_value) {
  OASR_CHECK(!rows.empty(), kInvalidArgument, "pad_token_lists: no rows to pad");
  const auto width = static_cast<int64_t>(longest(rows));
  Tensor out = Tensor::empty({static_cast<int64_t>(rows.size()), width}, DType::kI64);
  int64_t* data = out.data<int64_t>();
  for (size_t i = 0; i < rows.size(); ++i) {
    int64_t* row = data + static_cast<int64_t>(i) * width;
    std::copy(rows[i].begin(), rows[i].end(), row);
    std::fill(row + rows[i].size(), row + width, pad_value);
  }
  return out;
}

SosEosTargets add_sos_eos(const Tensor& ys_pad, int64_t sos, int64_t eos, int64_t ignore_id) {
  const std::vector<int64_t> flat = read_ids(ys_pad, 2, "add_sos_eos", "ys_pad");
  const int64_t rows = ys_pad.size(0), width = ys_pad.size(1);
  OASR_CHECK(rows > 0, kInvalidArgument, "add_sos_eos: ys_pad has no rows: ", ys_pad.str());
  std::vector<std::vector<int64_t>> inputs(rows), targets(rows);
  for (int64_t i = 0; i < rows; ++i) {
    inputs[i].push_back(sos);
    for (int64_t j = 0; j < width; ++j) {
      const int64_t id = flat[i * width + j];
      if (id == ignore_id) continue;
      inputs[i].push_back(id);
      targets[i].push_back(id);
    }
    targets[i].push_back(eos);
  }
  return SosEosTargets{pad_token_lists(inputs, eos), pad_token_lists(targets, ignore_id)};
}

Tensor reverse_pad_list(const Tensor& ys_pad, const Tensor& ys_lens, int64_t pad_value) {
  const std::vector<int64_t> flat = read_ids(ys_pad, 2, "reverse_pad_list", "ys_pad");
  const std::vector<int64_t> lens = read_ids(ys_lens, 1, "reverse_pad_list", "ys_lens");
  const int64_t rows = ys_pad.size(0), width = ys_pad.size(1);
  OASR_CHECK(static_cast<int64_t>(lens.size()) == rows && rows > 0, kInvalidArgument,
             "reverse_pad_list: ys_lens ", ys_lens.str(), " must give one length per row of ",
             ys_pad.str());
  std::vector<std::vector<int64_t>> reversed(rows);
  for (int64_t i = 0; i < rows; ++i) {
    OASR_CHECK(lens[i] >= 0 && lens[i] <= width, kInvalidArgument, "reverse_pad_list: ys_lens[", i,
               "] = ", lens[i], " lies outside [0, ", width, "]");
    const int64_t* row = flat.data() + i * width;
    reversed[i].assign(std::make_reverse_iterator(row + lens[i]), std::make_reverse_iterator(row));
  }
  return pad_token_lists(reversed, pad_value);
}

AttentionDecoderInputs make_attention_decoder_inputs(const std::vector<CtcHypothesis>& nbest,
                                                     const SpecialTokens& special) {
  OASR_CHECK(!nbest.empty(), kInvalidArgument,
             "attention rescoring: the n-best list is empty (nothing to rescore)");
  std::vector<std::vector<int64_t>> hyps, reversed;
  std::vector<int64_t> hyps_lens;
  for (const CtcHypothesis& hyp : nbest) {
    hyps.push_back(hyp.tokens);
    hyps_lens.push_back(static_cast<int64_t>(hyp.tokens.size()) + 1);
    // Right-to-left input: <sos>, the tokens reversed, <eos> padding. WeNet
    // builds it with a gather instead of reverse_pad_list + add_sos_eos;
    // both give this.
    std::vector<int64_t> r{special.sos};
    r.insert(r.end(), hyp.tokens.rbegin(), hyp.tokens.rend());
    reversed.push_back(std::move(r));
  }
  const Tensor padded = pad_token_lists(hyps, special.ignore_id);
  AttentionDecoderInputs inputs;
  inputs.hyps = add_sos_eos(padded, special.sos, special.eos, special.ignore_id).decoder_input;
  inputs.hyps_lens = Tensor::from_vector(hyps_lens, {static_cast<int64_t>(hyps_lens.size())});
  inputs.reversed_hyps = pad_token_lists(reversed, special.eos);
  return inputs;
}

AttentionRescoringResult score_attention_rescoring(const std::vector<CtcHypothesis>& nbest,
                                                   const AttentionDecoderOutputs& outputs,
                                                   int64_t eos,
                                                   const AttentionRescoringOptions& options) {
  OASR_CHECK(!nbest.empty(), kInvalidArgument,
             "attention rescoring: the n-best list is empty (nothing to rescore)");
  OASR_CHECK(std::isfinite(options.ctc_weight) && options.ctc_weight >= 0, kInvalidArgument,
             "attention rescoring: ctc_weight must be finite and >= 0, got ", options.ctc_weight);
  OASR_CHECK(options.reverse_weight >= 0 && options.reverse_weight <= 1, kInvalidArgument,
             "attention rescoring: reverse_weight must lie in [0, 1], got ",
             options.reverse_weight);
  const bool use_right = options.reverse_weight > 0;
  OASR_CHECK(outputs.left.defined(), kInvalidArgument,
             "attention rescoring: the left-to-right decoder output is undefined");
  OASR_CHECK(!use_right || outputs.right.defined(), kInvalidArgument,
             "attention rescoring: reverse_weight is ", options.reverse_weight,
             " but there is no right-to-left decoder output; set reverse_weight to 0 for a "
             "model without a right-to-left decoder");

  const auto hyps = static_cast<int64_t>(nbest.size());
  size_t max_length = 0;
  for (const CtcHypothesis& hyp : nbest) max_length = std::max(max_length, hyp.tokens.size());
  const int64_t positions = static_cast<int64_t>(max_length) + 1;
  const Tensor left = checked_decoder_output(outputs.left, hyps, positions, eos, "left-to-right");
  const Tensor right =
      use_right ? checked_decoder_output(outputs.right, hyps, positions, eos, "right-to-left")
                : Tensor();
  const int64_t vocab = left.size(2);
  OASR_CHECK(!use_right || right.size(2) == vocab, kInvalidArgument,
             "attention rescoring: the decoders disagree on the vocabulary: ", left.str(), " vs ",
             right.str());

  // WeNet turns the weights into float32 scalars when it multiplies float32
  // tensors by them.
  const auto left_share = static_cast<float>(1 - options.reverse_weight);
  const auto right_share = static_cast<float>(options.reverse_weight);
  AttentionRescoringResult result;
  float best = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < hyps; ++i) {
    const std::vector<int64_t>& tokens = nbest[i].tokens;
    const size_t length = tokens.size();
    for (const int64_t id : tokens) {
      OASR_CHECK(id >= 0 && id < vocab, kInvalidArgument, "attention rescoring: hypothesis ", i,
                 " holds token id ", id, ", outside the decoder's vocabulary of ", vocab);
    }
    // The right-to-left decoder saw the tokens reversed: token j at position
    // length - 1 - j.
    float score = decoder_path_score(left, i, tokens, eos, [](size_t j) { return j; });
    if (use_right) {
      const float right_score =
          decoder_path_score(right, i, tokens, eos, [&](size_t j) { return length - 1 - j; });
      const float left_part = score * left_share;
      const float right_part = right_score * right_share;
      score = left_part + right_part;
    }
    // The CTC term is formed in double (Python floats), rounded to float32,
    // then added in float32.
    const float total = score + static_cast<float>(nbest[i].score * options.ctc_weight);
    result.hypothesis_scores.push_back(total);
    if (total > best) {
      best = total;
      result.best_index = static_cast<size_t>(i);
    }
  }
  result.tokens = nbest[result.best_index].tokens;
  result.score = best;
  return result;
}

AttentionRescoringResult attention_rescoring(const std::vector<CtcHypothesis>& nbest,
                                             const AttentionDecoderFn& decoder,
                                             const SpecialTokens& special,
                                             const AttentionRescoringOptions& options) {
  OASR_CHECK(static_cast<bool>(decoder), kInvalidArgument,
             "attention rescoring: no decoder function was given");
  const AttentionDecoderInputs inputs = make_attention_decoder_inputs(nbest, special);
  return score_attention_rescoring(nbest, decoder(inputs), special.eos, options);
}

}  // namespace oasr::decode
