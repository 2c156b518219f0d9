#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "io/artifact_reader.h"
#include "tools/commands.h"

namespace slm::cli {
namespace {

// The special tokens, chat templates and generation defaults at a glance (the metadata dump
// above has them in full).
void PrintChatSummary(const nlohmann::json& m) {
  if (!m.is_object()) return;
  auto show = [&](const char* key) { return m.contains(key) ? m[key].dump() : std::string("(absent)"); };
  std::printf("\nchat & generation:\n");
  std::printf("  bos_id %s, eos_ids %s, pad_id %s\n", show("bos_id").c_str(), show("eos_ids").c_str(),
              show("pad_id").c_str());
  std::printf("  add_bos %s, add_eos %s (appends %s)\n", show("add_bos").c_str(), show("add_eos").c_str(),
              show("add_eos_ids").c_str());
  const std::string tmpl = m.value("chat_template", std::string());
  std::printf("  chat_template: %s\n", tmpl.empty() ? "none" : (std::to_string(tmpl.size()) + " bytes").c_str());
  if (m.contains("chat_templates") && m["chat_templates"].is_object()) {
    for (auto it = m["chat_templates"].begin(); it != m["chat_templates"].end(); ++it) {
      std::printf("  chat_templates[%s]: %zu bytes\n", it.key().c_str(),
                  it->is_string() ? it->get<std::string>().size() : size_t{0});
    }
  }
  std::printf("  generation defaults: %s\n", show("generation_defaults").c_str());
}

}  // namespace

Action AddInspect(CLI::App& app) {
  struct Args {
    std::string model;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("inspect", "Print an artifact's methods, I/O signatures, metadata, constants and arena sizes");
  cmd->add_option("model", a->model, "artifact (.slm)")->required();
  cmd->add_flag("--json", a->json, "print one JSON object");
  return [a]() {
    auto file = io::ArtifactFile::Open(a->model);
    if (!file.ok()) return Fail(file.status());
    const io::ArtifactFile& f = **file;
    nlohmann::json out;
    out["file"] = f.path();
    out["file_bytes"] = f.file_size();
    out["format_version"] = f.format_version();
    out["producer"] = f.producer();
    out["metadata"] = nlohmann::json::parse(f.metadata_json(), nullptr, false);

    // Which methods reference each constant.
    std::map<int32_t, std::vector<std::string>> users;
    nlohmann::json methods = nlohmann::json::array();
    for (const std::string& name : f.method_names()) {
      auto g = f.LoadMethod(name);
      if (!g.ok()) return Fail(g.status());
      nlohmann::json m;
      m["name"] = name;
      m["arena_bytes"] = g->arena_bytes;
      m["ops"] = g->ops.size();
      auto sig = [&](const std::vector<int32_t>& ids) {
        nlohmann::json list = nlohmann::json::array();
        for (int32_t id : ids) {
          const graph::Value& v = g->values[id];
          list.push_back({{"name", v.name}, {"dtype", DTypeName(v.dtype)}, {"shape", v.shape}, {"kind", graph::ValueKindName(v.kind)}});
        }
        return list;
      };
      m["inputs"] = sig(g->inputs);
      m["outputs"] = sig(g->outputs);
      for (const graph::Value& v : g->values) {
        if (v.kind != graph::ValueKind::kConstant) continue;
        auto& u = users[v.constant_index];
        if (u.empty() || u.back() != name) u.push_back(name);
      }
      methods.push_back(m);
    }
    out["methods"] = methods;
    // Session state (KV caches and, for int8 caches, their row scales) from the first method's
    // state inputs (every method binds the same states), and what f32 caches would take.
    if (!f.method_names().empty()) {
      auto g = f.LoadMethod(f.method_names().front());
      if (!g.ok()) return Fail(g.status());
      uint64_t state_bytes = 0, f32_bytes = 0;
      for (int32_t id : g->inputs) {
        const graph::Value& v = g->values[id];
        if (v.kind != graph::ValueKind::kState) continue;
        auto nb = CheckedByteSize(v.dtype, v.shape);
        state_bytes += nb.ok() ? *nb : 0;
        if (v.name.rfind("k_cache.", 0) == 0 || v.name.rfind("v_cache.", 0) == 0) {
          auto fb = CheckedByteSize(DType::kF32, v.shape);
          f32_bytes += fb.ok() ? *fb : 0;
        }
      }
      const auto& meta = out["metadata"];
      const auto& cache = meta.is_object() && meta.contains("cache") ? meta["cache"] : nlohmann::json::object();
      out["kv_cache"] = {{"dtype", cache.value("dtype", std::string("?"))},
                         {"format", cache.value("format", std::string("kv_f32_v1"))},
                         {"bytes", state_bytes},
                         {"f32_bytes", f32_bytes}};
    }
    nlohmann::json constants = nlohmann::json::array();
    uint64_t total = 0;
    for (size_t i = 0; i < f.constants().size(); ++i) {
      const auto& c = f.constants()[i];
      total += c.nbytes;
      constants.push_back({{"name", c.name}, {"dtype", DTypeName(c.dtype)}, {"shape", c.shape},
                           {"bytes", c.nbytes}, {"shared_by", users[static_cast<int32_t>(i)]}});
    }
    out["constants"] = constants;
    out["constant_bytes"] = total;
    if (a->json) {
      std::printf("%s\n", out.dump(2).c_str());
      return 0;
    }
    std::printf("artifact %s: %llu bytes, format v%u, %s\n", f.path().c_str(),
                static_cast<unsigned long long>(f.file_size()), f.format_version(), f.producer().c_str());
    std::printf("\nmetadata:\n%s\n", out["metadata"].dump(2).c_str());
    PrintChatSummary(out["metadata"]);
    if (out.contains("kv_cache")) {
      const auto& kv = out["kv_cache"];
      const double b = double(kv["bytes"].get<uint64_t>()), f32b = double(kv["f32_bytes"].get<uint64_t>());
      std::printf("\nkv cache: dtype %s, format %s: %llu bytes (f32 caches: %llu bytes, %.1f%%)\n",
                  kv["dtype"].get<std::string>().c_str(), kv["format"].get<std::string>().c_str(),
                  static_cast<unsigned long long>(b), static_cast<unsigned long long>(f32b), f32b > 0 ? 100.0 * b / f32b : 0.0);
    }
    for (const auto& m : methods) {
      std::printf("\nmethod %s: %zu ops, arena %lld bytes\n", m["name"].get<std::string>().c_str(),
                  m["ops"].get<size_t>(), static_cast<long long>(m["arena_bytes"].get<int64_t>()));
      for (const char* dir : {"inputs", "outputs"}) {
        std::printf("  %s:\n", dir);
        for (const auto& v : m[dir]) {
          std::printf("    %-14s %-8s %-22s %s\n", v["name"].get<std::string>().c_str(), v["dtype"].get<std::string>().c_str(),
                      v["shape"].dump().c_str(), v["kind"].get<std::string>().c_str());
        }
      }
    }
    std::printf("\nconstants: %zu, %llu bytes\n", f.constants().size(), static_cast<unsigned long long>(total));
    for (const auto& c : constants) {
      std::string shared;
      for (const auto& u : c["shared_by"]) shared += (shared.empty() ? "" : ",") + u.get<std::string>();
      std::printf("  %-48s %-8s %-14s %10llu B  shared by %s\n", c["name"].get<std::string>().c_str(),
                  c["dtype"].get<std::string>().c_str(), c["shape"].dump().c_str(),
                  static_cast<unsigned long long>(c["bytes"].get<uint64_t>()), shared.c_str());
    }
    return 0;
  };
}

}  // namespace slm::cli
