// oasr._oasr: the extension under the Python package (python/oasr). It is a
// thin adapter over the same engine the CLI and the server call: options go
// through engine/engine_options.h as JSON (same names, same validation, same
// messages), audio through audio/, work through ASREngine. The Python
// modules beside it (engine.py, errors.py, ...) hold the public API.
//
// Three rules hold for every call that does work:
// - the GIL is released while C++ works, so Python threads run engines in
//   parallel;
// - on the main thread the work runs on a helper thread while the caller
//   polls for signals, so Ctrl-C stops it at the next batch or decode step
//   (core/cancellation.h) and raises KeyboardInterrupt;
// - an oasr::Error becomes the oasr.errors class of the phase that raised it
//   (configuration, checkpoint, audio), with the same message.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "audio/audio_file.h"
#include "audio/resample.h"
#include "core/cancellation.h"
#include "core/error.h"
#include "engine/asr_engine.h"
#include "engine/engine_options.h"
#include "engine/quantize_recipe.h"
#include "io/manifest.h"
#include "models/architecture.h"
#if defined(OASR_PY_SERVICE)
#include "server/service.h"
#include "server/service_options.h"
#endif

namespace nb = nanobind;
using namespace nb::literals;

namespace oasr::python {
namespace {

// Which part of the API raised an oasr::Error; picks the Python class.
enum class Phase { kGeneral, kConfig, kCheckpoint, kAudio };

struct PhaseError : std::exception {
  PhaseError(Phase phase, Error error) : phase(phase), error(std::move(error)) {}
  const char* what() const noexcept override { return error.what(); }
  Phase phase;
  Error error;
};

template <class F>
auto in_phase(Phase phase, F&& work) -> decltype(work()) {
  try {
    return work();
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kCancelled) throw;
    throw PhaseError(phase, e);
  }
}

// The oasr.errors class name for an error raised in `phase`.
const char* error_class(Phase phase, ErrorCode code) {
  if (code == ErrorCode::kInternal || code == ErrorCode::kOutOfMemory) return "Error";
  const bool file_problem =
      code == ErrorCode::kNotFound || code == ErrorCode::kCorruptFile || code == ErrorCode::kIo;
  switch (phase) {
    case Phase::kConfig:
    case Phase::kCheckpoint:
      return file_problem ? "CheckpointError" : "ConfigError";
    case Phase::kAudio:
      return "AudioError";
    case Phase::kGeneral:
      return "Error";
  }
  return "Error";
}

void raise_as_python(Phase phase, const Error& error) {
  nb::object errors = nb::module_::import_("oasr.errors");
  nb::object cls = errors.attr(error_class(phase, error.code()));
  nb::object instance = cls(nb::str(error.what()));
  instance.attr("code") = nb::str(error_code_name(error.code()));
  PyErr_SetObject(cls.ptr(), instance.ptr());
}

unsigned long main_thread_id = 0;

// Runs `work` with the GIL released. On the main thread it runs on a helper
// thread while this one polls for signals every 50 ms: a signal handler that
// raises (Ctrl-C's KeyboardInterrupt) asks the work to stop, waits for it to
// stop, and propagates the Python exception.
template <class F>
auto run_released(F&& work) -> decltype(work()) {
  using Result = decltype(work());
  if (PyThread_get_thread_ident() != main_thread_id) {
    nb::gil_scoped_release release;
    return work();
  }
  CancellationFlag flag;
  std::packaged_task<Result()> task([&]() -> Result {
    ScopedCancellation scope(&flag);
    return work();
  });
  std::future<Result> done = task.get_future();
  bool interrupted = false;
  {
    nb::gil_scoped_release release;
    std::thread worker(std::move(task));
    while (done.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
      if (interrupted) continue;
      nb::gil_scoped_acquire acquire;
      if (PyErr_CheckSignals() != 0) {
        interrupted = true;
        flag.request();
      }
    }
    worker.join();
  }
  if (interrupted) throw nb::python_error();  // the handler's exception, usually KeyboardInterrupt
  return done.get();                          // rethrows what the work threw
}

nlohmann::json parse_json(const std::string& text, const char* what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw PhaseError(Phase::kConfig, Error(ErrorCode::kInvalidArgument,
                                           std::string(what) + " is not valid JSON: " + e.what()));
  }
}

