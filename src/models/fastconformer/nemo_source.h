// A NeMo checkpoint as NeMo writes it, read in place: the .nemo archive
// (an uncompressed tar: model_config.yaml, model_weights.ckpt through the
// torch.save reader at its offset, the tokenizer files under NeMo's
// "<hash>_" names) or the same members unpacked in a directory.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "core/tensor.h"
#include "layers/module.h"
#include "models/fastconformer/fastconformer_config.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace oasr::models {

struct NemoSource {
  std::filesystem::path path;  // the .nemo file or the directory
  FastConformerConfig config;
  // The model's weights, without the preprocessor's buffers below.
  std::shared_ptr<const TensorSource> weights;
  // preprocessor.featurizer.window [win_length] and .fb [1, features,
  // n_fft / 2 + 1], float32 on the host: the mel front end as saved.
  Tensor mel_window;
  Tensor mel_filterbank;
  // The SentencePiece model, loaded and checked against decoder.vocabulary.
  std::shared_ptr<const sentencepiece::SentencePieceProcessor> tokenizer;
  std::vector<std::string> notes;  // dtype conversions of the state dict
};

// Whether `path` is a .nemo archive or a directory holding model_config.yaml
// and model_weights.ckpt. Never throws.
bool is_nemo_checkpoint(const std::filesystem::path& path);

// Reads everything; refuses by name a missing member, a config this
// implementation does not serve (fastconformer_config.h), a weights file
// without the preprocessor's window / filterbank or with the wrong shapes,
// and a tokenizer whose vocabulary does not match decoder.vocabulary.
NemoSource load_nemo_checkpoint(const std::filesystem::path& path);

}  // namespace oasr::models
