#include "ops/top_candidates.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/device_dispatch.h"
#include "core/error.h"
#include "ops/cuda/top_candidates.h"
#include "ops/front_checks.h"

namespace oasr::ops {
namespace {

// The CPU body: the definition above, row by row.
void top_candidates_cpu(const float* logits, const uint8_t* suppressed, const float* offsets,
                        int64_t rows, int64_t vocab, int64_t k, CandidateRank rank, float* values,
                        int64_t* tokens, float* log_probs) {
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  std::vector<std::pair<float, int64_t>> ranked(static_cast<size_t>(vocab));
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = logits + r * vocab;
    float m = kMinusInf;
    for (int64_t j = 0; j < vocab; ++j) m = std::max(m, x[j]);
    double total = 0.0;
    for (int64_t j = 0; j < vocab; ++j) total += std::exp(static_cast<double>(x[j]) - m);
    const auto log_total = static_cast<float>(std::log(total));
    const float offset = offsets != nullptr ? offsets[r] : 0.0f;
    for (int64_t j = 0; j < vocab; ++j) {
      float value = rank == CandidateRank::kByLogit ? x[j] : (x[j] - m) - log_total + offset;
      if (suppressed != nullptr && suppressed[j] != 0) value = kMinusInf;
      ranked[static_cast<size_t>(j)] = {value, j};
    }
    std::partial_sort(ranked.begin(), ranked.begin() + k, ranked.end(),
                      [](const auto& a, const auto& b) {
                        return a.first > b.first || (a.first == b.first && a.second < b.second);
                      });
    for (int64_t i = 0; i < k; ++i) {
      const int64_t j = ranked[static_cast<size_t>(i)].second;
      values[r * k + i] = ranked[static_cast<size_t>(i)].first;
      tokens[r * k + i] = j;
      log_probs[r * k + i] = (x[j] - m) - log_total;
    }
  }
}

}  // namespace

TopCandidates top_candidates(const Tensor& logits, const Tensor& suppressed, const Tensor& offsets,
                             int64_t k, CandidateRank rank) {
  constexpr const char* kOp = "top_candidates";
  detail::check_defined(kOp, "logits", logits);
  const Device device = detail::serving_device(kOp, {{"logits", logits}});
  detail::check_float(kOp, "logits", logits, device);
  detail::check_rank(kOp, "logits", logits, 2);
  const int64_t rows = logits.size(0);
  const int64_t vocab = logits.size(1);
  OASR_CHECK(k >= 1 && k <= vocab, kInvalidArgument, kOp, ": k must be in [1, ", vocab, "], got ",
             k);
  if (suppressed.defined()) {
    OASR_CHECK(suppressed.dtype() == DType::kU8 && suppressed.dim() == 1 &&
                   suppressed.size(0) == vocab && suppressed.device() == device,
               kInvalidArgument, kOp, ": suppressed must be uint8 [", vocab, "] on ", device.str(),
               ", got ", dtype_name(suppressed.dtype()), " ", shape_str(suppressed.shape()));
  }
  if (offsets.defined()) {
    OASR_CHECK(rank == CandidateRank::kByLogProb, kInvalidArgument, kOp,
               ": offsets apply to the log-probability rank only");
    OASR_CHECK(offsets.dtype() == DType::kF32 && offsets.dim() == 1 && offsets.size(0) == rows &&
                   offsets.device() == device,
               kInvalidArgument, kOp, ": offsets must be float32 [", rows, "] on ", device.str());
  }
  const Tensor x = logits.contiguous();
  // The result lives on the host either way (the searches read it there).
  TopCandidates out{Tensor::empty({rows, k}, DType::kF32), Tensor::empty({rows, k}, DType::kI64),
                    Tensor::empty({rows, k}, DType::kF32)};
  if (rows == 0) return out;
  on_device(
      kOp, device,
      [&] {
        top_candidates_cpu(
            x.data<float>(), suppressed.defined() ? suppressed.data<uint8_t>() : nullptr,
            offsets.defined() ? offsets.data<float>() : nullptr, rows, vocab, k, rank,
            out.values.data<float>(), out.tokens.data<int64_t>(), out.log_probs.data<float>());
      },
      [&](auto) {
        TopCandidates there{Tensor::empty({rows, k}, DType::kF32, device),
                            Tensor::empty({rows, k}, DType::kI64, device),
                            Tensor::empty({rows, k}, DType::kF32, device)};
        cuda::top_candidates(x, suppressed, offsets, k, rank == CandidateRank::kByLogProb,
                             there.values, there.tokens, there.log_probs);
        out = {there.values.to(Device::cpu()), there.tokens.to(Device::cpu()),
               there.log_probs.to(Device::cpu())};
      });
  return out;
}

}  // namespace oasr::ops
