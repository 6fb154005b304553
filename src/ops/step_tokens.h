// A decoder step's token position where the device reads it. The Whisper
// decoder step runs as a recorded device graph (core/device_graph.h): the
// kernels of a replay are those of the recording, so nothing in them may
// depend on the KV cache's length as the host knew it then. These ops take
// that length as past_tokens, an int32 [1] on the device (the graph's input,
// refreshed before each replay), and read it where they run.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace oasr::ops {

// int64 [n] on past_tokens' device: past_tokens[0] + i for i in [0, n), the
// learned-position rows of a step's n tokens.
Tensor positions_after(const Tensor& past_tokens, int64_t n);

// store[r, p + t] = x[r, t] for t in [0, n), p = past_tokens[0]: x is
// [R, n, H, D] (any strides), store [R, capacity, H, D] of x's dtype (float32
// on the CPU; float32 / float16 / bfloat16 on CUDA) with each row's tokens
// contiguous; an exact copy. The CPU body refuses a window outside the
// store; the CUDA body skips what falls outside (the KV cache refuses such a
// step on the host before it runs).
void write_tokens_at(const Tensor& x, Tensor store, const Tensor& past_tokens);

}  // namespace oasr::ops
