#include "cli/engine_options.h"

namespace oasr::cli {

void add_quantization_flags(CLI::App& app, QuantizationFlags& flags) {
  app.add_option("--quantization", flags.scheme,
                 "quantize a full-precision checkpoint at load: int8_w8a8 | fp8_w8a8 (a quantized "
                 "checkpoint needs no flag)");
  app.add_option("--quantization-option", flags.options,
                 "key=value, repeatable: ignore=GLOB[,GLOB...], "
                 "module_types=linear,pointwise_conv, kv_cache=fp8_e4m3")
      ->take_last()
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

quant::QuantizationConfig QuantizationFlags::to_config() const {
  quant::QuantizationConfig config = quant::QuantizationConfig::from_options(scheme, options);
  config.validate();
  return config;
}

void add_engine_flags(CLI::App& app, EngineFlags& flags) {
  app.add_option("--ckpt-dir", flags.ckpt_dir,
                 "checkpoint directory: native oasr, a WeNet experiment (train.yaml, final.pt), or "
                 "a Whisper model in Hugging Face layout (config.json, model.safetensors)")
      ->required();
  app.add_option("--device", flags.device,
                 "cpu | cuda | cuda:N (CUDA: U2++ full precision; needs a CUDA build and a GPU)");
  app.add_option("--dtype", flags.dtype,
                 "served dtype: float32 | float16 | bfloat16 (default: float32 on cpu, float16 on "
                 "cuda; the CPU serves float32 only)");
  app.add_option("--max-batch-size", flags.max_batch_size, "utterances per batch (default 8)");
  app.add_option("--threads", flags.threads,
                 "CPU threads for every op, oasr's and OpenBLAS's together (default: the "
                 "machine's hardware threads)");
  app.add_option("--decode-method,--decoding-method", flags.decode_method,
                 "U2++: ctc_greedy_search | ctc_prefix_beam_search | attention_rescoring "
                 "(default: attention_rescoring); Whisper: greedy_search | beam_search "
                 "(default: greedy_search)");
  flags.options.beam_size =
      app.add_option("--beam-size", flags.beam_size,
                     "U2++: prefix beam size (default 10); Whisper beam_search: beams (default 5)");
  flags.options.ctc_weight =
      app.add_option("--ctc-weight", flags.ctc_weight,
                     "weight of the CTC score in attention rescoring (default 0)");
  flags.options.reverse_weight =
      app.add_option("--reverse-weight", flags.reverse_weight,
                     "share of the right-to-left decoder in attention rescoring (default 0)");
  flags.options.chunk_size =
      app.add_option("--chunk-size", flags.chunk_size,
                     "decode chunk by chunk with this many encoder frames per chunk (-1: offline)");
  flags.options.left_chunks =
      app.add_option("--left-chunks", flags.left_chunks,
                     "chunks of history kept in the attention cache (-1: all)");
  flags.options.length_penalty =
      app.add_option("--length-penalty", flags.length_penalty,
                     "Whisper beam_search: a finished hypothesis scores sum_logprobs / "
                     "length ^ length_penalty (default 1.0)");
  add_quantization_flags(app, flags.quantization);
}

engine::EngineConfig EngineFlags::to_config() const {
  engine::EngineConfig config;
  config.ckpt_dir = ckpt_dir;
  config.device = device;
  config.dtype = dtype;
  config.max_batch_size = max_batch_size;
  config.threads = threads;
  if (!decode_method.empty()) config.decode.method = decode_method;
  const auto given = [](const CLI::Option* option) {
    return option != nullptr && option->count() > 0;
  };
  if (given(options.beam_size)) config.decode.beam_size = beam_size;
  if (given(options.ctc_weight)) config.decode.ctc_weight = ctc_weight;
  if (given(options.reverse_weight)) config.decode.reverse_weight = reverse_weight;
  if (given(options.chunk_size)) config.decode.chunk_size = chunk_size;
  if (given(options.left_chunks)) config.decode.left_chunks = left_chunks;
  if (given(options.length_penalty)) config.decode.length_penalty = length_penalty;
  config.quantization = quantization.to_config();
  return config;
}

}  // namespace oasr::cli
