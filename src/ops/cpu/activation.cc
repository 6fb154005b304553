// Elementwise activations, bit-identical to core/activations.h. Where the
// dispatch level has AVX-512 (core/cpu_features.h) sixteen lanes run at a
// time through core/activations_avx512.h, at AVX2 + FMA eight through
// core/activations_avx2.h; both return the scalar functions' bits, and the
// scalar loop serves the rest (compiled for the
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
#include "core/activations_avx512.h"
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

OASR_AVX512_WARNINGS_OFF
template <Activation kActivation>
OASR_AVX512_TARGET void apply_avx512(const float* x, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(out + i, avx512::apply_ps(kActivation, _mm512_loadu_ps(x + i)));
  }
  if (i < n) {  // the tail through the same body; masked-off lanes read as zero
    const __mmask16 tail = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(out + i, tail,
                          avx512::apply_ps(kActivation, _mm512_maskz_loadu_ps(tail, x + i)));
  }
}
OASR_AVX512_WARNINGS_ON
#endif

template <Activation kActivation>
void apply_dispatch(const float* x, float* out, int64_t n) {
  const auto body = [&](const float* in, float* dst, int64_t count) {
#if defined(__x86_64__)
    if (cpu_has(CpuIsa::kAvx512Vnni)) {
      apply_avx512<kActivation>(in, dst, count);
      return;
    }
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
