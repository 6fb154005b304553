// The compiled native sm90 configurations, one X(...) row each:
//   X(index, tile_m, tile_n, cluster_m, cluster_n, cooperative)
// Every (format, output) pair is instantiated for each row
// (native/sm90_<format>_<output>.cu), so a row costs eight kernels of compile
// time: keep only what the tuning table (native/sm90_tuning_table.inc) picks.
// K tiles are always 128 deep (see native/sm90_gemm.cuh, e4m3 determinism).
#pragma once

#define OASR_SM90_CONFIGS(X) \
  X(0, 64, 128, 1, 1, false) \
  X(1, 128, 128, 2, 1, true) \
  X(2, 128, 256, 1, 1, true)
