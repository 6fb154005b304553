#include "asr/engine_config.h"

#include <cmath>
#include <sstream>

#include "core/error.h"
#include "ops/cpu_threads.h"

namespace oasr::engine {

void EngineConfig::validate(bool on_this_machine) const {
  OASR_CHECK(!ckpt_dir.empty(), kInvalidArgument,
             "no checkpoint directory given; pass --ckpt-dir DIR");
  OASR_CHECK(max_batch_size >= 1, kInvalidArgument,
             "max_batch_size (--max-batch-size) must be >= 1, got ", max_batch_size);
  OASR_CHECK(threads >= 0, kInvalidArgument, "threads (--threads) must be >= 0 (0: the machine's ",
             ops::default_cpu_threads(), " hardware threads), got ", threads);
  const Device d = served_device();
  const DType served = served_dtype();
  if (d.is_cuda()) {
    if (!on_this_machine) return;
    OASR_CHECK(cuda_available(), kUnsupported, "device '", device,
               "' asked for, but no CUDA GPU is usable here (this build has no CUDA backend, or "
               "no GPU is visible): build with -DOASR_WITH_CUDA=ON on a machine with an NVIDIA "
               "GPU and driver, check CUDA_VISIBLE_DEVICES, or use --device cpu");
    OASR_CHECK(d.index < cuda_device_count(), kInvalidArgument, "device '", device, "': only ",
               cuda_device_count(), " CUDA device(s) are visible");
  } else {
    OASR_CHECK(served == DType::kF32, kUnsupported, "dtype ", dtype_name(served),
               " on the CPU: the CPU bodies serve float32 only; use --dtype float32 (the CPU "
               "default) or --device cuda for float16/bfloat16");
  }
}

Device EngineConfig::served_device() const {
  return parse_device(device);
}

MaterializeOptions EngineConfig::materialize_options() const {
  MaterializeOptions options;
  options.device = served_device();
  options.dtype = served_dtype();
  return options;
}

DType EngineConfig::served_dtype() const {
  if (dtype.empty()) return served_device().is_cuda() ? DType::kF16 : DType::kF32;
  const std::optional<DType> parsed = parse_dtype(dtype);
  OASR_CHECK(
      parsed && (*parsed == DType::kF32 || *parsed == DType::kF16 || *parsed == DType::kBF16),
      kInvalidArgument, "dtype '", dtype, "' is not served; use float32, float16 or bfloat16");
  return *parsed;
}

std::string EngineConfig::dump() const {
  std::ostringstream out;
  out << "ckpt_dir=" << ckpt_dir.string() << " device=" << device
      << " dtype=" << (dtype.empty() ? "default" : dtype) << " max_batch_size=" << max_batch_size
      << " threads=" << (threads == 0 ? std::string("default") : std::to_string(threads))
      << " quantization=(" << quantization.dump() << ")";
  return out.str();
}

}  // namespace oasr::engine