// One audio input as the caller gave it, read without the GIL.
struct AudioInput {
  std::string label;                // "input 3", or the path
  std::optional<std::string> path;  // a file to decode
  const char* encoded = nullptr;    // bytes of an audio file (kept alive by `owner`)
  size_t encoded_size = 0;
  const float* samples = nullptr;  // float32 samples in place (kept alive by `owner`)
  size_t sample_count = 0;
  std::vector<float> converted;  // int16 samples as float32
  int sample_rate = 0;           // of samples / converted
  nb::object owner;
};

using FloatArray = nb::ndarray<const float, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Int16Array = nb::ndarray<const int16_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// Sorts Python objects into inputs (GIL held). `sample_rates[i]` is the
// rate of array i (0: not given).
std::vector<AudioInput> gather_inputs(const std::vector<nb::object>& items,
                                      const std::vector<int>& sample_rates) {
  std::vector<AudioInput> inputs(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    AudioInput& in = inputs[i];
    const nb::handle item = items[i];
    in.owner = nb::borrow(item);
    in.label = "input " + std::to_string(i);
    in.sample_rate = i < sample_rates.size() ? sample_rates[i] : 0;
    if (nb::isinstance<nb::str>(item)) {
      in.path = nb::cast<std::string>(item);
      in.label = *in.path;
    } else if (nb::isinstance<nb::bytes>(item)) {
      const nb::bytes bytes = nb::borrow<nb::bytes>(item);
      in.encoded = bytes.c_str();
      in.encoded_size = bytes.size();
    } else if (FloatArray array; nb::try_cast(item, array, false)) {
      in.samples = array.data();
      in.sample_count = array.shape(0);
    } else if (Int16Array array; nb::try_cast(item, array, false)) {
      // int16 PCM is scaled as WAV readers do: x / 32768.
      in.converted.resize(array.shape(0));
      for (size_t k = 0; k < array.shape(0); ++k) in.converted[k] = array.data()[k] / 32768.0f;
    } else {
      throw PhaseError(Phase::kAudio,
                       Error(ErrorCode::kInvalidArgument,
                             in.label +
                                 ": expected a path, bytes of an audio file, or a 1-D C-contiguous "
                                 "float32 or int16 array, got " +
                                 nb::cast<std::string>(nb::str(item.type()))));
    }
  }
  return inputs;
}

// Samples at the engine's rate for every input (GIL released): files and
// bytes decoded and resampled, arrays checked and resampled where their
// rate differs; a float32 array at the engine's rate is read in place.
struct LoadedAudio {
  std::vector<engine::Waveform> views;
  std::vector<std::vector<float>> owned;  // decoded or resampled inputs
  std::vector<double> durations;
};

LoadedAudio load_inputs(std::vector<AudioInput>& inputs, const engine::ASREngine& engine) {
  const int rate = engine.sample_rate();
  LoadedAudio out;
  out.owned.resize(inputs.size());
  out.views.resize(inputs.size());
  out.durations.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    throw_if_cancelled();
    AudioInput& in = inputs[i];
    std::vector<float>& owned = out.owned[i];
    engine::Waveform view;
    if (in.path) {
      owned = engine.load_utterance(*in.path);
      view = owned;
    } else if (in.encoded != nullptr) {
      audio::AudioLoadOptions options;
      options.target_sample_rate = rate;
      owned = audio::load_audio_from_memory(std::string_view(in.encoded, in.encoded_size), in.label,
                                            options)
                  .samples;
      view = owned;
    } else {
      const std::span<const float> given = in.samples != nullptr
                                               ? std::span<const float>(in.samples, in.sample_count)
                                               : std::span<const float>(in.converted);
      OASR_CHECK(in.sample_rate > 0, kInvalidArgument, in.label,
                 ": an array needs its sample rate: pass sample_rate= (this model takes ", rate,
                 " Hz; other rates are resampled)");
      OASR_CHECK(!given.empty(), kInvalidArgument, in.label, ": empty array; nothing to recognise");
      audio::check_samples(given, in.label);
      if (in.sample_rate == rate) {
        view = given;
      } else {
        owned = audio::resample(given, in.sample_rate, rate);
        view = owned;
      }
    }
    out.views[i] = view;
    out.durations[i] = static_cast<double>(view.size()) / rate;
  }
  return out;
}

