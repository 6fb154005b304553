// A WeNet experiment directory as WeNet's recipes leave it:
//   final.pt (or avg_N.pt)   the state dict, written by torch.save
//   train.yaml               the configuration (wenet_config.h)
//   units.txt / words.txt / dict   the symbol table, "<token> <id>" per line
//   global_cmvn              CMVN statistics, JSON or Kaldi text
//   *.model                  a sentencepiece model, when the tokenizer is bpe
//
// Files that train.yaml names (cmvn_file, symbol_table_path, bpe_path) are
// opened as recorded (absolute, or relative to the working directory, as
// WeNet itself opens them); when the recorded path does not exist, the file
// of the same name beside the checkpoint is used. The symbol table may also
// be any of units.txt, words.txt, dict beside the checkpoint.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "models/u2pp/model_source.h"
#include "models/u2pp/wenet_config.h"

namespace oasr::models {

// train.yaml plus at least one *.pt in `dir`.
bool looks_like_wenet_dir(const std::filesystem::path& dir);

struct WenetDir {
  std::filesystem::path dir;
  std::filesystem::path checkpoint;  // the chosen .pt
  std::filesystem::path train_yaml;
  std::filesystem::path units;
  std::filesystem::path cmvn;       // empty: train.yaml names no CMVN file
  std::filesystem::path bpe_model;  // empty unless the tokenizer is bpe
  WenetTrainYaml yaml;              // tokenizer type resolved
};

// `path` is the directory, or one .pt inside it (to pick among several).
// The checkpoint is final.pt, else the only avg_*.pt; anything else is
// refused with the candidates listed. Every file is located here; a missing
// one is kNotFound naming each place looked at.
WenetDir locate_wenet_dir(const std::filesystem::path& path);

// "<token> <id>" lines; ids must be exactly 0 .. vocab_size - 1, each once.
// Returns the token of each id. kCorruptFile names the line of a defect.
std::vector<std::string> read_units(const std::filesystem::path& path, int64_t vocab_size);

// Global CMVN from a statistics file, computed as WeNet's load_cmvn does (in
// double precision, then rounded to float32): mean = sum / frames,
// variance = max(sum_sq / frames - mean^2, 1e-20), istd = 1 / sqrt(variance).
// The form is told by the content: JSON {"mean_stat", "var_stat",
// "frame_num"} or Kaldi text "[ sums... frames  sum_sqs... 0 ]" (Kaldi's
// binary form is refused with the command that writes text).
Cmvn load_cmvn_stats(const std::filesystem::path& path);

// Everything above, plus the state dict, as a ModelSource. The CMVN
// buffers of the state dict are what WeNet uses after loading it, so they
// win over the statistics file (a warning is logged when the two differ);
// a state dict without them gets the file's.
ModelSource load_wenet_dir(const std::filesystem::path& path);

}  // namespace oasr::models
