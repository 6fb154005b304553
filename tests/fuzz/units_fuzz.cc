// libFuzzer target: symbol tables ("<token> <id>" per line): WeNet's
// units.txt as the checkpoint loader reads it (models/u2pp/wenet_dir.h,
// read_units, against a vocabulary of as many units as the file has lines,
// and against an absurd one)
// and as the detokenizer's UnitTable reads it (decode/units.h).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "decode/units.h"
#include "fuzz_util.h"
#include "models/u2pp/wenet_dir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = oasr::fuzz::as_text(data, size);
  const auto path = oasr::fuzz::write_scratch_file("units.txt", text);
  const auto lines = static_cast<int64_t>(std::count(text.begin(), text.end(), '\n')) + 1;
  oasr::fuzz::run_parser([&] { return oasr::models::read_units(path, lines).size(); });
  // A config's vocabulary is read before the units and may be absurd: the
  // table must not be allocated for it.
  oasr::fuzz::run_parser([&] { return oasr::models::read_units(path, int64_t{1} << 40).size(); });
  oasr::fuzz::run_parser([&] {
    const oasr::decode::UnitTable table = oasr::decode::UnitTable::load(path);
    std::vector<int64_t> ids;
    for (int64_t id = 0; id < 64 && table.contains(id); ++id) ids.push_back(id);
    for (const auto kind :
         {oasr::decode::TokenizerKind::kChar, oasr::decode::TokenizerKind::kBpe}) {
      oasr::fuzz::run_parser([&] {
        return oasr::decode::detokenize(table, ids, {kind, " "}).size();
      });
    }
    return table.size();
  });
  return 0;
}