// What Python's Transcript is built from: text, tokens, score, token times,
// duration in seconds, the model's own segments (start, end, text).
using SegmentTuple = std::tuple<double, double, std::string>;
using TranscriptTuple =
    std::tuple<std::string, std::vector<int64_t>, double, std::vector<std::pair<double, double>>,
               double, std::vector<SegmentTuple>>;

TranscriptTuple to_tuple(engine::Transcript&& t, double duration) {
  std::vector<std::pair<double, double>> times;
  times.reserve(t.token_times.size());
  for (const engine::TokenTime& time : t.token_times) times.emplace_back(time.start, time.end);
  std::vector<SegmentTuple> segments;
  for (engine::Segment& s : t.segments) segments.emplace_back(s.start, s.end, std::move(s.text));
  return {std::move(t.text), std::move(t.tokens), t.score, std::move(times),
          duration,          std::move(segments)};
}

class Engine;

class Session {
 public:
  Session(std::shared_ptr<const engine::ASREngine> engine,
          std::unique_ptr<engine::StreamingSession> session)
      : engine_(std::move(engine)), session_(std::move(session)) {}

  TranscriptTuple accept(const nb::object& samples) {
    std::vector<AudioInput> inputs = gather_inputs({samples}, {engine_->sample_rate()});
    AudioInput& in = inputs.front();
    in_phase(Phase::kAudio, [&] {
      OASR_CHECK(!in.path && in.encoded == nullptr, kInvalidArgument,
                 "a stream takes samples (a 1-D float32 or int16 array at ", engine_->sample_rate(),
                 " Hz), not a file");
    });
    const std::span<const float> piece = in.samples != nullptr
                                             ? std::span<const float>(in.samples, in.sample_count)
                                             : std::span<const float>(in.converted);
    return run_released([&] {
      in_phase(Phase::kAudio, [&] { audio::check_samples(piece, "stream piece"); });
      received_ += piece.size();
      return to_tuple(session_->accept_waveform(piece), seconds());
    });
  }

  TranscriptTuple finish() {
    return run_released([&] { return to_tuple(session_->finish(), seconds()); });
  }

  bool finished() const { return session_->finished(); }

 private:
  double seconds() const { return static_cast<double>(received_) / engine_->sample_rate(); }

  std::shared_ptr<const engine::ASREngine> engine_;
  std::unique_ptr<engine::StreamingSession> session_;
  size_t received_ = 0;
};

class Engine {
 public:
  explicit Engine(const std::string& config_json) {
    const nlohmann::json object = parse_json(config_json, "the engine configuration");
    const engine::EngineConfig config =
        in_phase(Phase::kConfig, [&] { return engine::engine_config_from_json(object); });
    in_phase(Phase::kConfig, [&] { config.validate(); });
    engine_ = run_released([&] {
      return in_phase(Phase::kCheckpoint,
                      [&] { return std::make_shared<const engine::ASREngine>(config); });
    });
  }

  std::vector<TranscriptTuple> transcribe(const std::vector<nb::object>& items,
                                          const std::vector<int>& sample_rates,
                                          const std::string& overrides_json) {
    const engine::DecodeOverrides overrides = decode_overrides(overrides_json);
    std::vector<AudioInput> inputs = gather_inputs(items, sample_rates);
    return run_released([&] {
      // Options are checked before any audio is read.
      in_phase(Phase::kConfig, [&] { engine_->resolve_decode(overrides); });
      LoadedAudio audio = in_phase(Phase::kAudio, [&] { return load_inputs(inputs, *engine_); });
      std::vector<engine::Transcript> decoded =
          in_phase(Phase::kAudio, [&] { return engine_->transcribe(audio.views, overrides); });
      std::vector<TranscriptTuple> out;
      out.reserve(decoded.size());
      for (size_t i = 0; i < decoded.size(); ++i) {
        out.push_back(to_tuple(std::move(decoded[i]), audio.durations[i]));
      }
      return out;
    });
  }

