/* No-op stand-in for libpcaudio.so.0.
 *
 * espeak-ng links libpcaudio only to play sound through a device. We always
 * synthesize to a file (espeak-ng -w), so playback is never used; this stub
 * lets the program load on a machine without libpcaudio and its audio stack
 * (PulseAudio/ALSA). Every open reports "no device" so espeak-ng falls back to
 * file output cleanly if it ever asks for one.
 *
 * The prototypes follow pcaudio's public header (audio_object_* functions);
 * only the names and calling shapes matter to the dynamic linker.
 */
#include <stddef.h>
#include <stdint.h>

struct audio_object;

struct audio_object* create_audio_device_object(const char* device, const char* application_name,
                                                const char* description) {
  (void)device;
  (void)application_name;
  (void)description;
  return NULL; /* "no audio device": espeak-ng then only writes files */
}

int audio_object_open(struct audio_object* object, int format, uint32_t rate, uint8_t channels) {
  (void)object;
  (void)format;
  (void)rate;
  (void)channels;
  return -1;
}

void audio_object_close(struct audio_object* object) {
  (void)object;
}

void audio_object_destroy(struct audio_object* object) {
  (void)object;
}

int audio_object_write(struct audio_object* object, const void* data, size_t bytes) {
  (void)object;
  (void)data;
  (void)bytes;
  return -1;
}

int audio_object_drain(struct audio_object* object) {
  (void)object;
  return 0;
}

int audio_object_flush(struct audio_object* object) {
  (void)object;
  return 0;
}

const char* audio_object_strerror(struct audio_object* object, int error) {
  (void)object;
  (void)error;
  return "audio output is disabled (libpcaudio stub)";
}
