// Elementwise activations, bit-identical to core/activations.h. Where the
// dispatch level has AVX2 + FMA (core/cpu_features.h) eight lanes run at a
// time through core/activations_avx2.h, whose bodies return the scalar
// functions' bits; the scalar loop serves the rest (compiled for the
// baseline x86-64 target, its std::fma is a correctly rounded libm call).
// Large tensors are split over the worker pool (ops/cpu_threads.h) in fixed
// chunks; an element's bits do not depend on which thread computed it.
#include "ops/cpu/activation.h"

#include <algorithm>
#include <cstring>

#include "core/cpu_features.h"
#include "core/error.h"
#include "ops/cpu_threads.h"
#if defined(__x86_64__)
#include "core/activations_avx2.h"
#endif

namespace oasr::ops::cpu {
namespace {

constexpr int64_t kChunk = 1 << 15;  // elements per pool task

template <Activation kActivation>
void apply_scalar(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = act::apply(kActivation, x[i]);
}

#if defined(__x86_64__)
template <Activation kActivation>
OASR_AVX2_TARGET void apply_avx2(const float* x, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, avx2::apply_ps(kActivation, _mm256_loadu_ps(x + i)));
  }
  if (i < n) {  // the tail through the same vector body, padded with zeros
    alignas(32) float lanes[8] = {};
    std::memcpy(lanes, x + i, sizeof(float) * static_cast<size_t>(n - i));
    _mm256_store_ps(lanes, avx2::apply_ps(kActivation, _mm256_load_ps(lanes)));
    std::memcpy(out + i, lanes, sizeof(float) * static_cast<size_t>(n - i));
  }
}
#endif

template <Activation kActivation>
void apply_dispatch(const float* x, float* out, int64_t n) {
  const auto body = [&](const float* in, float* dst, int64_t count) {
#if defined(__x86_64__)
    if (cpu_has(CpuIsa::kAvx2)) {
      apply_avx2<kActivation>(in, dst, count);
      return;
    }
#endif
    apply_scalar<kActivation>(in, dst, count);
  };
  if (n <= kChunk) {
    body(x, out, n);
    return;
  }
  parallel_for((n + kChunk - 1) / kChunk, [&](int64_t task) {
    const int64_t begin = task * kChunk;
    body(x + begin, out + begin, std::min(kChunk, n - begin));
  });
}

}  // namespace

void activation_f32(const float* x, float* out, int64_t n, Activation activation) {
  switch (activation) {
    case Activation::kNone:
      if (out != x) std::copy(x, x + n, out);
      return;
    case Activation::kRelu:
      return apply_dispatch<Activation::kRelu>(x, out, n);
    case Activation::kSwish:
      return apply_dispatch<Activation::kSwish>(x, out, n);
    case Activation::kGeluErf:
      return apply_dispatch<Activation::kGeluErf>(x, out, n);
    case Activation::kGeluTanh:
      return apply_dispatch<Activation::kGeluTanh>(x, out, n);
    case Activation::kSigmoid:
      return apply_dispatch<Activation::kSigmoid>(x, out, n);
    case Activation::kTanh:
      return apply_dispatch<Activation::kTanh>(x, out, n);
  }
  OASR_THROW(kInternal, "activation: unknown Activation value ", static_cast<int>(activation));
}

}  // namespace oasr::ops::cpu
