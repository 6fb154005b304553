#include "ops/attention.h"

#include <string>

#include "core/device_dispatch.h"
#include "core/error.h"
#include "ops/cuda/attention.h"

namespace oasr::ops {
namespace {

constexpr int64_t kHeadDim = 64;
constexpr int64_t kAlignElements = 8;  // 16 bytes of a 16-bit dtype

bool aligned(const Tensor& t) {
  if (reinterpret_cast<uintptr_t>(t.raw_data()) % 16 != 0) return false;
  const auto& strides = t.strides();
  if (strides.back() != 1) return false;
  for (size_t d = 0; d + 1 < strides.size(); ++d) {
    if (t.size(static_cast<int64_t>(d)) > 1 && strides[d] % kAlignElements != 0) return false;
  }
  return true;
}

// Empty when the fused kernel serves `in`, else the first reason it does not.
std::string refusal(const RelPositionAttentionInputs& in) {
  for (const Tensor* t : {&in.q, &in.k, &in.v, &in.p, &in.pos_bias_u, &in.pos_bias_v}) {
    if (!t->defined()) return "an input is undefined";
  }
  const Tensor& q = in.q;
  if (!q.device().is_cuda()) return "it runs on CUDA only";
  if (q.dim() != 4 || in.k.dim() != 4 || in.v.dim() != 4 || in.p.dim() != 4) {
    return "q, k, v and p must be [B, T, H, d_k]";
  }
  const int64_t batch = q.size(0);
  const int64_t heads = q.size(2);
  const int64_t keys = in.k.size(1);
  // The grid: query tiles in x, heads in y, batch rows in z; int offsets.
  if (batch > 65535 || heads > 65535 || q.size(1) >= (int64_t{1} << 30) ||
      keys >= (int64_t{1} << 30)) {
    return "the batch, head count or length is beyond the kernel's grid";
  }
  if (q.size(3) != kHeadDim) return "d_k must be 64, got " + std::to_string(q.size(3));
  const Shape key_shape{batch, keys, heads, kHeadDim};
  if (in.k.shape() != key_shape || in.v.shape() != key_shape) {
    return "k and v must be " + shape_str(key_shape);
  }
  if (in.p.shape() != Shape{1, keys, heads, kHeadDim}) return "p must be [1, Tk, H, 64]";
  if (in.pos_bias_u.shape() != Shape{heads, kHeadDim} ||
      in.pos_bias_v.shape() != Shape{heads, kHeadDim} || !in.pos_bias_u.is_contiguous() ||
      !in.pos_bias_v.is_contiguous()) {
    return "pos_bias_u and pos_bias_v must be contiguous [H, 64]";
  }
  for (const Tensor* t : {&in.k, &in.v, &in.p, &in.pos_bias_u, &in.pos_bias_v}) {
    if (t->dtype() != q.dtype() || t->device() != q.device()) {
      return "every input must share q's dtype and device";
    }
  }
  for (const Tensor* t : {&in.q, &in.k, &in.v, &in.p, &in.pos_bias_u, &in.pos_bias_v}) {
    if (!aligned(*t)) return "rows must be 16-byte aligned";
  }
  if (in.mask.defined()) {
    const Tensor& m = in.mask;
    if (m.dtype() != DType::kU8 || m.device() != q.device() || !m.is_contiguous()) {
      return "the mask must be contiguous uint8 on q's device";
    }
    if (m.dim() != 4 || m.size(0) != batch || m.size(1) != 1 ||
        (m.size(2) != 1 && m.size(2) != q.size(1)) || m.size(3) != keys) {
      return "the mask must be [B, 1, 1, Tk] or [B, 1, Tq, Tk], got " + shape_str(m.shape());
    }
  }
  const bool supported = on_device(
      "rel_position_attention", q.device(), [] { return false; },
      [&](auto on) { return cuda::rel_position_attention_supported(q.dtype(), on.device_index); });
  if (!supported) return "it serves float16 and bfloat16 on sm_80 or newer";
  return {};
}

}  // namespace

bool rel_position_attention_fusable(const RelPositionAttentionInputs& in) {
  return refusal(in).empty();
}

Tensor rel_position_attention(const RelPositionAttentionInputs& in) {
  const std::string why = refusal(in);
  OASR_CHECK(why.empty(), kInvalidArgument, "rel_position_attention: ", why);
  const Tensor& q = in.q;
  const int64_t batch = q.size(0);
  const int64_t steps = q.size(1);
  const int64_t heads = q.size(2);
  Tensor out = Tensor::empty({batch, steps, heads * kHeadDim}, q.dtype(), q.device());
  on_device(
      "rel_position_attention", q.device(),
      [] { OASR_THROW(kInternal, "rel_position_attention: no CPU body"); },
      [&](auto on) {
        const auto operand = [](const Tensor& t) {
          return cuda::AttentionOperand{t.raw_data(), t.size(0) > 1 ? t.strides()[0] : 0,
                                        t.strides()[1], t.strides()[2]};
        };
        cuda::RelPositionAttentionArgs args;
        args.q = operand(q);
        args.k = operand(in.k);
        args.v = operand(in.v);
        args.p = operand(in.p);
        args.pos_bias_u = in.pos_bias_u.raw_data();
        args.pos_bias_v = in.pos_bias_v.raw_data();
        if (in.mask.defined()) {
          args.mask = static_cast<const uint8_t*>(in.mask.raw_data());
          args.mask_batch_stride = in.mask.size(2) * in.mask.size(3);
          args.mask_query_stride = in.mask.size(2) == 1 ? 0 : in.mask.size(3);
        }
        args.out = out.raw_data();
        args.batch = batch;
        args.heads = heads;
        args.query_steps = steps;
        args.key_steps = in.k.size(1);
        args.scale = in.scale;
        args.dtype = q.dtype();
        args.device_index = on.device_index;
        cuda::rel_position_attention(args);
      });
  return out;
}

}  // namespace oasr::ops
