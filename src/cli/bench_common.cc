#include "cli/bench_common.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/error.h"

namespace oasr::cli {

namespace fs = std::filesystem;

namespace {

constexpr size_t kStderrTailLines = 20;

std::string last_lines(const std::string& text, size_t count) {
  size_t begin = text.size();
  for (size_t seen = 0; begin > 0 && seen <= count; --begin) {
    if (text[begin - 1] == '\n') ++seen;
  }
  return text.substr(begin);
}

std::string read_file(const fs::path& path) {
  std::string text;
  if (FILE* file = std::fopen(path.c_str(), "r")) {
    std::array<char, 4096> buffer{};
    while (std::fgets(buffer.data(), static_cast<int>(buffer.size()), file) != nullptr) {
      text += buffer.data();
    }
    std::fclose(file);
  }
  return text;
}

}  // namespace

PeerAudioList::PeerAudioList(const std::vector<std::pair<std::string, std::string>>& id_and_path,
                             const char* what) {
  std::string name = "/tmp/oasr-peer-audio-XXXXXX";
  const int fd = ::mkstemp(name.data());
  OASR_CHECK(fd >= 0, kIo, what, ": cannot create a temporary audio list in /tmp");
  ::close(fd);
  path_ = name;
  std::ofstream list(path_);
  for (const auto& [id, path] : id_and_path) list << id << '\t' << path << '\n';
  OASR_CHECK(list.good(), kIo, what, ": cannot write the temporary audio list ", path_);
}

PeerAudioList::~PeerAudioList() {
  std::error_code ignored;
  fs::remove(path_, ignored);
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

double round3(double value) {
  return std::round(value * 1000.0) / 1000.0;
}

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::vector<nlohmann::json> run_baseline_script(
    const std::string& command, const std::string& python, const std::string& script,
    const std::function<bool(const nlohmann::json&)>& accept) {
  const fs::path stderr_path =
      fs::temp_directory_path() / ("oasr_bench_stderr_" + std::to_string(::getpid()) + ".txt");
  const std::string full_command = command + " 2> " + shell_quote(stderr_path.string());
  std::vector<nlohmann::json> lines;
  std::string bad_line;
  FILE* pipe = ::popen(full_command.c_str(), "r");
  OASR_CHECK(pipe != nullptr, kInternal, "could not start the baseline: ", full_command);
  std::string current;
  std::array<char, 4096> buffer{};
  while (std::fgets(buffer.data(), static_cast<int>(buffer.size()), pipe) != nullptr) {
    current += buffer.data();
    if (current.empty() || current.back() != '\n') continue;
    current.pop_back();
    nlohmann::json parsed = nlohmann::json::parse(current, nullptr, /*allow_exceptions=*/false);
    if (accept(parsed)) {
      std::cout << current << std::endl;
      lines.push_back(std::move(parsed));
    } else if (bad_line.empty()) {
      bad_line = current;
    }
    current.clear();
  }
  const int status = ::pclose(pipe);
  const std::string stderr_text = read_file(stderr_path);
  std::error_code ignored;
  fs::remove(stderr_path, ignored);

  const bool exited_ok = status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!exited_ok || !bad_line.empty()) {
    std::cerr << last_lines(stderr_text, kStderrTailLines);
    OASR_THROW(kInvalidArgument, "the PyTorch baseline (", python, " ", script, ") failed",
               exited_ok ? " to print JSON lines (got '" + bad_line + "')"
                         : " with exit status " + std::to_string(WEXITSTATUS(status)),
               "; its stderr tail is above; use --baseline-python PATH or --no-baseline");
  }
  return lines;
}

std::string default_baseline_python() {
  const fs::path venv_python = fs::path(".venv") / "bin" / "python";
  return fs::exists(venv_python) ? venv_python.string() : std::string("python3");
}

std::vector<int64_t> parse_batch_sizes(const std::string& text) {
  std::vector<int64_t> sizes;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, ',')) {
    size_t used = 0;
    int64_t size = 0;
    try {
      size = std::stoll(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    OASR_CHECK(used == part.size() && size >= 1, kInvalidArgument, "--batch '", text,
               "' must be a comma-separated list of positive integers, e.g. 1,4");
    sizes.push_back(size);
  }
  OASR_CHECK(!sizes.empty(), kInvalidArgument, "--batch is empty; give e.g. 1,4");
  return sizes;
}

Tensor random_features(int64_t batch, int64_t frames, int64_t bins, std::mt19937& generator) {
  Tensor feats = Tensor::empty({batch, frames, bins}, DType::kF32);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  float* data = feats.data<float>();
  for (int64_t i = 0; i < feats.numel(); ++i) data[i] = normal(generator);
  return feats;
}

void add_memory_and_graphs(nlohmann::ordered_json& line, Device device,
                           const DeviceGraphCache::Stats& before,
                           const DeviceGraphCache::Stats& after) {
  const size_t arena_bytes = after.arena_bytes - before.arena_bytes;
  const int64_t peak_bytes = oasr::peak_memory_bytes(device);
  if (peak_bytes >= 0) {
    line["peak_mem_mb"] =
        round3(static_cast<double>(peak_bytes + static_cast<int64_t>(arena_bytes)) / (1 << 20));
  }
  if (!device.is_cuda()) return;
  nlohmann::ordered_json graph;
  graph["recorded"] = after.recorded - before.recorded;
  graph["replayed"] = after.replayed - before.replayed;
  graph["eager"] = after.eager - before.eager;
  graph["declined"] = after.declined - before.declined;
  graph["arena_mb"] = round3(static_cast<double>(arena_bytes) / (1 << 20));
  if (!after.last_decline.empty()) graph["why_declined"] = after.last_decline;
  line["cuda_graphs"] = graph;
}

}  // namespace oasr::cli
