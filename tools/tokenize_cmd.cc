// staticlm tokenize: text → ids (exactly HF's encode(text, add_special_tokens=False), or with
// --add-special the model's BOS/EOS rule) and --decode ids → text, from a checkpoint
// directory, a tokenizer file or a .slm artifact.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "llm/tokenizer_factory.h"
#include "tools/commands.h"

namespace slm::cli {
namespace {

// "1,2,3" (spaces allowed) → ids.
Result<std::vector<int32_t>> ParseIdList(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    if (b == std::string::npos) continue;
    item = item.substr(b, e - b + 1);
    try {
      size_t used = 0;
      const long long v = std::stoll(item, &used);
      if (used != item.size() || v < INT32_MIN || v > INT32_MAX) throw std::invalid_argument(item);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      return InvalidArgument("--decode: '" + item + "' is not an integer token id");
    }
  }
  return ids;
}

}  // namespace

Action AddTokenize(CLI::App& app) {
  struct Args {
    std::string source, text, file, decode;
    bool json = false, add_special = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "tokenize", "Print the token ids of a text (as HF encode(text, add_special_tokens=False)), or decode ids");
  cmd->add_option("source", a->source, "checkpoint directory, tokenizer file (tokenizer.json, vocab.json, "
                                       "tokenizer.model, *.tiktoken) or .slm artifact")->required();
  auto* text = cmd->add_option("text", a->text, "text to tokenize (default: stdin)");
  auto* file = cmd->add_option("-f,--file", a->file, "tokenize this file's bytes exactly");
  auto* decode = cmd->add_option("--decode", a->decode, "decode comma-separated ids, e.g. 1,2,3");
  text->excludes(file);
  decode->excludes(text)->excludes(file);
  cmd->add_flag("--json", a->json, "print one JSON object");
  cmd->add_flag("--add-special", a->add_special, "add BOS/EOS as the model's tokenizer config says");
  return [a, decode, text, file]() {
    auto bundle = llm::LoadTokenizerBundle(a->source);
    if (!bundle.ok()) return Fail(bundle.status());
    const llm::Tokenizer& tok = *bundle->tokenizer;
    if (decode->count() > 0) {
      auto ids = ParseIdList(a->decode);
      if (!ids.ok()) return Fail(ids.status());
      const std::string out = tok.Decode(*ids);
      if (a->json) {
        std::printf("%s\n", nlohmann::json{{"text", out}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
      } else {
        std::fwrite(out.data(), 1, out.size(), stdout);
        std::printf("\n");
      }
      return 0;
    }
    std::string input;
    if (file->count() > 0) {
      auto bytes = ReadFileToString(a->file);
      if (!bytes.ok()) return Fail(bytes.status());
      input = std::move(*bytes);
    } else if (text->count() > 0) {
      input = a->text;
    } else {
      input.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    }
    auto encoded = tok.Encode(input);
    if (!encoded.ok()) return Fail(encoded.status());
    std::vector<int32_t> ids;
    if (a->add_special) {
      if (!bundle->add_special.unsupported.empty()) return Fail(Unsupported(bundle->add_special.unsupported));
      ids = bundle->add_special.prefix;
    }
    ids.insert(ids.end(), encoded->begin(), encoded->end());
    if (a->add_special) ids.insert(ids.end(), bundle->add_special.suffix.begin(), bundle->add_special.suffix.end());
    if (a->json) {
      nlohmann::json pieces = nlohmann::json::array();
      for (int32_t id : ids) pieces.push_back(tok.IdToPiece(id));
      nlohmann::json out = {{"ids", ids}, {"tokens", pieces}, {"count", ids.size()},
                            {"kind", bundle->kind}, {"source", bundle->source}};
      std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      std::string line;
      for (size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
      std::printf("%s\n", line.c_str());
    }
    return 0;
  };
}

}  // namespace slm::cli
