/* No-op stand-in for libpulse-simple.so.0.
 *
 * Festival's speech-tools library (libestbase) links PulseAudio's "simple" API
 * for playing audio. We only render to files (text2wave), so playback is never
 * reached; this stub spares carrying PulseAudio and its ~25 dependent
 * libraries. libestbase binds the symbols with version node PULSE_0, so the stub
 * exports them under that node (see pulse_simple_stub.map); a new stream always
 * fails, which festival reports as "no audio device".
 */
#include <stddef.h>

struct pa_simple;

struct pa_simple* pa_simple_new(const char* server, const char* name, int direction,
                                const char* device, const char* stream_name, const void* spec,
                                const void* channel_map, const void* buffer_attributes,
                                int* error) {
  (void)server;
  (void)name;
  (void)direction;
  (void)device;
  (void)stream_name;
  (void)spec;
  (void)channel_map;
  (void)buffer_attributes;
  if (error != NULL) *error = 1; /* PA_ERR_ACCESS-like: any non-zero code */
  return NULL;
}

void pa_simple_free(struct pa_simple* stream) {
  (void)stream;
}

int pa_simple_write(struct pa_simple* stream, const void* data, size_t bytes, int* error) {
  (void)stream;
  (void)data;
  (void)bytes;
  if (error != NULL) *error = 1;
  return -1;
}

int pa_simple_drain(struct pa_simple* stream, int* error) {
  (void)stream;
  if (error != NULL) *error = 1;
  return -1;
}
