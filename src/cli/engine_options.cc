#include "cli/engine_options.h"

#include "models/architecture.h"

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
  return config;
}

std::string decode_flag_help(const models::DeclaredDecodeOption& option) {
  std::string help;
  for (size_t i = 0; i < option.architectures.size(); ++i) {
    const engine::DecodeOptionSpec& spec = *option.specs[i];
    help += (help.empty() ? "" : "; ") + option.architectures[i]->display_name + ": " + spec.help;
    if (spec.kind == engine::DecodeValueKind::kText && !spec.choices.empty()) {
      help += " (" + engine::decode_takes(spec) + ")";
    }
    if (!spec.default_text.empty()) help += ", default " + spec.default_text;
  }
  return help;
}

void add_engine_flags(CLI::App& app, EngineFlags& flags) {
  const auto add = [&](const std::string& names, const std::string& key, const char* type,
                       const std::string& help) {
    EngineFlags::Flag& flag = flags.flags.emplace_back();
    flag.key = key;
    CLI::Option* option = app.add_option(names, flag.value, help)->type_name(type);
    flag.option = option;
    return option;
  };
  std::string checkpoints;
  for (const models::Architecture* architecture : models::registered_architectures()) {
    checkpoints += (checkpoints.empty() ? "" : "; ") + architecture->display_name + ": " +
                   architecture->looks_for;
  }
  add("--ckpt-dir", "ckpt_dir", "DIR", "checkpoint directory -- " + checkpoints)->required();
  add("--device", "device", "TEXT",
      "cpu | cuda | cuda:N (needs a CUDA build and a GPU; default cpu)");
  add("--dtype", "dtype", "TEXT",
      "served dtype: float32 | float16 | bfloat16 (default: float32 on cpu, float16 on cuda; "
      "the CPU serves float32 only)");
  add("--max-batch-size", "max_batch_size", "INT", "utterances per batch (default 8)");
  add("--threads", "threads", "INT",
      "CPU threads for every op, oasr's and OpenBLAS's together (default: the machine's "
      "hardware threads)");
  // The decode flags: one per key any registered architecture declares
  // (models/architecture.h), its help saying which architectures read it.
  for (const models::DeclaredDecodeOption& option : models::declared_decode_options()) {
    std::string names = engine::decode_flag(option.spec.key);
    for (const std::string& alias : option.spec.aliases) names += "," + engine::decode_flag(alias);
    const std::string help = decode_flag_help(option);
    if (option.spec.kind == engine::DecodeValueKind::kBool) {
      EngineFlags::Flag& flag = flags.flags.emplace_back();
      flag.key = option.spec.key;
      flag.option = app.add_flag(names + "{true}", flag.value, help);
    } else {
      add(names.c_str(), option.spec.key.c_str(), engine::decode_kind_type_name(option.spec.kind),
          help);
    }
  }
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
