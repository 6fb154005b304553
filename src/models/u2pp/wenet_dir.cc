// WeNet experiment directories: which files make the model, the symbol
// table, the CMVN statistics, and the assembly into a ModelSource.
#include "models/u2pp/wenet_dir.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/json_error.h"
#include "core/logging.h"
#include "io/torch_checkpoint.h"

namespace oasr::models {

namespace fs = std::filesystem;

namespace {

constexpr const char* kTrainYaml = "train.yaml";
constexpr const char* kSymbolTableNames[] = {"units.txt", "words.txt", "dict"};

bool is_file(const fs::path& path) {
  std::error_code error;
  return fs::is_regular_file(path, error);
}

std::vector<fs::path> files_with(const fs::path& dir, const std::string& prefix,
                                 const std::string& suffix) {
  std::vector<fs::path> out;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && name.size() >= prefix.size() + suffix.size() &&
        name.rfind(prefix, 0) == 0 &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      out.push_back(entry.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string name_list(const std::vector<fs::path>& paths) {
  std::string out;
  for (const fs::path& path : paths) out += (out.empty() ? "" : ", ") + path.filename().string();
  return out;
}

std::string read_file(const fs::path& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  OASR_CHECK(in.good(), kIo, path.string(), ": cannot open the ", what, " for reading");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

fs::path choose_checkpoint(const fs::path& dir) {
  if (is_file(dir / "final.pt")) return dir / "final.pt";
  const std::vector<fs::path> averaged = files_with(dir, "avg_", ".pt");
  if (averaged.size() == 1) return averaged[0];
  const std::vector<fs::path> all = files_with(dir, "", ".pt");
  OASR_CHECK(!all.empty(), kNotFound, dir.string(), ": no checkpoint (no *.pt file)");
  OASR_THROW(kInvalidArgument, dir.string(), ": no final.pt and ",
             averaged.empty() ? "no" : "several",
             " avg_*.pt, so which checkpoint to use is "
             "ambiguous; candidates: ",
             name_list(all), "; pass the .pt file itself");
}

// A file train.yaml names: as recorded, else the same name beside the
// checkpoint. Empty when neither exists; `looked` gets both places.
fs::path resolve_recorded(const std::string& recorded, const fs::path& dir,
                          std::vector<std::string>& looked) {
  const fs::path as_recorded(recorded);
  if (is_file(as_recorded)) return as_recorded;
  const fs::path beside = dir / as_recorded.filename();
  looked.push_back(recorded + " (as recorded in train.yaml)");
  if (!as_recorded.filename().empty()) {
    if (is_file(beside)) return beside;
    looked.push_back(beside.string() + " (beside the checkpoint)");
  }
  return {};
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& part : parts) out += (out.empty() ? "" : ", ") + part;
  return out;
}

double parse_number(const std::string& token, const fs::path& path, size_t index) {
  char* end = nullptr;
  const double value = std::strtod(token.c_str(), &end);
  OASR_CHECK(!token.empty() && end == token.c_str() + token.size(), kCorruptFile, path.string(),
             ": Kaldi CMVN value #", index, " '", token, "' is not a number");
  return value;
}

// WeNet's arithmetic, in double, each step rounded as Python rounds it.
Cmvn compute_cmvn(const std::vector<double>& sums, const std::vector<double>& sum_squares,
                  double frames, const fs::path& path) {
  OASR_CHECK(frames > 0, kCorruptFile, path.string(), ": CMVN frame count is ", frames,
             " (must be positive)");
  OASR_CHECK(!sums.empty() && sums.size() == sum_squares.size(), kCorruptFile, path.string(),
             ": CMVN has ", sums.size(), " sums and ", sum_squares.size(),
             " sums of squares (must be equal and non-zero)");
  std::vector<float> mean(sums.size());
  std::vector<float> istd(sums.size());
  for (size_t i = 0; i < sums.size(); ++i) {
    const double m = sums[i] / frames;
    double variance = sum_squares[i] / frames - m * m;
    if (variance < 1.0e-20) variance = 1.0e-20;
    mean[i] = static_cast<float>(m);
    istd[i] = static_cast<float>(1.0 / std::sqrt(variance));
  }
  const auto dim = static_cast<int64_t>(sums.size());
  return {Tensor::from_vector(mean, {dim}), Tensor::from_vector(istd, {dim})};
}

Cmvn parse_json_cmvn(const std::string& text, const fs::path& path) {
  nlohmann::json stats;
  try {
    stats = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range (1e999)
    OASR_THROW(kCorruptFile, path.string(), ": malformed JSON CMVN: ", json_error_text(e));
  }
  auto numbers = [&](const char* key) {
    OASR_CHECK(stats.is_object() && stats.contains(key) && stats[key].is_array(), kCorruptFile,
               path.string(), ": JSON CMVN lacks the array \"", key,
               "\" (expected {\"mean_stat\", \"var_stat\", \"frame_num\"})");
    std::vector<double> out;
    for (const auto& value : stats[key]) {
      OASR_CHECK(value.is_number(), kCorruptFile, path.string(), ": JSON CMVN \"", key,
                 "\" holds a non-number: ", value.dump());
      out.push_back(value.get<double>());
    }
    return out;
  };
  const std::vector<double> sums = numbers("mean_stat");
  const std::vector<double> sum_squares = numbers("var_stat");
  OASR_CHECK(stats.contains("frame_num") && stats["frame_num"].is_number(), kCorruptFile,
             path.string(), ": JSON CMVN lacks the number \"frame_num\"");
  return compute_cmvn(sums, sum_squares, stats["frame_num"].get<double>(), path);
}

// compute-cmvn-stats --binary=false: a 2 x (D+1) matrix; row 0 holds the
// sums and the frame count, row 1 the sums of squares and a 0.
Cmvn parse_kaldi_cmvn(const std::string& text, const fs::path& path) {
  std::istringstream in(text);
  std::vector<std::string> tokens;
  for (std::string token; in >> token;) tokens.push_back(token);
  const size_t count = tokens.size();
  OASR_CHECK(count >= 6 && tokens.front() == "[" && tokens.back() == "]" && (count - 4) % 2 == 0,
             kCorruptFile, path.string(),
             ": not a Kaldi text CMVN matrix \"[ sums... frames sum_sqs... 0 ]\" (", count,
             " tokens)");
  const size_t dim = (count - 4) / 2;
  std::vector<double> sums(dim);
  std::vector<double> sum_squares(dim);
  for (size_t i = 0; i < dim; ++i) {
    sums[i] = parse_number(tokens[1 + i], path, 1 + i);
    sum_squares[i] = parse_number(tokens[dim + 2 + i], path, dim + 2 + i);
  }
  const double frames = parse_number(tokens[dim + 1], path, dim + 1);
  OASR_CHECK(parse_number(tokens[count - 2], path, count - 2) == 0.0, kCorruptFile, path.string(),
             ": Kaldi CMVN's last value is '", tokens[count - 2],
             "' (expected 0: the matrix is not 2 x (D+1))");
  return compute_cmvn(sums, sum_squares, frames, path);
}

bool bit_equal(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.contiguous().raw_data(), b.contiguous().raw_data(), a.nbytes()) == 0;
}

}  // namespace

bool looks_like_wenet_dir(const fs::path& dir) {
  std::error_code error;
  return fs::is_directory(dir, error) && is_file(dir / kTrainYaml) &&
         !files_with(dir, "", ".pt").empty();
}

WenetDir locate_wenet_dir(const fs::path& path) {
  WenetDir out;
  std::error_code error;
  if (fs::is_directory(path, error)) {
    out.dir = path;
    OASR_CHECK(is_file(path / kTrainYaml), kNotFound, path.string(),
               ": not a WeNet experiment directory (no train.yaml)");
    out.checkpoint = choose_checkpoint(path);
  } else {
    OASR_CHECK(is_file(path), kNotFound, path.string(), ": no such file or directory");
    OASR_CHECK(path.extension() == ".pt", kInvalidArgument, path.string(),
               ": expected a WeNet directory or a .pt checkpoint inside one");
    out.dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
    out.checkpoint = path;
  }
  out.train_yaml = out.dir / kTrainYaml;
  OASR_CHECK(is_file(out.train_yaml), kNotFound, out.dir.string(),
             ": no train.yaml beside the checkpoint ", out.checkpoint.filename().string());
  out.yaml = load_wenet_train_yaml(out.train_yaml);
  const WenetRecordedPaths& recorded = out.yaml.paths;

  if (!recorded.cmvn_file.empty()) {
    std::vector<std::string> looked;
    out.cmvn = resolve_recorded(recorded.cmvn_file, out.dir, looked);
    OASR_CHECK(!out.cmvn.empty(), kNotFound, out.train_yaml.string(), ": the CMVN file '",
               recorded.cmvn_file, "' is missing; looked at: ", join(looked));
  }

  std::vector<std::string> looked;
  if (!recorded.symbol_table.empty()) {
    out.units = resolve_recorded(recorded.symbol_table, out.dir, looked);
  }
  for (const char* name : kSymbolTableNames) {
    if (!out.units.empty()) break;
    if (is_file(out.dir / name)) {
      out.units = out.dir / name;
    } else {
      looked.push_back((out.dir / name).string());
    }
  }
  OASR_CHECK(!out.units.empty(), kNotFound, out.dir.string(),
             ": no symbol table (units); looked at: ", join(looked));

  // WeNet 2.x files have no tokenizer key: a sentencepiece model beside the
  // checkpoint (WeNet's recipes name it *.model) means bpe.
  const std::vector<fs::path> models = files_with(out.dir, "", ".model");
  TokenizerType tokenizer = TokenizerType::kChar;
  if (out.yaml.tokenizer) {
    tokenizer = *out.yaml.tokenizer;
  } else if (!recorded.bpe_model.empty() || !models.empty()) {
    tokenizer = TokenizerType::kBpe;
  }
  out.yaml.config.tokenizer.type = tokenizer;
  if (tokenizer == TokenizerType::kBpe) {
    std::vector<std::string> bpe_looked;
    if (!recorded.bpe_model.empty()) {
      out.bpe_model = resolve_recorded(recorded.bpe_model, out.dir, bpe_looked);
    }
    if (out.bpe_model.empty() && models.size() == 1) out.bpe_model = models[0];
    OASR_CHECK(models.size() < 2 || !out.bpe_model.empty(), kInvalidArgument, out.dir.string(),
               ": several sentencepiece models (", name_list(models),
               ") and train.yaml names none that exists; keep only the one the model uses");
    bpe_looked.push_back((out.dir / "*.model").string());
    OASR_CHECK(!out.bpe_model.empty(), kNotFound, out.dir.string(),
               ": the tokenizer is bpe but no sentencepiece model was found; looked at: ",
               join(bpe_looked));
  }
  return out;
}

std::vector<std::string> read_units(const fs::path& path, int64_t vocab_size) {
  const std::string text = read_file(path, "symbol table");
  // Entries are collected before any table is sized: the config's
  // vocabulary size is untrusted too, and a table of that many units is
  // allocated only once the file has held one line for each of them.
  std::unordered_map<int64_t, std::string> by_id;
  std::istringstream in(text);
  size_t line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    std::istringstream fields(line);
    std::vector<std::string> parts;
    for (std::string part; fields >> part;) parts.push_back(part);
    if (parts.empty()) continue;
    OASR_CHECK(parts.size() == 2, kCorruptFile, path.string(), ":", line_number,
               ": expected \"<token> <id>\", found ", parts.size(), " fields");
    char* end = nullptr;
    const long long id = std::strtoll(parts[1].c_str(), &end, 10);
    OASR_CHECK(end == parts[1].c_str() + parts[1].size(), kCorruptFile, path.string(), ":",
               line_number, ": id '", parts[1], "' is not an integer");
    OASR_CHECK(id >= 0 && id < vocab_size, kCorruptFile, path.string(), ":", line_number, ": id ",
               id, " is outside 0..", vocab_size - 1, " (the config's vocabulary has ", vocab_size,
               " units)");
    OASR_CHECK(by_id.emplace(id, parts[0]).second, kCorruptFile, path.string(), ":", line_number,
               ": id ", id, " appears twice");
  }
  if (static_cast<int64_t>(by_id.size()) != std::max<int64_t>(vocab_size, 0)) {
    int64_t missing = 0;
    while (by_id.count(missing) != 0) ++missing;
    OASR_THROW(kCorruptFile, path.string(), ": holds ", by_id.size(),
               " units but the config's vocabulary has ", vocab_size, " (id ", missing,
               " is missing)");
  }
  std::vector<std::string> units(by_id.size());
  for (auto& [id, token] : by_id) units[static_cast<size_t>(id)] = std::move(token);
  return units;
}

Cmvn load_cmvn_stats(const fs::path& path) {
  const std::string text = read_file(path, "CMVN statistics");
  OASR_CHECK(!(text.size() >= 2 && text[0] == '\0' && text[1] == 'B'), kUnsupported, path.string(),
             ": Kaldi binary CMVN statistics; write them as text with "
             "compute-cmvn-stats --binary=false scp:feats.scp global_cmvn");
  const size_t first = text.find_first_not_of(" \t\r\n");
  OASR_CHECK(first != std::string::npos, kCorruptFile, path.string(), ": empty CMVN file");
  if (text[first] == '{') return parse_json_cmvn(text, path);
  if (text[first] == '[') return parse_kaldi_cmvn(text, path);
  OASR_THROW(kCorruptFile, path.string(),
             ": CMVN statistics are neither JSON ({\"mean_stat\", ...}) nor Kaldi text ([ ... ])");
}

ModelSource load_wenet_dir(const fs::path& path) {
  WenetDir located = locate_wenet_dir(path);
  const WenetConfig& config = located.yaml.config;
  ModelSource source;
  source.format = CheckpointFormat::kWenet;
  source.dir = located.dir;
  source.weights_path = located.checkpoint;
  source.config = config;
  source.units = read_units(located.units, config.model.vocab_size);
  source.bpe_model = located.bpe_model;

  io::TorchStateDict state = io::load_torch_state_dict(located.checkpoint);
  source.notes = state.converted;
  Cmvn from_file;
  if (!located.cmvn.empty()) {
    from_file = load_cmvn_stats(located.cmvn);
    OASR_CHECK(from_file.mean.numel() == config.model.encoder.input_dim, kCorruptFile,
               located.cmvn.string(), ": CMVN statistics have dimension ", from_file.mean.numel(),
               " but the model's input_dim is ", config.model.encoder.input_dim);
  }
  const Tensor* mean = state.find(kCmvnMeanName);
  const Tensor* istd = state.find(kCmvnIstdName);
  OASR_CHECK((mean == nullptr) == (istd == nullptr), kCorruptFile, located.checkpoint.string(),
             ": holds only one of ", kCmvnMeanName, " and ", kCmvnIstdName);
  if (mean != nullptr) {
    for (const Tensor* buffer : {mean, istd}) {
      OASR_CHECK(buffer->shape() == Shape{config.model.encoder.input_dim} &&
                     dtype_is_floating(buffer->dtype()),
                 kCorruptFile, located.checkpoint.string(), ": CMVN buffer is ", buffer->str(),
                 "; expected float[", config.model.encoder.input_dim, "]");
    }
    source.cmvn = {mean->to(DType::kF32), istd->to(DType::kF32)};
    if (from_file.defined() && (!bit_equal(source.cmvn.mean, from_file.mean) ||
                                !bit_equal(source.cmvn.istd, from_file.istd))) {
      log::warn(
          "{}: the CMVN buffers differ from the statistics in {}; using the buffers, as "
          "WeNet does after loading the state dict",
          located.checkpoint.string(), located.cmvn.string());
    }
  } else if (from_file.defined()) {
    source.cmvn = from_file;
    state.tensors.emplace_back(kCmvnMeanName, from_file.mean);
    state.tensors.emplace_back(kCmvnIstdName, from_file.istd);
  }
  source.config.model.encoder.global_cmvn = source.cmvn.defined();
  source.weights = std::make_shared<OrderedTensorSource>(std::move(state.tensors));
  return source;
}

}  // namespace oasr::models
