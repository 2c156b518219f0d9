#include "core/cpu_model.h"

#include <fstream>
#include <sstream>

namespace slm {
namespace {

std::string_view Trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

}  // namespace

std::string CpuModelFromCpuinfo(std::string_view cpuinfo) {
  std::string name, family, model, implementer, part;
  size_t pos = 0;
  while (pos < cpuinfo.size()) {
    size_t end = cpuinfo.find('\n', pos);
    if (end == std::string_view::npos) end = cpuinfo.size();
    const std::string_view line = cpuinfo.substr(pos, end - pos);
    pos = end + 1;
    if (Trim(line).empty()) {
      if (!name.empty() || !implementer.empty()) break;  // the end of the first processor's block
      continue;
    }
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = Trim(line.substr(0, colon));
    const std::string value(Trim(line.substr(colon + 1)));
    if (key == "model name" && name.empty()) name = value;
    else if (key == "cpu family" && family.empty()) family = value;
    else if (key == "model" && model.empty()) model = value;
    else if (key == "CPU implementer" && implementer.empty()) implementer = value;
    else if (key == "CPU part" && part.empty()) part = value;
  }
  if (!name.empty()) {
    if (family.empty() || model.empty()) return name;
    return name + " (family " + family + ", model " + model + ")";
  }
  if (!implementer.empty()) return "Arm implementer " + implementer + (part.empty() ? "" : ", part " + part);
  return "";
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  if (!in) return "";
  std::ostringstream text;
  text << in.rdbuf();
  return CpuModelFromCpuinfo(text.str());
}

}  // namespace slm
