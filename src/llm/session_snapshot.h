// Session snapshots: a session's state (position, token history, committed cache rows) in a
// versioned, checksummed file, written atomically. Format: docs/session-snapshot.md.
// This file only encodes and decodes; the session checks a snapshot's geometry against its
// loaded artifact before adopting it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "io/contract_metadata.h"

namespace slm::llm {

inline constexpr char kSnapshotMagic[8] = {'S', 'L', 'M', 'S', 'N', 'A', 'P', '\0'};
inline constexpr uint32_t kSnapshotFormatVersion = 1;
inline constexpr size_t kSnapshotHeaderBytes = 32;

struct SessionSnapshot {
  // Geometry of the artifact the snapshot was taken from (checked at restore).
  std::string contract;
  int64_t contract_version = 0;
  int64_t max_context_len = 0;
  int64_t vocab_size = 0;
  std::string cache_dtype;
  std::string cache_format;  // "" (float32, kv_f32_v1) or io::kCacheFormatInt8
  std::vector<io::CacheGroup> groups;
  std::vector<io::CacheLayer> layers;
  std::vector<int32_t> history;  // committed tokens; pos = history.size()
  // Per layer: the committed slots [0, min(pos, cache_len)) of each head, [Hkv, n_slots, hd] f32.
  // float32 caches only.
  std::vector<std::vector<float>> k, v;
  // int8 caches (cache_format kv_int8_tokenhead_v1) only: per layer the committed rows
  // [Hkv, n_slots, hd] int8 and their scales [Hkv, n_slots] f32.
  std::vector<std::vector<int8_t>> k8, v8;
  std::vector<std::vector<float>> k_scale, v_scale;

  // Slots of `layer` that hold committed rows: min(pos, cache_len of its group).
  int64_t CommittedSlots(size_t layer) const;
  // FailedPrecondition naming the first field that differs from `meta` (exact geometry).
  Status CheckGeometry(const io::ContractMetadata& meta, const std::string& where) const;
};

// Writes `snap` to `path` atomically (temp file + fsync + rename).
Status WriteSessionSnapshot(const std::string& path, const SessionSnapshot& snap);
// Reads and verifies (magic, version, sizes, checksum, internal consistency) a snapshot file.
Result<SessionSnapshot> ReadSessionSnapshot(const std::string& path);

}  // namespace slm::llm