  Session stream(const std::string& overrides_json) {
    const engine::DecodeOverrides overrides = decode_overrides(overrides_json);
    auto session = in_phase(Phase::kConfig, [&] { return engine_->start_session(overrides); });
    return Session(engine_, std::move(session));
  }

  // For bench/python_overhead.py: the files' samples decoded once, then
  // ASREngine::transcribe on them timed `repeats` times from C++ (no Python
  // between), in seconds, the reference a Python call's time is set against.
  std::vector<double> time_native(const std::vector<std::string>& paths, int repeats) {
    return run_released([&] {
      std::vector<std::vector<float>> utterances;
      for (const std::string& path : paths) utterances.push_back(engine_->load_utterance(path));
      std::vector<double> seconds;
      for (int r = 0; r < repeats; ++r) {
        const auto started = std::chrono::steady_clock::now();
        engine_->transcribe(utterances);
        seconds.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
      }
      return seconds;
    });
  }

  int sample_rate() const { return engine_->sample_rate(); }
  std::string architecture() const { return engine_->architecture().name; }
  std::string quantization_info_json() const {
    return engine_->quantization_info().to_json().dump();
  }
  std::string config_dump() const { return engine_->config().dump(); }
  std::string decode_dump() const { return engine_->decode_options().dump(); }
  const std::shared_ptr<const engine::ASREngine>& shared() const { return engine_; }
  // Refuses decode options this engine's architecture does not take
  // (ConfigError), before any audio is read.
  void check_decode(const std::string& overrides_json) const {
    const engine::DecodeOverrides overrides = decode_overrides(overrides_json);
    in_phase(Phase::kConfig, [&] { engine_->resolve_decode(overrides); });
  }

 private:
  static engine::DecodeOverrides decode_overrides(const std::string& json_text) {
    const nlohmann::json object = parse_json(json_text, "the decode options");
    return in_phase(Phase::kConfig, [&] { return engine::decode_overrides_from_json(object); });
  }

  std::shared_ptr<const engine::ASREngine> engine_;
};

// EngineConfig's validation without building an engine: the dump of the
// parsed config, or ConfigError. `on_this_machine` false leaves out whether
// this machine has the CUDA device (a config served elsewhere).
std::string check_engine_config(const std::string& config_json, bool on_this_machine) {
  const nlohmann::json object = parse_json(config_json, "the engine configuration");
  return in_phase(Phase::kConfig, [&] {
    const engine::EngineConfig config = engine::engine_config_from_json(object);
    config.validate(on_this_machine);
    return config.dump();
  });
}

