// Pieces the `oasr bench` subcommands share: medians and rounding of the
// JSON figures, and running a PyTorch baseline script as a subprocess whose
// JSON lines are relayed to stdout.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/device_graph_cache.h"
#include "core/tensor.h"

namespace oasr::cli {

double median(std::vector<double> values);
double round3(double value);  // three decimals, for the JSON lines
std::string shell_quote(const std::string& text);
// The python a baseline runs on: .venv/bin/python under the working
// directory if it exists, else python3.
std::string default_baseline_python();

// A --batch flag's "1,16,64": positive sizes, refused by name otherwise.
std::vector<int64_t> parse_batch_sizes(const std::string& text);

// float32 [batch, frames, bins] of normal(0, 1) values, like normalised
// log-mel features; an encoder's cost does not depend on them, the fixed
// seed only makes runs repeatable.
Tensor random_features(int64_t batch, int64_t frames, int64_t bins, std::mt19937& generator);

// Adds a timed piece of work's "peak_mem_mb" (the device pool's peak since
// the last reset_peak_memory, plus the graph arenas recorded between
// `before` and `after`, which are their own allocations) and, on CUDA, its
// "cuda_graphs" counts over the same calls.
void add_memory_and_graphs(nlohmann::ordered_json& line, Device device,
                           const DeviceGraphCache::Stats& before,
                           const DeviceGraphCache::Stats& after);

// Runs `command` (a shell line starting the baseline: `python` running
// `script`) with its stderr captured to a temporary file. Every stdout line
// is parsed as JSON; the ones `accept` takes are relayed to stdout and
// returned. A non-zero exit, or a line `accept` refuses, prints the stderr
// tail and throws, naming the baseline and what to do.
// The "utterance_id<TAB>path" list a peer script reads (bench/
// peer_audio_list.py), written to a temporary file that is removed when
// this goes out of scope (also when the peer fails).
class PeerAudioList {
 public:
  // `what` names the bench in the error when the file cannot be made.
  PeerAudioList(const std::vector<std::pair<std::string, std::string>>& id_and_path,
                const char* what);
  ~PeerAudioList();
  PeerAudioList(const PeerAudioList&) = delete;
  PeerAudioList& operator=(const PeerAudioList&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::vector<nlohmann::json> run_baseline_script(
    const std::string& command, const std::string& python, const std::string& script,
    const std::function<bool(const nlohmann::json&)>& accept);

}  // namespace oasr::cli
