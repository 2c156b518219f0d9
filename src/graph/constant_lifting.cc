#include "graph/constant_lifting.h"

#include <xxhash.h>

#include <cstring>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "core/memory_limit.h"

namespace slm::graph {
namespace {

std::string WhereConstant(const Graph& g, const Value& v) {
  return "method '" + g.name + "' constant '" + v.name + "'";
}

// Reads a whole constant. The caller drops the buffer as soon as it is done with it.
Result<std::vector<uint8_t>> ReadAll(const ConstantSource& source, uint64_t nbytes,
                                     const std::string& where) {
  // nbytes comes from a checkpoint: refuse what the memory limit cannot hold, before allocating.
  SLM_RETURN_IF_ERROR(CheckMemoryNeed(nbytes, where + ": reading " + source.Describe()));
  std::vector<uint8_t> bytes;
  try {
    bytes.resize(nbytes);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted(where + ": cannot allocate " + std::to_string(nbytes) +
                             " bytes to read " + source.Describe());
  }
  Status s = source.Read(bytes.data(), nbytes);
  if (!s.ok()) return WithContext(where, s);
  return bytes;
}

Result<uint64_t> HashSource(const ConstantSource& source, uint64_t nbytes,
                            const std::string& where) {
  SLM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadAll(source, nbytes, where));
  return static_cast<uint64_t>(XXH64(bytes.data(), bytes.size(), 0));
}

Result<bool> SameBytes(const ConstantSource& a, const ConstantSource& b, uint64_t nbytes,
                       const std::string& where) {
  SLM_ASSIGN_OR_RETURN(std::vector<uint8_t> x, ReadAll(a, nbytes, where));
  SLM_ASSIGN_OR_RETURN(std::vector<uint8_t> y, ReadAll(b, nbytes, where));
  return nbytes == 0 || std::memcmp(x.data(), y.data(), nbytes) == 0;
}

std::string FreshName(const std::string& base, const std::unordered_set<std::string>& taken) {
  for (uint64_t k = 1;; ++k) {
    std::string name = base + "." + std::to_string(k);
    if (!taken.count(name)) return name;
  }
}

// Builds the table. Indices are collected in `assignments` and applied by the caller only
// after everything succeeded.
class Lifter {
 public:
  explicit Lifter(const std::vector<Graph*>& methods) {
    for (const Graph* g : methods) {
      for (const Value& v : g->values) reserved_.insert(v.name);
    }
  }

  Result<int32_t> Lift(const Graph& g, const Value& v) {
    const std::string where = WhereConstant(g, v);
    if (!v.source) return InvalidArgument(where + ": has no source (already serialized?)");
    Result<uint64_t> nbytes = CheckedByteSize(v.dtype, v.shape);
    if (!nbytes.ok()) return Status(nbytes.status().code(), where + ": " + nbytes.status().message());
    SLM_ASSIGN_OR_RETURN(uint64_t hash, CachedHash(*v.source, *nbytes, where));

    SLM_ASSIGN_OR_RETURN(int32_t match, FindEqual(v, *nbytes, hash, where));
    if (match >= 0) return match;

    if (table_.size() >= static_cast<size_t>(INT32_MAX)) {
      return ResourceExhausted(where + ": too many distinct constants");
    }
    std::string name = v.name;
    if (names_in_table_.count(name)) {
      name = FreshName(v.name, reserved_);
      reserved_.insert(name);
    }
    names_in_table_.insert(name);
    const int32_t index = static_cast<int32_t>(table_.size());
    table_.push_back(LiftedConstant{name, v.dtype, v.shape, *nbytes, hash, v.source});
    by_hash_[hash].push_back(index);
    return index;
  }

  std::vector<LiftedConstant> Take() { return std::move(table_); }

 private:
  // Graph builders usually share one source object between methods; hash it only once.
  Result<uint64_t> CachedHash(const ConstantSource& source, uint64_t nbytes,
                              const std::string& where) {
    auto key = std::make_pair(&source, nbytes);
    auto it = hash_cache_.find(key);
    if (it != hash_cache_.end()) return it->second;
    SLM_ASSIGN_OR_RETURN(uint64_t hash, HashSource(source, nbytes, where));
    hash_cache_.emplace(key, hash);
    return hash;
  }

  // Index of a table entry with the same dtype, shape and bytes as `v`, or -1.
  Result<int32_t> FindEqual(const Value& v, uint64_t nbytes, uint64_t hash,
                            const std::string& where) {
    auto it = by_hash_.find(hash);
    if (it == by_hash_.end()) return -1;
    for (int32_t index : it->second) {
      const LiftedConstant& c = table_[index];
      if (c.dtype != v.dtype || c.shape != v.shape) continue;
      if (c.source == v.source) return index;
      SLM_ASSIGN_OR_RETURN(bool same, SameBytes(*c.source, *v.source, nbytes, where));
      if (same) return index;
    }
    return -1;
  }

  std::unordered_set<std::string> reserved_;        // every name in the program, plus renames
  std::unordered_set<std::string> names_in_table_;
  std::vector<LiftedConstant> table_;
  std::unordered_map<uint64_t, std::vector<int32_t>> by_hash_;
  std::map<std::pair<const ConstantSource*, uint64_t>, uint64_t> hash_cache_;
};

}  // namespace

Result<std::vector<LiftedConstant>> LiftConstants(std::vector<Graph*> methods) {
  for (size_t i = 0; i < methods.size(); ++i) {
    if (methods[i] == nullptr) return InvalidArgument("LiftConstants: method " + std::to_string(i) + " is null");
  }
  Lifter lifter(methods);
  std::vector<std::pair<Value*, int32_t>> assignments;
  for (Graph* g : methods) {
    for (Value& v : g->values) {
      if (v.kind != ValueKind::kConstant) continue;
      SLM_ASSIGN_OR_RETURN(int32_t index, lifter.Lift(*g, v));
      assignments.emplace_back(&v, index);
    }
  }
  for (auto& [value, index] : assignments) value->constant_index = index;
  return lifter.Take();
}

}  // namespace slm::graph
