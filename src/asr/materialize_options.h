// How a checkpoint is built into a served model, whatever its architecture
// (models/architecture.h, Architecture::materialize; models/ names it
// engine::MaterializeOptions): the served dtype and
// device, the GEMM lane override, and whether lanes are bound at all.
#pragma once

#include <string>

#include "core/device.h"
#include "core/dtype.h"

namespace oasr::engine {

struct MaterializeOptions {
  DType dtype = DType::kF32;  // the served dtype
  Device device = Device::cpu();
  std::string scaled_mm_backend;  // "" = OASR_SCALED_MM_BACKEND
  bool bind = true;               // false: leave lanes unbound (oasr quantize only writes)
  std::string recipe;             // provenance of an online spec ("online" when empty)
};

}  // namespace oasr::engine
