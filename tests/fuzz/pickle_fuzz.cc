// libFuzzer target: the data-only pickle machine (io/pickle.h), with hooks
// that answer every persistent id and leave every call to the built-ins, as
// the torch.save reader does for what it does not know.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "fuzz_util.h"
#include "io/pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace pickle = oasr::io::pickle;
  pickle::Hooks hooks;
  hooks.persistent_load = [](const pickle::ValueRef& id) {
    return pickle::make_external(std::make_shared<int>(0), "persistent " + pickle::describe(*id));
  };
  hooks.call = [](const std::string&, const pickle::ValueRef&) { return pickle::ValueRef(); };
  oasr::fuzz::run_parser([&] {
    const pickle::ValueRef root =
        pickle::unpickle(std::span<const uint8_t>(data, size), hooks, "fuzz.pkl");
    return pickle::describe(*root);
  });
  // The same bytes without hooks: persistent ids are refused.
  oasr::fuzz::run_parser(
      [&] { return pickle::unpickle(std::span<const uint8_t>(data, size), {}, "fuzz.pkl"); });
  return 0;
}
