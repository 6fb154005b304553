// A check of a RIFF / RIFX / RF64 (WAV family) file's chunk sizes, made
// before libsndfile opens it (internal to audio/). libsndfile 1.2 can spin
// for minutes in sf_open on a LIST chunk whose size runs far past the end of
// the file (a 266-byte upload held a server thread); such a file is damaged,
// so it is refused here, naming the chunk, instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace oasr::audio::detail {

// Reads up to `count` bytes at `offset` into `out`; returns how many it read.
using ReadAt = std::function<size_t(uint64_t offset, void* out, size_t count)>;

// Throws kCorruptFile naming `label` when a LIST chunk declares more bytes
// than the file holds, or one of its entries more than the LIST holds. The
// walk stops where libsndfile's does: at a chunk (a placeholder data size,
// trailing bytes) that runs past the end. Files of other formats are left
// alone.
void refuse_overrunning_riff_chunks(const ReadAt& read_at, uint64_t file_size,
                                    const std::string& label);

}  // namespace oasr::audio::detail
