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
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      // One value per occurrence: the audio files after it stay positional.
      ->allow_extra_args(false);
}

quant::QuantizationConfig QuantizationFlags::to_config() const {
  quant::QuantizationConfig config = quant::QuantizationConfig::from_options(scheme, options);
  config.validate();
  return config;
}

void add_engine_flags(CLI::App& app, EngineFlags& flags) {
  const auto add = [&](const char* names, const char* key, const char* type,
                       const std::string& help) {
    EngineFlags::Flag& flag = flags.flags.emplace_back();
    flag.key = key;
    CLI::Option* option = app.add_option(names, flag.value, help)->type_name(type);
    flag.option = option;
    return option;
  };
  add("--ckpt-dir", "ckpt_dir", "DIR",
      "checkpoint directory: native oasr, a WeNet experiment (train.yaml, final.pt), or a "
      "Whisper model in Hugging Face layout (config.json, model.safetensors)")
      ->required();
  add("--device", "device", "TEXT",
      "cpu | cuda | cuda:N (needs a CUDA build and a GPU; default cpu)");
  add("--dtype", "dtype", "TEXT",
      "served dtype: float32 | float16 | bfloat16 (default: float32 on cpu, float16 on cuda; "
      "the CPU serves float32 only)");
  add("--max-batch-size", "max_batch_size", "INT", "utterances per batch (default 8)");
  add("--threads", "threads", "INT",
      "CPU threads for every op, oasr's and OpenBLAS's together (default: the machine's "
      "hardware threads)");
  add("--decode-method,--decoding-method", "decode_method", "TEXT",
      "U2++: ctc_greedy_search | ctc_prefix_beam_search | attention_rescoring (default: "
      "attention_rescoring); Whisper: greedy_search | beam_search (default: greedy_search)");
  add("--beam-size", "beam_size", "INT",
      "U2++: prefix beam size (default 10); Whisper beam_search: beams (default 5)");
  add("--ctc-weight", "ctc_weight", "FLOAT",
      "weight of the CTC score in attention rescoring (default 0)");
  add("--reverse-weight", "reverse_weight", "FLOAT",
      "share of the right-to-left decoder in attention rescoring (default 0)");
  add("--chunk-size", "chunk_size", "INT",
      "decode chunk by chunk with this many encoder frames per chunk (-1: offline)");
  add("--left-chunks", "left_chunks", "INT",
      "chunks of history kept in the attention cache (-1: all)");
  add("--length-penalty", "length_penalty", "FLOAT",
      "Whisper beam_search: a finished hypothesis scores sum_logprobs / length ^ "
      "length_penalty (default 1.0)");
  {
    EngineFlags::Flag& flag = flags.flags.emplace_back();
    flag.key = "timestamps";
    flag.option = app.add_flag("--timestamps{true}", flag.value,
                               "Whisper: decode timestamp tokens and give segments with start / "
                               "end times (U2++ gives token times always)");
  }
  add("--long-form", "long_form", "TEXT",
      "Whisper audio over 30 s: sequential (seek on the last timestamp, as transformers' and "
      "openai-whisper's long-form transcription; default) | windows (independent 30 s windows)");
  add("--temperatures", "temperatures", "LIST",
      "Whisper temperature fallback: temperatures tried in order while a threshold rejects "
      "the decode (default 0: decode once); openai-whisper's: 0,0.2,0.4,0.6,0.8,1.0");
  add("--compression-ratio-threshold", "compression_ratio_threshold", "FLOAT",
      "Whisper fallback: reject a decode whose text's gzip compression ratio exceeds this "
      "(default with fallback: 2.4)");
  add("--logprob-threshold", "logprob_threshold", "FLOAT",
      "Whisper fallback: reject a decode whose average token log-probability is below this "
      "(default with fallback: -1.0)");
  add("--no-speech-threshold", "no_speech_threshold", "FLOAT",
      "Whisper fallback: a window whose <|nospeech|> probability exceeds this is silence and "
      "skipped, unless its average log-probability is above --logprob-threshold (default with "
      "fallback: 0.6)");
  add_quantization_flags(app, flags.quantization);
}

engine::OptionList EngineFlags::given() const {
  engine::OptionList out;
  for (const Flag& flag : flags) {
    if (flag.option != nullptr && flag.option->count() > 0) out.emplace_back(flag.key, flag.value);
  }
  if (!quantization.scheme.empty()) out.emplace_back("quantization", quantization.scheme);
  for (const std::string& option : quantization.options) {
    out.emplace_back("quantization_option", option);
  }
  return out;
}

engine::EngineConfig EngineFlags::to_config() const {
  return engine::engine_config_from_options(given());
}

}  // namespace oasr::cli
