#include "layers/conv.h"

#include "ops/depthwise_conv1d.h"
#include "ops/embedding.h"

namespace oasr::layers {

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_h, int64_t kernel_w,
               int64_t stride_h, int64_t stride_w, bool bias)
    : Module("Conv2d"), out_channels_(out_channels), has_bias_(bias) {
  options_.stride_h = stride_h;
  options_.stride_w = stride_w;
  register_parameter("weight", {out_channels, in_channels, kernel_h, kernel_w});
  if (bias) register_parameter("bias", {out_channels});
}

Tensor Conv2d::forward(const Tensor& x) const {
  return ops::conv2d(x, param("weight"), has_bias_ ? param("bias") : Tensor(), options_);
}

DepthwiseConv1d::DepthwiseConv1d(int64_t channels, int64_t kernel_size, bool bias)
    : Module("DepthwiseConv1d"), kernel_size_(kernel_size), has_bias_(bias) {
  register_parameter("weight", {channels, 1, kernel_size});
  if (bias) register_parameter("bias", {channels});
}

Tensor DepthwiseConv1d::forward(const Tensor& x, int64_t pad_left, int64_t pad_right) const {
  return ops::depthwise_conv1d(x, param("weight"), has_bias_ ? param("bias") : Tensor(), pad_left,
                               pad_right);
}

Embedding::Embedding(int64_t num_embeddings, int64_t dim) : Module("Embedding") {
  register_parameter("weight", {num_embeddings, dim});
}

Tensor Embedding::forward(const Tensor& ids) const {
  return ops::embedding(ids, param("weight"));
}

}  // namespace oasr::layers
