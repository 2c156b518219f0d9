#include "llm/tokenizer_factory.h"

#include <charconv>
#include <filesystem>
#include <map>

#include "core/mapped_file.h"
#include "io/artifact_reader.h"
#include "io/contract_metadata.h"
#include "io/json_util.h"
#include "llm/sentencepiece_tokenizer.h"
#include "llm/tiktoken_tokenizer.h"

namespace slm::llm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using FileSet = std::map<std::string, std::string>;  // file name → content

constexpr std::string_view kContainerMagic = "SLMTOKFILES1\n";
constexpr const char* kSideFiles[] = {"tokenizer_config.json", "special_tokens_map.json"};

bool IsFile(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

Status AddFile(FileSet* files, const std::string& name, const fs::path& path) {
  SLM_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path.string()));
  (*files)[name] = std::move(bytes);
  return Status::Ok();
}

Status AddSideFiles(FileSet* files, const fs::path& dir) {
  for (const char* name : kSideFiles) {
    if (!files->count(name) && IsFile(dir / name)) SLM_RETURN_IF_ERROR(AddFile(files, name, dir / name));
  }
  return Status::Ok();
}

std::string ModelFileKind(const std::string& bytes) {
  return LooksLikeTiktoken(bytes) ? "tiktoken" : "sentencepiece";
}

struct Collected {
  std::string kind;
  FileSet files;
  std::string source;
};

// The tokenizer files of a checkpoint directory, in order of preference.
Result<std::optional<Collected>> CollectFromDir(const fs::path& dir) {
  Collected c;
  if (IsFile(dir / "tokenizer.json")) {
    c.kind = "hf_tokenizer_json";
    c.source = (dir / "tokenizer.json").string();
    SLM_RETURN_IF_ERROR(AddFile(&c.files, "tokenizer.json", dir / "tokenizer.json"));
  } else if (IsFile(dir / "vocab.json") && IsFile(dir / "merges.txt")) {
    c.kind = "bpe_vocab_merges";
    c.source = (dir / "vocab.json").string() + " + merges.txt";
    SLM_RETURN_IF_ERROR(AddFile(&c.files, "vocab.json", dir / "vocab.json"));
    SLM_RETURN_IF_ERROR(AddFile(&c.files, "merges.txt", dir / "merges.txt"));
  } else {
    fs::path model;
    for (const fs::path& candidate : {dir / "tokenizer.model", dir / "original" / "tokenizer.model"}) {
      if (IsFile(candidate)) {
        model = candidate;
        break;
      }
    }
    if (model.empty()) return std::optional<Collected>();
    c.source = model.string();
    SLM_RETURN_IF_ERROR(AddFile(&c.files, "tokenizer.model", model));
    c.kind = ModelFileKind(c.files["tokenizer.model"]);
  }
  SLM_RETURN_IF_ERROR(AddSideFiles(&c.files, dir));
  return std::optional<Collected>(std::move(c));
}

Result<Collected> CollectFromFile(const fs::path& path) {
  Collected c;
  c.source = path.string();
  const fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  const std::string name = path.filename().string();
  if (name == "vocab.json" || name == "merges.txt") {
    if (!IsFile(dir / "vocab.json") || !IsFile(dir / "merges.txt")) {
      return NotFound(path.string() + ": vocab.json and merges.txt must be side by side in " + dir.string());
    }
    c.kind = "bpe_vocab_merges";
    SLM_RETURN_IF_ERROR(AddFile(&c.files, "vocab.json", dir / "vocab.json"));
    SLM_RETURN_IF_ERROR(AddFile(&c.files, "merges.txt", dir / "merges.txt"));
  } else if (path.extension() == ".json") {
    c.kind = "hf_tokenizer_json";
    SLM_RETURN_IF_ERROR(AddFile(&c.files, "tokenizer.json", path));
  } else {
    SLM_RETURN_IF_ERROR(AddFile(&c.files, "tokenizer.model", path));
    c.kind = ModelFileKind(c.files["tokenizer.model"]);
  }
  if (name != "tokenizer_config.json") SLM_RETURN_IF_ERROR(AddSideFiles(&c.files, dir));
  // Llama 3 keeps its tiktoken file in original/, its configs one level up.
  if (dir.filename() == "original") SLM_RETURN_IF_ERROR(AddSideFiles(&c.files, dir.parent_path()));
  return c;
}

