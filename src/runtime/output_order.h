// Output order restoration. Outputs are bound by name, but a backend that runs a method on its
// own (an NPU runtime, a delegate) may hand its outputs back in its own order. Such a backend
// labels each returned output with its position in the method's declared output list (a decimal
// string, "0", "1", ...); the runtime puts them back in declared order before matching names.
//
// A malformed label (not a plain decimal number), one that overflows or is out of range, a
// duplicate, or a label count that differs from the declared outputs makes the whole labelling
// untrustworthy: the runtime then keeps the order as returned (the declared order, for a
// backend that honours it), reports one warning, and never crashes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace slm::runtime {

using WarningSink = std::function<void(const std::string&)>;
// Prints "staticlm: warning: <message>" on stderr.
void WarnToStderr(const std::string& message);

// order[k] = index into the returned list of declared output k. Identity (with one warning
// through `warn`) when the labels cannot be trusted (see above).
std::vector<size_t> OutputOrderFromLabels(std::span<const std::string> labels, size_t n_declared,
                                          const WarningSink& warn = WarnToStderr);

// One output as a backend returns it.
struct ReturnedOutput {
  std::string label;  // the backend's graph output position
  const void* data = nullptr;
  uint64_t nbytes = 0;
};

// Reorders `returned` in place into the declared order (see OutputOrderFromLabels).
void RestoreDeclaredOrder(std::vector<ReturnedOutput>& returned, size_t n_declared,
                          const WarningSink& warn = WarnToStderr);

}  // namespace slm::runtime
