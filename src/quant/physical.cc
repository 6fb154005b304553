#include "quant/physical.h"

#include "core/error.h"
#include "quant/number_format.h"

namespace oasr::quant {

std::string_view to_string(Nvfp4ScaleLayout layout) {
  return layout == Nvfp4ScaleLayout::k128x4 ? "128x4" : "linear";
}

PhysicalSpec materialize(const QuantScheme& scheme, int sm) {
  const NumberFormat& format = number_format(scheme.weight.dtype);
  OASR_CHECK(format.physical != nullptr, kUnsupported, "materialize: no physical spec for ",
             format.name, " weights (scheme '", scheme.name, "')");
  return format.physical(scheme, sm);
}

}  // namespace oasr::quant
