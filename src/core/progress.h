// A one-line progress bar for long CLI jobs (`oasr eval`, long-form audio,
// calibration, checkpoint writes).
//
// It draws on stderr only when stderr is a terminal, so logs and pipes stay
// clean; otherwise every call is a no-op. Redraws are throttled (10 per
// second) and finish() ends the line with a newline. One bar draws at a
// time: a bar made while another draws stays disabled.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

namespace oasr {

// The text of one redraw, e.g.
// "eval [#######.............]  35/100  35%  2.1 it/s  ETA 0:31"; `unit`
// names what is counted ("it", "MiB"). The rate keeps two significant
// digits below 10 so a slow job does not read "0.0 it/s". Exposed so tests
// can check it without a terminal.
std::string format_progress_line(const std::string& label, int64_t done, int64_t total,
                                 double elapsed_seconds, const std::string& unit = "it");

class ProgressBar {
 public:
  // Draws on stderr when isatty(stderr).
  ProgressBar(int64_t total, std::string label);
  // Explicit stream and switch (tests, or callers that decide themselves).
  ProgressBar(int64_t total, std::string label, std::FILE* stream, bool enabled);
  ~ProgressBar();  // finishes the line if finish() was not called

  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void advance(int64_t steps = 1);
  void set_unit(std::string unit) { unit_ = std::move(unit); }
  void finish();  // final redraw and newline; later calls do nothing
  bool enabled() const { return enabled_; }

 private:
  void draw();

  int64_t total_;
  int64_t done_ = 0;
  std::string label_;
  std::string unit_ = "it";
  std::FILE* stream_;
  bool enabled_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace oasr