// An audio file (a path, or its bytes) decoded as the engine reads files:
// float32 mono samples in [-1, 1] and their rate, resampled to
// `sample_rate` where it is not 0. An engine given these samples at this
// rate resamples them as it would the file.
using SamplesArray = nb::ndarray<nb::numpy, float, nb::ndim<1>>;
std::pair<SamplesArray, int> load_audio(const nb::object& source, int sample_rate) {
  std::optional<std::string> path;
  std::string encoded;
  if (nb::isinstance<nb::str>(source)) {
    path = nb::cast<std::string>(source);
  } else if (nb::isinstance<nb::bytes>(source)) {
    const nb::bytes bytes = nb::borrow<nb::bytes>(source);
    encoded.assign(bytes.c_str(), bytes.size());
  } else {
    throw PhaseError(Phase::kAudio, Error(ErrorCode::kInvalidArgument,
                                          "load_audio: expected a path or the bytes of an audio "
                                          "file, got " +
                                              nb::cast<std::string>(nb::str(source.type()))));
  }
  audio::DecodedAudio decoded = run_released([&] {
    return in_phase(Phase::kAudio, [&] {
      OASR_CHECK(sample_rate >= 0, kInvalidArgument,
                 "load_audio: sample_rate must be 0 (the file's) or positive, not ", sample_rate);
      audio::AudioLoadOptions options;
      options.target_sample_rate = sample_rate;
      return path ? audio::load_audio(*path, options)
                  : audio::load_audio_from_memory(encoded, "audio bytes", options);
    });
  });
  auto* samples = new std::vector<float>(std::move(decoded.samples));
  nb::capsule owner(samples, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
  return {SamplesArray(samples->data(), {samples->size()}, owner), decoded.sample_rate};
}

// `oasr eval`'s manifest reader (io/manifest.h): (id, audio path resolved
// against `audio_root` or the manifest's folder, text or None, line).
using ManifestRow = std::tuple<std::string, std::string, std::optional<std::string>, int>;
std::vector<ManifestRow> read_manifest(const std::string& path, const std::string& audio_root) {
  return in_phase(Phase::kConfig, [&] {
    io::ManifestOptions options;
    options.audio_root = audio_root;
    options.require_text = false;
    std::vector<ManifestRow> rows;
    for (const io::ManifestEntry& entry : io::read_manifest(path, options)) {
      rows.emplace_back(entry.id, entry.audio.string(), entry.text, entry.line);
    }
    return rows;
  });
}

#if defined(OASR_PY_SERVICE)
// oasr-server's HTTP API (server::TranscriptionService) over one engine, for
// transports other than oasr-server's own (oasr.ray's Serve ingress): a
// request's method, target, headers and body in, the reply's status, headers
// and body out, byte for byte what oasr-server answers. Concurrent calls
// from several Python threads are batched by the service's batcher.
class Service {
 public:
  Service(const Engine& engine, const std::string& limits_json) : engine_(engine.shared()) {
    const nlohmann::json object = parse_json(limits_json, "the service options");
    const server::ServiceLimits limits =
        in_phase(Phase::kConfig, [&] { return server::service_limits_from_json(object); });
    service_ = std::make_unique<server::TranscriptionService>(
        *engine_, server::service_options(*engine_, limits));
  }

  using Header = std::pair<std::string, std::string>;
  using Reply = std::tuple<int, std::vector<Header>, nb::bytes>;

  Reply handle(const std::string& method, const std::string& target,
               const std::vector<Header>& headers, const nb::bytes& body) {
    server::Request request = make_request(method, target, headers);
    request.body().assign(body.c_str(), body.size());
    // The transport has read the body whole (de-chunked): its size is the
    // length, whatever the client's framing said.
    request.erase(server::http::field::transfer_encoding);
    request.content_length(request.body().size());
    server::Response response = run_released([&] {
      // As oasr-server's transport: a body over the upload limit is refused
      // without being parsed (the caller stops reading at the limit and
      // asks too_large; this catches a caller that did not).
      if (request.body().size() > service_->options().max_upload_bytes) {
        return service_->too_large(request);
      }
      std::promise<server::Response> replied;
      std::future<server::Response> reply = replied.get_future();
      service_->handle(std::move(request),
                       [&replied](server::Response r) { replied.set_value(std::move(r)); });
      return reply.get();
    });
    return to_reply(response);
  }

  // oasr-server's reply to a request whose body is over the upload limit,
  // for a transport that stops reading it there.
  Reply too_large(const std::string& method, const std::string& target,
                  const std::vector<Header>& headers) const {
    return to_reply(service_->too_large(make_request(method, target, headers)));
  }

  size_t max_upload_bytes() const { return service_->options().max_upload_bytes; }

  // Stops taking transcriptions (503) and answers the queued ones.
  void drain() {
    run_released([&] {
      service_->drain();
      return 0;
    });
  }
  std::string model_name() const { return service_->options().model_name; }

 private:
  static server::Request make_request(const std::string& method, const std::string& target,
                                      const std::vector<Header>& headers) {
    server::Request request;
    request.method_string(method);
    request.target(target);
    request.version(11);
    for (const auto& [name, value] : headers) request.insert(name, value);
    return request;
  }

  static Reply to_reply(const server::Response& response) {
    std::vector<Header> headers;
    for (const auto& field : response) {
      headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }
    const std::string& payload = response.body();
    return {static_cast<int>(response.result_int()), std::move(headers),
            nb::bytes(payload.data(), payload.size())};
  }

  std::shared_ptr<const engine::ASREngine> engine_;
  std::unique_ptr<server::TranscriptionService> service_;
};
#endif

std::string convert(const std::string& source, const std::string& destination,
                    const std::string& from, const std::optional<std::string>& dtype, bool force) {
  return run_released([&] {
    return in_phase(Phase::kCheckpoint, [&] {
      const models::SourceLayout* layout =
          from == "auto" ? &models::source_layout_for(source) : models::find_source_layout(from);
      OASR_CHECK(layout != nullptr, kInvalidArgument, "from_='", from, "': expected auto, ",
                 models::source_layout_list());
      models::ConvertRequest request;
      request.source = source;
      request.destination = destination;
      request.force = force;
      if (dtype) {
        const std::optional<DType> parsed = parse_dtype(*dtype);
        OASR_CHECK(
            parsed && (*parsed == DType::kF32 || *parsed == DType::kF16 || *parsed == DType::kBF16),
            kInvalidArgument, "dtype='", *dtype,
            "': weights are stored as float32, float16 or bfloat16");
        request.dtype = *parsed;
        request.dtype_flag = "dtype='" + *dtype + "'";
      }
      return layout->convert(request);
    });
  });
}

// oasr quantize's request from keyword arguments; returns the written spec
// and report as JSON.
std::string quantize(const std::string& source, const std::string& destination,
                     const std::string& recipe, const std::optional<std::string>& calib_manifest,
                     const std::optional<std::string>& audio_root,
                     const std::optional<int64_t>& calib_utterances,
                     const std::optional<double>& alpha, const std::vector<std::string>& ignore,
                     const std::string& module_types, const std::string& calib_device,
                     const std::string& calib_dtype, const std::vector<std::string>& options,
                     bool force, bool progress) {
  engine::QuantizeRequest request;
  request.source = source;
  request.destination = destination;
  request.recipe = recipe;
  if (calib_manifest) request.calib_manifest = *calib_manifest;
  if (audio_root) request.audio_root = *audio_root;
  request.calib_utterances = calib_utterances;
  request.alpha = alpha;
  request.ignore = ignore;
  request.module_types = module_types;
  request.calib_device = calib_device;
  request.calib_dtype = calib_dtype;
  request.options = options;
  request.force = force;
  request.progress = progress;
  in_phase(Phase::kConfig, [&] { request.validate(); });
  return run_released([&] {
    const engine::QuantizeOutcome outcome =
        in_phase(Phase::kCheckpoint, [&] { return engine::quantize_checkpoint(request); });
    nlohmann::ordered_json out;
    out["destination"] = destination;
    nlohmann::ordered_json schemes = nlohmann::ordered_json::array();
    for (const quant::QuantScheme& scheme : outcome.spec.schemes) schemes.push_back(scheme.name);
    out["schemes"] = schemes;
    out["quantized_layers"] = outcome.spec.layers.size();
    out["calibration_utterances"] = outcome.calibration_utterances;
    out["report"] = outcome.report;
    return out.dump();
  });
}

}  // namespace
}  // namespace oasr::python

