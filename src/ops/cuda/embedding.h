// CUDA body of ops/embedding.h: a row gather, so every dtype's result is the
// table's bits, identical to the CPU body.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace oasr::ops::cuda {

// out[i, :] = table[rows[i], :] for i in [0, count); rows is a device buffer
// of int64 row numbers (checked against the table on the host by
// ops::embedding; a row outside [0, vocab) is clamped into it), table
// [vocab, features] and out contiguous, one dtype.
void embedding(const int64_t* rows, int64_t count, const void* table, int64_t vocab,
               int64_t features, void* out, DType dtype, int device_index);

}  // namespace oasr::ops::cuda
