#include "engine/engine_config.h"

#include <cmath>
#include <sstream>

#include "core/error.h"
#include "ops/cpu_threads.h"

namespace oasr::engine {

bool DecodeOverrides::empty() const {
  return !method && !beam_size && !ctc_weight && !reverse_weight && !chunk_size && !left_chunks &&
         !length_penalty && !timestamps && !long_form && !temperatures &&
         !compression_ratio_threshold && !logprob_threshold && !no_speech_threshold;
}

DecodeOverrides DecodeOverrides::overlaid(const DecodeOverrides& over) const {
  DecodeOverrides out = *this;
  if (over.method) out.method = over.method;
  if (over.beam_size) out.beam_size = over.beam_size;
  if (over.ctc_weight) out.ctc_weight = over.ctc_weight;
  if (over.reverse_weight) out.reverse_weight = over.reverse_weight;
  if (over.chunk_size) out.chunk_size = over.chunk_size;
  if (over.left_chunks) out.left_chunks = over.left_chunks;
  if (over.length_penalty) out.length_penalty = over.length_penalty;
  if (over.timestamps) out.timestamps = over.timestamps;
  if (over.long_form) out.long_form = over.long_form;
  if (over.temperatures) out.temperatures = over.temperatures;
  if (over.compression_ratio_threshold) {
    out.compression_ratio_threshold = over.compression_ratio_threshold;
  }
  if (over.logprob_threshold) out.logprob_threshold = over.logprob_threshold;
  if (over.no_speech_threshold) out.no_speech_threshold = over.no_speech_threshold;
  return out;
}

void DecodeOptions::validate() const {
  OASR_CHECK(beam_size >= 1 && beam_size <= kMaxBeamSize, kInvalidArgument,
             "beam_size (--beam-size) must be in [1, ", kMaxBeamSize, "], got ", beam_size);
  OASR_CHECK(ctc_weight >= 0.0 && std::isfinite(ctc_weight), kInvalidArgument,
             "ctc_weight (--ctc-weight) must be a finite number >= 0, got ", ctc_weight);
  OASR_CHECK(reverse_weight >= 0.0 && reverse_weight <= 1.0, kInvalidArgument,
             "reverse_weight (--reverse-weight) must be in [0, 1], got ", reverse_weight);
  OASR_CHECK(chunk_size == -1 || chunk_size > 0, kInvalidArgument,
             "chunk_size (--chunk-size) must be -1 (offline) or a positive number of encoder "
             "frames, got ",
             chunk_size);
  OASR_CHECK(left_chunks >= -1, kInvalidArgument,
             "left_chunks (--left-chunks) must be -1 (all) or >= 0, got ", left_chunks);
  OASR_CHECK(std::isfinite(length_penalty), kInvalidArgument,
             "length_penalty (--length-penalty) must be a finite number, got ", length_penalty);
  OASR_CHECK(long_form == "sequential" || long_form == "windows", kInvalidArgument,
             "long_form (--long-form) must be sequential or windows, got '", long_form, "'");
  OASR_CHECK(!temperatures.empty(), kInvalidArgument,
             "temperatures (--temperatures) needs at least one value, e.g. 0 or "
             "0,0.2,0.4,0.6,0.8,1.0");
  for (size_t i = 0; i < temperatures.size(); ++i) {
    OASR_CHECK(std::isfinite(temperatures[i]) && temperatures[i] >= 0.0 && temperatures[i] <= 10.0,
               kInvalidArgument, "temperatures (--temperatures): value ", i + 1,
               " must be a number in [0, 10], got ", temperatures[i]);
  }
  OASR_CHECK(!compression_ratio_threshold || std::isfinite(*compression_ratio_threshold),
             kInvalidArgument,
             "compression_ratio_threshold (--compression-ratio-threshold) must be a finite "
             "number, got ",
             compression_ratio_threshold.value_or(0.0));
  OASR_CHECK(!logprob_threshold || std::isfinite(*logprob_threshold), kInvalidArgument,
             "logprob_threshold (--logprob-threshold) must be a finite number, got ",
             logprob_threshold.value_or(0.0));
  OASR_CHECK(!no_speech_threshold || (*no_speech_threshold >= 0.0 && *no_speech_threshold <= 1.0),
             kInvalidArgument,
             "no_speech_threshold (--no-speech-threshold) is a probability in [0, 1], got ",
             no_speech_threshold.value_or(0.0));
}

std::string DecodeOptions::dump() const {
  std::ostringstream out;
  out << "method=" << method << " beam_size=" << beam_size << " ctc_weight=" << ctc_weight
      << " reverse_weight=" << reverse_weight << " chunk_size=" << chunk_size
      << " left_chunks=" << left_chunks << " length_penalty=" << length_penalty
      << " timestamps=" << (timestamps ? "true" : "false") << " long_form=" << long_form
      << " temperatures=";
  for (size_t i = 0; i < temperatures.size(); ++i) out << (i ? "," : "") << temperatures[i];
  const auto optional = [&](const char* name, const std::optional<double>& v) {
    out << " " << name << "=";
    if (v) {
      out << *v;
    } else {
      out << "none";
    }
  };
  optional("compression_ratio_threshold", compression_ratio_threshold);
  optional("logprob_threshold", logprob_threshold);
  optional("no_speech_threshold", no_speech_threshold);
  return out.str();
}

void EngineConfig::validate() const {
  OASR_CHECK(!ckpt_dir.empty(), kInvalidArgument,
             "no checkpoint directory given; pass --ckpt-dir DIR");
  OASR_CHECK(max_batch_size >= 1, kInvalidArgument,
             "max_batch_size (--max-batch-size) must be >= 1, got ", max_batch_size);
  OASR_CHECK(threads >= 0, kInvalidArgument, "threads (--threads) must be >= 0 (0: the machine's ",
             ops::default_cpu_threads(), " hardware threads), got ", threads);
  const Device d = served_device();
  const DType served = served_dtype();
  if (d.is_cuda()) {
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
  quantization.validate();
}

Device EngineConfig::served_device() const {
  return parse_device(device);
}

models::MaterializeOptions EngineConfig::materialize_options() const {
  models::MaterializeOptions options;
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
