// libFuzzer target: audio decoding from memory (audio/audio_file.h,
// load_audio_from_memory: libsndfile behind oasr's virtual I/O, the
// truncation check, the sample checks and the resampling to 16 kHz a model
// asks for). libsndfile's own container parsing is not instrumented; what
// oasr does with what it returns is.
#include <cstddef>
#include <cstdint>

#include "audio/audio_file.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  oasr::audio::AudioLoadOptions options;
  options.target_sample_rate = 16000;
  oasr::fuzz::run_parser([&] {
    const oasr::audio::DecodedAudio audio =
        oasr::audio::load_audio_from_memory(oasr::fuzz::as_text(data, size), "fuzz.wav", options);
    float sum = 0.0f;
    for (float sample : audio.samples) sum += sample;
    return sum;
  });
  return 0;
}