Result<TokenizerSideFiles> ParseSide(const FileSet& files, const std::string& source) {
  TokenizerSideFiles side;
  if (auto it = files.find("tokenizer_config.json"); it != files.end()) {
    SLM_ASSIGN_OR_RETURN(side.tokenizer_config, io::ParseJson(it->second, source + " (tokenizer_config.json)"));
  }
  if (auto it = files.find("special_tokens_map.json"); it != files.end()) {
    SLM_ASSIGN_OR_RETURN(side.special_tokens_map, io::ParseJson(it->second, source + " (special_tokens_map.json)"));
  }
  return side;
}

Result<const std::string*> Need(const FileSet& files, const std::string& name, const std::string& source) {
  auto it = files.find(name);
  if (it == files.end()) return NotFound(source + ": the tokenizer has no " + name);
  return &it->second;
}

Result<TokenizerBundle> LoadFiles(const std::string& kind, const FileSet& files, const std::string& source) {
  TokenizerBundle b;
  b.kind = kind;
  b.source = source;
  SLM_ASSIGN_OR_RETURN(TokenizerSideFiles side, ParseSide(files, source));
  if (kind == "hf_tokenizer_json") {
    SLM_ASSIGN_OR_RETURN(const std::string* text, Need(files, "tokenizer.json", source));
    SLM_ASSIGN_OR_RETURN(b.tokenizer, LoadHfTokenizerJson(*text, source, side, &b.add_special));
  } else if (kind == "bpe_vocab_merges") {
    SLM_ASSIGN_OR_RETURN(const std::string* vocab, Need(files, "vocab.json", source));
    SLM_ASSIGN_OR_RETURN(const std::string* merges, Need(files, "merges.txt", source));
    SLM_ASSIGN_OR_RETURN(b.tokenizer, LoadVocabMergesTokenizer(*vocab, *merges, source, side, &b.add_special));
  } else if (kind == "tiktoken") {
    SLM_ASSIGN_OR_RETURN(const std::string* model, Need(files, "tokenizer.model", source));
    SLM_ASSIGN_OR_RETURN(b.tokenizer, LoadTiktokenTokenizer(*model, source, side, &b.add_special));
  } else if (kind == "sentencepiece") {
    SLM_ASSIGN_OR_RETURN(const std::string* model, Need(files, "tokenizer.model", source));
    SLM_ASSIGN_OR_RETURN(auto sp, SentencePieceTokenizer::FromBytes(*model, source));
    // LlamaTokenizer's defaults: BOS yes, EOS no; tokenizer_config.json may say otherwise.
    const json& cfg = side.tokenizer_config;
    const bool add_bos = cfg.is_object() && cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean()
                             ? cfg["add_bos_token"].get<bool>() : true;
    const bool add_eos = cfg.is_object() && cfg.contains("add_eos_token") && cfg["add_eos_token"].is_boolean()
                             ? cfg["add_eos_token"].get<bool>() : false;
    if (add_bos && sp->bos_id()) b.add_special.prefix.push_back(*sp->bos_id());
    if (add_eos && sp->eos_id()) b.add_special.suffix.push_back(*sp->eos_id());
    b.tokenizer = std::move(sp);
  } else {
    return Unsupported(source + ": tokenizer kind '" + kind +
                       "' is not supported (supported: sentencepiece, hf_tokenizer_json, tiktoken, bpe_vocab_merges)");
  }
  return b;
}

bool IsArtifact(const fs::path& path) {
  if (path.extension() == ".slm") return true;
  auto head = MappedFile::Open(path.string());
  if (!head.ok() || (*head)->size() < 8) return false;
  return std::string_view(reinterpret_cast<const char*>((*head)->data()), 8) == "STATICLM";
}

Result<TokenizerBundle> LoadFromArtifact(const std::string& path) {
  SLM_ASSIGN_OR_RETURN(auto file, io::ArtifactFile::Open(path));
  if (file->tokenizer_kind().empty()) {
    return NotFound(path + ": the artifact has no embedded tokenizer");
  }
  SLM_ASSIGN_OR_RETURN(TokenizerBundle b, LoadEmbeddedTokenizer(file->tokenizer_kind(), file->tokenizer_bytes(),
                                                                path + " (embedded tokenizer)"));
  // The artifact's metadata decides BOS, as the runner does.
  SLM_ASSIGN_OR_RETURN(io::ContractMetadata meta, io::ContractMetadata::FromJson(file->metadata_json()));
  b.add_special.prefix.clear();
  if (meta.add_bos && meta.bos_id) b.add_special.prefix.push_back(*meta.bos_id);
  // And EOS (add_eos_token), which a SentencePiece model file alone cannot say.
  b.add_special.suffix = meta.add_eos ? meta.add_eos_ids : std::vector<int32_t>{};
  return b;
}

}  // namespace