NB_MODULE(_oasr, m) {
  using namespace oasr::python;
  m.doc() = "oasr's C++ engine (private: use oasr.engine, oasr.quantize, oasr.convert)";
  m.attr("__version__") = OASR_VERSION;
  main_thread_id = nb::cast<unsigned long>(
      nb::module_::import_("threading").attr("main_thread")().attr("ident"));

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const PhaseError& e) {
      raise_as_python(e.phase, e.error);
    } catch (const oasr::Error& e) {
      raise_as_python(Phase::kGeneral, e);
    }
  });

  nb::class_<Session>(m, "Session")
      .def("accept", &Session::accept, "samples"_a)
      .def("finish", &Session::finish)
      .def_prop_ro("finished", &Session::finished);

  nb::class_<Engine>(m, "Engine")
      .def(nb::init<const std::string&>(), "config_json"_a)
      .def("transcribe", &Engine::transcribe, "items"_a, "sample_rates"_a, "overrides_json"_a)
      .def("stream", &Engine::stream, "overrides_json"_a)
      .def("time_native", &Engine::time_native, "paths"_a, "repeats"_a)
      .def_prop_ro("sample_rate", &Engine::sample_rate)
      .def_prop_ro("architecture", &Engine::architecture)
      .def("quantization_info_json", &Engine::quantization_info_json)
      .def("config_dump", &Engine::config_dump)
      .def("decode_dump", &Engine::decode_dump)
      .def("check_decode", &Engine::check_decode, "overrides_json"_a);

  m.def("check_engine_config", &check_engine_config, "config_json"_a, "on_this_machine"_a = true);
  m.def("load_audio", &load_audio, "source"_a, "sample_rate"_a = 0);
  m.def("read_manifest", &read_manifest, "path"_a, "audio_root"_a = "");
