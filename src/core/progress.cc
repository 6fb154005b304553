// Terminal progress bar; see progress.h.
#include "core/progress.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>

namespace oasr {
namespace {

constexpr int kBarWidth = 24;
constexpr auto kRedrawInterval = std::chrono::milliseconds(100);

std::string format_duration(double seconds) {
  const auto total = static_cast<int64_t>(std::llround(std::max(seconds, 0.0)));
  char text[32];
  if (total >= 3600) {
    std::snprintf(text, sizeof(text), "%lld:%02lld:%02lld", static_cast<long long>(total / 3600),
                  static_cast<long long>(total / 60 % 60), static_cast<long long>(total % 60));
  } else {
    std::snprintf(text, sizeof(text), "%lld:%02lld", static_cast<long long>(total / 60),
                  static_cast<long long>(total % 60));
  }
  return text;
}

}  // namespace

std::string format_progress_line(const std::string& label, int64_t done, int64_t total,
                                 double elapsed_seconds, const std::string& unit) {
  const double fraction =
      total > 0 ? std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0)
                : 0.0;
  const int filled = static_cast<int>(fraction * kBarWidth);
  std::string line =
      label + " [" + std::string(filled, '#') + std::string(kBarWidth - filled, '.') + "]";
  char numbers[96];
  std::snprintf(numbers, sizeof(numbers), " %lld/%lld %3d%%", static_cast<long long>(done),
                static_cast<long long>(total), static_cast<int>(fraction * 100.0));
  line += numbers;
  if (elapsed_seconds > 0.0 && done > 0) {
    const double rate = static_cast<double>(done) / elapsed_seconds;
    std::snprintf(numbers, sizeof(numbers),
                  rate >= 10.0  ? " %.0f %s/s"
                  : rate >= 1.0 ? " %.1f %s/s"
                                : " %.2g %s/s",
                  rate, unit.c_str());
    line += numbers;
    if (done < total)
      line += " ETA " + format_duration((total - done) / rate);
    else
      line += " " + format_duration(elapsed_seconds);
  }
  return line;
}

ProgressBar::ProgressBar(int64_t total, std::string label)
    : ProgressBar(total, std::move(label), stderr, isatty(fileno(stderr)) == 1) {}

namespace {
// Bars drawing now: one line at a time, so a bar inside another's job
// (a long file's windows inside oasr eval) stays quiet.
std::atomic<int> g_drawing{0};
}  // namespace

ProgressBar::ProgressBar(int64_t total, std::string label, std::FILE* stream, bool enabled)
    : total_(total),
      label_(std::move(label)),
      stream_(stream),
      enabled_(enabled && stream != nullptr && g_drawing.fetch_add(1) == 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {
  if (enabled && stream != nullptr && !enabled_) g_drawing.fetch_sub(1);
  if (enabled_) draw();
}

ProgressBar::~ProgressBar() {
  finish();
}

void ProgressBar::advance(int64_t steps) {
  done_ += steps;
  if (!enabled_ || finished_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ >= kRedrawInterval || done_ >= total_) {
    last_draw_ = now;
    draw();
  }
}

void ProgressBar::finish() {
  if (finished_) return;
  finished_ = true;
  if (!enabled_) return;
  draw();
  std::fputc('\n', stream_);
  std::fflush(stream_);
  g_drawing.fetch_sub(1);
}

void ProgressBar::draw() {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  // \r returns to the line start; \x1b[K clears what a longer line left.
  std::fprintf(stream_, "\r%s\x1b[K",
               format_progress_line(label_, done_, total_, elapsed, unit_).c_str());
  std::fflush(stream_);
}

}  // namespace oasr