std::string PackTokenizerFiles(const std::vector<std::pair<std::string, std::string>>& files) {
  std::string out(kContainerMagic);
  for (const auto& [name, bytes] : files) {
    out += name + " " + std::to_string(bytes.size()) + "\n";
    out += bytes;
  }
  return out;
}

Result<std::vector<std::pair<std::string, std::string>>> UnpackTokenizerFiles(std::string_view bytes,
                                                                              const std::string& source) {
  if (!bytes.starts_with(kContainerMagic)) {
    return ParseError(source + ": not a tokenizer file container (expected magic 'SLMTOKFILES1')");
  }
  std::vector<std::pair<std::string, std::string>> files;
  size_t pos = kContainerMagic.size();
  while (pos < bytes.size()) {
    const size_t nl = bytes.find('\n', pos);
    const std::string_view header = bytes.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    const size_t space = header.rfind(' ');
    uint64_t size = 0;
    const char* num_end = header.data() + header.size();
    if (nl == std::string_view::npos || space == std::string_view::npos || space == 0 ||
        std::from_chars(header.data() + space + 1, num_end, size).ptr != num_end ||
        size > bytes.size() - (nl + 1)) {
      return ParseError(source + ": tokenizer file container entry at byte " + std::to_string(pos) +
                        " is malformed (expected '<name> <size>\\n' and that many bytes)");
    }
    files.emplace_back(std::string(header.substr(0, space)), std::string(bytes.substr(nl + 1, size)));
    pos = nl + 1 + size;
  }
  return files;
}

Result<TokenizerBundle> LoadEmbeddedTokenizer(std::string_view kind, std::string_view bytes,
                                              const std::string& source) {
  FileSet files;
  if (bytes.starts_with(kContainerMagic)) {
    SLM_ASSIGN_OR_RETURN(auto list, UnpackTokenizerFiles(bytes, source));
    for (auto& [name, content] : list) files[name] = std::move(content);
  } else if (kind == "hf_tokenizer_json") {
    files["tokenizer.json"] = std::string(bytes);
  } else if (kind == "sentencepiece" || kind == "tiktoken") {
    files["tokenizer.model"] = std::string(bytes);
  } else if (kind == "bpe_vocab_merges") {
    return ParseError(source + ": kind bpe_vocab_merges needs a tokenizer file container");
  }
  return LoadFiles(std::string(kind), files, source);
}

Result<TokenizerBundle> LoadTokenizerBundle(const std::string& path) {
  const fs::path p(path);
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    SLM_ASSIGN_OR_RETURN(auto collected, CollectFromDir(p));
    if (!collected) {
      return NotFound(path + ": no tokenizer found (looked for tokenizer.json, vocab.json + merges.txt, "
                             "tokenizer.model, original/tokenizer.model)");
    }
    return LoadFiles(collected->kind, collected->files, collected->source);
  }
  if (!IsFile(p)) return NotFound(path + ": no such file or directory");
  if (IsArtifact(p)) return LoadFromArtifact(path);
  SLM_ASSIGN_OR_RETURN(Collected c, CollectFromFile(p));
  return LoadFiles(c.kind, c.files, c.source);
}

Result<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path) {
  SLM_ASSIGN_OR_RETURN(TokenizerBundle b, LoadTokenizerBundle(path));
  return std::move(b.tokenizer);
}

Result<std::optional<EmbeddedTokenizer>> PackCheckpointTokenizer(const std::string& checkpoint_dir) {
  SLM_ASSIGN_OR_RETURN(auto collected, CollectFromDir(fs::path(checkpoint_dir)));
  if (!collected) return std::optional<EmbeddedTokenizer>();
  EmbeddedTokenizer e;
  e.kind = collected->kind;
  e.source = collected->source;
  if (e.kind == "sentencepiece") {
    // The ModelProto itself, as artifacts always stored it; BOS comes from the metadata.
    e.bytes = collected->files["tokenizer.model"];
  } else {
    std::vector<std::pair<std::string, std::string>> list(collected->files.begin(), collected->files.end());
    e.bytes = PackTokenizerFiles(list);
  }
  // Load once: an unsupported tokenizer fails the compile, naming what is unsupported.
  SLM_ASSIGN_OR_RETURN(TokenizerBundle check, LoadFiles(e.kind, collected->files, e.source));
  e.adds_bos = !check.add_special.prefix.empty();
  e.suffix_ids = check.add_special.suffix;
  return std::optional<EmbeddedTokenizer>(std::move(e));
}

}  // namespace slm::llm
