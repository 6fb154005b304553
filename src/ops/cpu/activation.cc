// The activations use explicit fma. Compiled for the baseline x86-64 target,
// std::fma is a call into libm (correctly rounded, but slow); where the CPU
// has FMA, the loop below is compiled a second time with the instruction
// enabled and picked at run time. Both versions round every operation
// identically (an fma is an fma, and -ffp-contract=off still forbids new
// ones), so the choice changes speed only, never bits.
#include "ops/cpu/activation.h"

#include "core/error.h"

namespace oasr::ops::cpu {
namespace {

template <Activation kActivation>
inline void apply_loop(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = act::apply(kActivation, x[i]);
}

template <Activation kActivation>
void apply_baseline(const float* x, float* out, int64_t n) {
  apply_loop<kActivation>(x, out, n);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define OASR_ACTIVATION_FMA_CLONE 1
// flatten: inline the header's functions here, so they are compiled with FMA.
template <Activation kActivation>
__attribute__((target("fma"), flatten)) void apply_fma(const float* x, float* out, int64_t n) {
  apply_loop<kActivation>(x, out, n);
}

bool cpu_has_fma() {
  static const bool has_fma = __builtin_cpu_supports("fma");
  return has_fma;
}
#endif

template <Activation kActivation>
void apply_dispatch(const float* x, float* out, int64_t n) {
#if defined(OASR_ACTIVATION_FMA_CLONE)
  if (cpu_has_fma()) {
    apply_fma<kActivation>(x, out, n);
    return;
  }
#endif
  apply_baseline<kActivation>(x, out, n);
}

}  // namespace

void activation_f32(const float* x, float* out, int64_t n, Activation activation) {
  switch (activation) {
    case Activation::kNone:
      if (out != x) {
        for (int64_t i = 0; i < n; ++i) out[i] = x[i];
      }
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
