#include "audio/cmvn.h"

#include <cmath>

#include "core/error.h"

namespace oasr::audio {

namespace {

std::vector<float> copy_vector(const Tensor& t, const char* what) {
  OASR_CHECK(t.defined(), kInvalidArgument, "GlobalCmvn: ", what, " is undefined");
  OASR_CHECK(t.dim() == 1, kInvalidArgument, "GlobalCmvn: ", what, " must be 1-D [D], got ",
             t.str());
  OASR_CHECK(t.dtype() == DType::kF32 && t.device().is_cpu(), kInvalidArgument,
             "GlobalCmvn: ", what, " must be a float32 CPU tensor, got ", t.str());
  const Tensor c = t.contiguous();
  const float* p = c.data<float>();
  std::vector<float> values(p, p + c.numel());
  for (size_t i = 0; i < values.size(); ++i) {
    OASR_CHECK(std::isfinite(values[i]), kInvalidArgument, "GlobalCmvn: ", what, "[", i,
               "] is not finite (", values[i], "); the CMVN statistics are damaged");
  }
  return values;
}

}  // namespace

GlobalCmvn::GlobalCmvn(const Tensor& mean, const Tensor& istd, bool normalize_variance)
    : mean_(copy_vector(mean, "mean")),
      istd_(copy_vector(istd, "istd")),
      normalize_variance_(normalize_variance) {
  OASR_CHECK(mean_.size() == istd_.size(), kInvalidArgument, "GlobalCmvn: mean has ", mean_.size(),
             " entries but istd has ", istd_.size());
  OASR_CHECK(!mean_.empty(), kInvalidArgument, "GlobalCmvn: mean and istd are empty");
}

Tensor GlobalCmvn::apply(const Tensor& features) const {
  Tensor out = features.contiguous().clone();
  apply_(out);
  return out;
}

void GlobalCmvn::apply_(Tensor& features) const {
  OASR_CHECK(features.dtype() == DType::kF32 && features.device().is_cpu(), kInvalidArgument,
             "GlobalCmvn: features must be float32 on the CPU, got ", features.str());
  OASR_CHECK(features.dim() >= 1 && features.size(-1) == dim(), kInvalidArgument,
             "GlobalCmvn: features ", features.str(), " do not end in the CMVN dimension ", dim());
  OASR_CHECK(features.is_contiguous(), kInvalidArgument,
             "GlobalCmvn: apply_ needs a contiguous tensor (use apply())");
  float* x = features.data<float>();
  const int64_t d = dim();
  const int64_t rows = d == 0 ? 0 : features.numel() / d;
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * d;
    for (int64_t j = 0; j < d; ++j) {
      const float centred = row[j] - mean_[static_cast<size_t>(j)];
      row[j] = normalize_variance_ ? centred * istd_[static_cast<size_t>(j)] : centred;
    }
  }
}

}  // namespace oasr::audio
