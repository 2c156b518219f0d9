#include "runtime/output_order.h"

#include <charconv>
#include <cstdio>
#include <numeric>

namespace slm::runtime {

void WarnToStderr(const std::string& message) {
  std::fprintf(stderr, "staticlm: warning: %s\n", message.c_str());
}

std::vector<size_t> OutputOrderFromLabels(std::span<const std::string> labels, size_t n_declared,
                                          const WarningSink& warn) {
  std::vector<size_t> identity(labels.size());
  std::iota(identity.begin(), identity.end(), size_t{0});
  auto keep = [&](const std::string& why) {
    if (warn) warn("output order labels ignored, declared order kept: " + why);
    return identity;
  };
  if (labels.size() != n_declared) {
    return keep(std::to_string(labels.size()) + " labelled outputs for " + std::to_string(n_declared) + " declared");
  }
  std::vector<size_t> order(n_declared, SIZE_MAX);
  for (size_t i = 0; i < labels.size(); ++i) {
    const std::string& l = labels[i];
    // Plain decimal digits only: no sign, no spaces, no hex, no trailing garbage.
    uint64_t v = 0;
    const char* b = l.data();
    const char* e = l.data() + l.size();
    auto [p, ec] = std::from_chars(b, e, v);
    if (l.empty() || l[0] == '+' || l[0] == '-' || ec == std::errc::invalid_argument || p != e) {
      return keep("label " + std::to_string(i) + " '" + l.substr(0, 32) + "' is not a decimal output position");
    }
    if (ec == std::errc::result_out_of_range || v >= n_declared) {
      return keep("label " + std::to_string(i) + " '" + l.substr(0, 32) + "' is outside [0, " + std::to_string(n_declared) + ")");
    }
    if (order[v] != SIZE_MAX) return keep("position " + std::to_string(v) + " is labelled twice");
    order[v] = i;
  }
  return order;
}

void RestoreDeclaredOrder(std::vector<ReturnedOutput>& returned, size_t n_declared, const WarningSink& warn) {
  std::vector<std::string> labels;
  labels.reserve(returned.size());
  for (const ReturnedOutput& r : returned) labels.push_back(r.label);
  const std::vector<size_t> order = OutputOrderFromLabels(labels, n_declared, warn);
  std::vector<ReturnedOutput> restored;
  restored.reserve(returned.size());
  for (size_t k : order) restored.push_back(std::move(returned[k]));
  returned = std::move(restored);
}

}  // namespace slm::runtime
