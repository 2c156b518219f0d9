// Constant lifting: gathers the constants of every method of a program into one table, so the
// artifact stores each distinct weight once however many methods (or values) use it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "graph/graph.h"

namespace slm::graph {

// One entry of the program-wide constant table.
struct LiftedConstant {
  std::string name;   // unique in the table; the first user's value name, or "<name>.<k>"
  DType dtype = DType::kF32;
  Shape shape;
  uint64_t nbytes = 0;  // CheckedByteSize(dtype, shape)
  uint64_t xxh64 = 0;   // XXH64 (seed 0) of the bytes
  // Where the bytes come from. The artifact writer re-reads it (weights are mmapped, so a
  // second read is cheap) instead of the lifter keeping any bytes in memory.
  std::shared_ptr<const ConstantSource> source;
};

// Lifts the constants of every method into one program-wide table and sets
// Value::constant_index of every kConstant value of every graph. Value names are unchanged.
//
// Deduplication: constants with identical (dtype, shape, content) get one entry whatever their
// names (tied embeddings, both methods' copies of one weight). The entry takes the name of its
// first user (methods in order, values in order). Equal hashes are confirmed by comparing the
// bytes before merging, so a hash collision never merges different weights; values that share
// one ConstantSource object (same dtype and shape) are merged without reading it twice.
//
// Renaming: a constant whose name is already taken in the table by different content gets
// "<name>.<k>", the smallest k >= 1 whose name is unused. Every value name of every method
// (any kind) is reserved before lifting starts, so a new name never collides with a name that
// exists anywhere in the program.
//
// Memory: each source is read into a scratch buffer, hashed and released; at most two
// constants are held at once (while confirming a hash match).
//
// Fails, leaving every graph unchanged, when a constant has no source, a shape overflows, a
// source fails to read, or a graph pointer is null.
Result<std::vector<LiftedConstant>> LiftConstants(std::vector<Graph*> methods);

}  // namespace slm::graph