#if defined(OASR_PY_SERVICE)
  nb::class_<Service>(m, "Service")
      .def(nb::init<const Engine&, const std::string&>(), "engine"_a, "limits_json"_a,
           nb::keep_alive<1, 2>())
      .def("handle", &Service::handle, "method"_a, "target"_a, "headers"_a, "body"_a)
      .def("too_large", &Service::too_large, "method"_a, "target"_a, "headers"_a)
      .def_prop_ro("max_upload_bytes", &Service::max_upload_bytes)
      .def("drain", &Service::drain)
      .def_prop_ro("model_name", &Service::model_name);
  m.def(
      "check_service_limits",
      [](const std::string& limits_json) {
        const nlohmann::json object = parse_json(limits_json, "the service options");
        in_phase(Phase::kConfig, [&] { oasr::server::service_limits_from_json(object); });
      },
      "limits_json"_a);
  m.attr("has_service") = true;
#else
  m.attr("has_service") = false;
#endif
  m.def("engine_option_keys", &oasr::engine::engine_option_keys);
  // Every registered architecture's decode options, for the package's
  // EngineConfig fields and DECODE_KEYS (oasr/engine.py).
  m.def("decode_option_declarations", [] {
    nlohmann::json out = nlohmann::json::array();
    for (const oasr::models::DeclaredDecodeOption& option :
         oasr::models::declared_decode_options()) {
      static const char* const kKinds[] = {"integer", "number", "bool", "text", "number_list"};
      nlohmann::json architectures = nlohmann::json::array();
      for (size_t i = 0; i < option.architectures.size(); ++i) {
        architectures.push_back({{"name", option.architectures[i]->display_name},
                                 {"help", option.specs[i]->help},
                                 {"default", option.specs[i]->default_text},
                                 {"takes", oasr::engine::decode_takes(*option.specs[i])}});
      }
      out.push_back({{"key", option.spec.key},
                     {"kind", kKinds[static_cast<int>(option.spec.kind)]},
                     {"aliases", option.spec.aliases},
                     {"architectures", architectures}});
    }
    return out.dump();
  });
  m.def("convert", &convert, "source"_a, "destination"_a, "from_"_a, "dtype"_a.none(), "force"_a);
  m.def("quantize", &quantize, "source"_a, "destination"_a, "recipe"_a, "calib_manifest"_a.none(),
        "audio_root"_a.none(), "calib_utterances"_a.none(), "alpha"_a.none(), "ignore"_a,
        "module_types"_a, "calib_device"_a, "calib_dtype"_a, "options"_a, "force"_a, "progress"_a);
  m.def("recipes", [] {
    std::vector<std::string> names;
    for (const auto& recipe : oasr::engine::quantize_recipes()) names.push_back(recipe.name);
    return names;
  });
}
