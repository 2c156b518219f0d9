#include "llm/session_snapshot.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/mapped_file.h"

namespace slm::llm {
namespace {

using nlohmann::json;

void PutU32(std::string& s, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) s[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void PutU64(std::string& s, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) s[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint32_t GetU32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(s[at + i]);
  return v;
}
uint64_t GetU64(const std::string& s, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(s[at + i]);
  return v;
}

// XXH64 (seed 0) of header bytes [0, 24) followed by the payload.
uint64_t Checksum(const std::string& file) {
  XXH64_state_t* st = XXH64_createState();
  XXH64_reset(st, 0);
  XXH64_update(st, file.data(), 24);
  XXH64_update(st, file.data() + kSnapshotHeaderBytes, file.size() - kSnapshotHeaderBytes);
  uint64_t h = XXH64_digest(st);
  XXH64_freeState(st);
  return h;
}

template <typename T>
void Append(std::string& out, const T* data, size_t n) {
  // Little-endian hosts only (as the artifact format); the header records the byte order.
  out.append(reinterpret_cast<const char*>(data), n * sizeof(T));
}

}  // namespace

int64_t SessionSnapshot::CommittedSlots(size_t layer) const {
  const int64_t pos = static_cast<int64_t>(history.size());
  for (const io::CacheGroup& g : groups) {
    if (g.name == layers[layer].group) return std::min(pos, g.cache_len);
  }
  return 0;
}

Status SessionSnapshot::CheckGeometry(const io::ContractMetadata& m, const std::string& where) const {
  auto differ = [&](const std::string& field, const std::string& found, const std::string& expected) {
    return FailedPrecondition(where + ": snapshot field '" + field + "' is " + found + ", the loaded artifact has " +
                              expected + " (the snapshot was taken from a different artifact)");
  };
  if (contract != m.contract) return differ("contract", contract, m.contract);
  if (contract_version != m.version) return differ("version", std::to_string(contract_version), std::to_string(m.version));
  if (max_context_len != m.max_context_len) return differ("max_context_len", std::to_string(max_context_len), std::to_string(m.max_context_len));
  if (vocab_size != m.vocab_size) return differ("vocab_size", std::to_string(vocab_size), std::to_string(m.vocab_size));
  if (cache_dtype != m.cache_dtype) return differ("cache.dtype", cache_dtype, m.cache_dtype);
  if (cache_format != m.cache_format) return differ("cache.format", "'" + cache_format + "'", "'" + m.cache_format + "'");
  if (groups.size() != m.groups.size()) return differ("cache.groups", std::to_string(groups.size()) + " groups", std::to_string(m.groups.size()));
  for (size_t i = 0; i < groups.size(); ++i) {
    const std::string f = "cache.groups[" + std::to_string(i) + "]";
    if (groups[i].name != m.groups[i].name) return differ(f + ".name", groups[i].name, m.groups[i].name);
    if (groups[i].cache_len != m.groups[i].cache_len) return differ(f + ".cache_len", std::to_string(groups[i].cache_len), std::to_string(m.groups[i].cache_len));
    if (groups[i].window != m.groups[i].window) return differ(f + ".window", std::to_string(groups[i].window), std::to_string(m.groups[i].window));
  }
  if (layers.size() != m.layers.size()) return differ("cache.layers", std::to_string(layers.size()) + " layers", std::to_string(m.layers.size()));
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string f = "cache.layers[" + std::to_string(i) + "]";
    if (layers[i].group != m.layers[i].group) return differ(f + ".group", layers[i].group, m.layers[i].group);
    if (layers[i].n_kv_heads != m.layers[i].n_kv_heads) return differ(f + ".n_kv_heads", std::to_string(layers[i].n_kv_heads), std::to_string(m.layers[i].n_kv_heads));
    if (layers[i].head_dim != m.layers[i].head_dim) return differ(f + ".head_dim", std::to_string(layers[i].head_dim), std::to_string(m.layers[i].head_dim));
  }
  if (static_cast<int64_t>(history.size()) > max_context_len) return differ("pos", std::to_string(history.size()), "max_context_len " + std::to_string(max_context_len));
  return Status::Ok();
}

Status WriteSessionSnapshot(const std::string& path, const SessionSnapshot& snap) {
  json h;
  h["contract"] = snap.contract;
  h["version"] = snap.contract_version;
  h["max_context_len"] = snap.max_context_len;
  h["vocab_size"] = snap.vocab_size;
  h["byte_order"] = "little";
  h["cache"]["dtype"] = snap.cache_dtype;
  if (!snap.cache_format.empty()) h["cache"]["format"] = snap.cache_format;
  h["cache"]["groups"] = json::array();
  for (const io::CacheGroup& g : snap.groups) h["cache"]["groups"].push_back({{"name", g.name}, {"cache_len", g.cache_len}, {"window", g.window}});
  h["cache"]["layers"] = json::array();
  for (const io::CacheLayer& l : snap.layers) h["cache"]["layers"].push_back({{"group", l.group}, {"n_kv_heads", l.n_kv_heads}, {"head_dim", l.head_dim}});
  h["pos"] = snap.history.size();
  const std::string header_json = h.dump();

  std::string file(kSnapshotHeaderBytes, '\0');
  std::memcpy(file.data(), kSnapshotMagic, 8);
  PutU32(file, 8, kSnapshotFormatVersion);
  PutU32(file, 12, static_cast<uint32_t>(header_json.size()));
  file += header_json;
  Append(file, snap.history.data(), snap.history.size());
  const bool q8 = snap.cache_format == io::kCacheFormatInt8;
  for (size_t i = 0; i < snap.layers.size(); ++i) {
    if (q8) {  // per layer: K rows, K scales, V rows, V scales
      Append(file, snap.k8[i].data(), snap.k8[i].size());
      Append(file, snap.k_scale[i].data(), snap.k_scale[i].size());
      Append(file, snap.v8[i].data(), snap.v8[i].size());
      Append(file, snap.v_scale[i].data(), snap.v_scale[i].size());
    } else {
      Append(file, snap.k[i].data(), snap.k[i].size());
      Append(file, snap.v[i].data(), snap.v[i].size());
    }
  }
  PutU64(file, 16, file.size() - kSnapshotHeaderBytes);
  PutU64(file, 24, Checksum(file));
  return WriteFileAtomically(path, file);
}

Result<SessionSnapshot> ReadSessionSnapshot(const std::string& path) {
  SLM_ASSIGN_OR_RETURN(std::string file, ReadFileToString(path));
  auto bad = [&](const std::string& what) { return ParseError(path + ": session snapshot: " + what); };
  if (file.size() < kSnapshotHeaderBytes || std::memcmp(file.data(), kSnapshotMagic, 8) != 0) return bad("bad magic (not a staticlm session snapshot)");
  const uint32_t version = GetU32(file, 8);
  if (version != kSnapshotFormatVersion) {
    return Unsupported(path + ": session snapshot format version " + std::to_string(version) + " is not supported (supported: " +
                       std::to_string(kSnapshotFormatVersion) + ")");
  }
  const uint64_t json_bytes = GetU32(file, 12);
  const uint64_t payload = GetU64(file, 16);
  if (payload != file.size() - kSnapshotHeaderBytes) {
    return bad("payload_bytes " + std::to_string(payload) + " disagrees with the file size " + std::to_string(file.size()));
  }
  if (GetU64(file, 24) != Checksum(file)) return bad("checksum mismatch (the file is corrupt or truncated)");
  if (json_bytes > payload) return bad("header_json_bytes exceeds the payload");
  json h = json::parse(file.substr(kSnapshotHeaderBytes, json_bytes), nullptr, false);
  if (h.is_discarded() || !h.is_object()) return bad("header is not a JSON object");
  SessionSnapshot s;
  try {
    s.contract = h.at("contract").get<std::string>();
    s.contract_version = h.at("version").get<int64_t>();
    s.max_context_len = h.at("max_context_len").get<int64_t>();
    s.vocab_size = h.at("vocab_size").get<int64_t>();
    if (h.at("byte_order").get<std::string>() != "little") return bad("field 'byte_order': only 'little' is supported");
    s.cache_dtype = h.at("cache").at("dtype").get<std::string>();
    if (h.at("cache").contains("format")) s.cache_format = h.at("cache").at("format").get<std::string>();
    for (const json& g : h.at("cache").at("groups")) s.groups.push_back({g.at("name").get<std::string>(), g.at("cache_len").get<int64_t>(), g.at("window").get<int64_t>()});
    for (const json& l : h.at("cache").at("layers")) s.layers.push_back({l.at("group").get<std::string>(), l.at("n_kv_heads").get<int64_t>(), l.at("head_dim").get<int64_t>()});
    const int64_t pos = h.at("pos").get<int64_t>();
    if (pos < 0 || pos > s.max_context_len) return bad("field 'pos' = " + std::to_string(pos) + " outside [0, max_context_len]");
    s.history.resize(static_cast<size_t>(pos));
  } catch (const json::exception& e) {
    return bad(std::string("header: ") + e.what());
  }
  const bool q8 = s.cache_format == io::kCacheFormatInt8;
  if (!(s.cache_format.empty() && s.cache_dtype == "float32") && !(q8 && s.cache_dtype == "int8")) {
    return Unsupported(path + ": session snapshot: cache dtype '" + s.cache_dtype + "' format '" + s.cache_format + "' is not supported");
  }
  // Bytes per cache element and per stored row's scale.
  const uint64_t elem = q8 ? 1 : sizeof(float), scale_bytes = q8 ? sizeof(float) : 0;
  // Expected payload size from the header, overflow-safe: every count is bounded by pos ≤ max
  // context and by the file size checked below.
  uint64_t need = json_bytes + s.history.size() * sizeof(int32_t);
  std::vector<uint64_t> layer_floats;
  for (size_t i = 0; i < s.layers.size(); ++i) {
    const io::CacheLayer& l = s.layers[i];
    bool found = false;
    for (const io::CacheGroup& g : s.groups) found |= g.name == l.group;
    if (!found || l.n_kv_heads < 1 || l.head_dim < 1 || l.n_kv_heads > (1 << 20) || l.head_dim > (1 << 20)) {
      return bad("field 'cache.layers[" + std::to_string(i) + "]' is invalid");
    }
    const uint64_t n = static_cast<uint64_t>(l.n_kv_heads) * s.CommittedSlots(i) * l.head_dim;
    layer_floats.push_back(n);
    need += 2 * n * elem + 2 * (n / l.head_dim) * scale_bytes;
    if (need > payload) break;
  }
  if (need != payload) return bad("payload holds " + std::to_string(payload) + " bytes, the header describes " + std::to_string(need));
  size_t at = kSnapshotHeaderBytes + json_bytes;
  std::memcpy(s.history.data(), file.data() + at, s.history.size() * sizeof(int32_t));
  at += s.history.size() * sizeof(int32_t);
  for (size_t i = 0; q8 && i < s.layers.size(); ++i) {
    const size_t n = layer_floats[i], rows = n / static_cast<size_t>(s.layers[i].head_dim);
    for (int kv = 0; kv < 2; ++kv) {
      auto& q = (kv == 0 ? s.k8 : s.v8).emplace_back(n);
      std::memcpy(q.data(), file.data() + at, n);
      at += n;
      auto& sc = (kv == 0 ? s.k_scale : s.v_scale).emplace_back(rows);
      std::memcpy(sc.data(), file.data() + at, rows * sizeof(float));
      at += rows * sizeof(float);
    }
  }
  for (size_t i = 0; !q8 && i < s.layers.size(); ++i) {
    s.k.emplace_back(layer_floats[i]);
    s.v.emplace_back(layer_floats[i]);
    std::memcpy(s.k[i].data(), file.data() + at, layer_floats[i] * sizeof(float));
    at += layer_floats[i] * sizeof(float);
    std::memcpy(s.v[i].data(), file.data() + at, layer_floats[i] * sizeof(float));
    at += layer_floats[i] * sizeof(float);
  }
  for (int32_t t : s.history) {
    if (t < 0 || t >= s.vocab_size) return bad("history holds token id " + std::to_string(t) + " outside the vocabulary");
  }
  return s;
}

}  // namespace slm::llm
