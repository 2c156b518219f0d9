#include "llm/tiktoken_tokenizer.h"

#include <charconv>

namespace slm::llm {
namespace {

int Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Standard base64 with '=' padding → bytes; nullopt when malformed.
std::optional<std::string> DecodeBase64(std::string_view in) {
  if (in.empty() || in.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(in.size() / 4 * 3);
  for (size_t i = 0; i < in.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = in[i + k];
      if (c == '=' && i + 4 == in.size() && k >= 2) {
        v[k] = 0;
        ++pad;
      } else if (pad > 0 || (v[k] = Base64Value(c)) < 0) {
        return std::nullopt;
      }
    }
    const uint32_t triple = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
    out.push_back(static_cast<char>(triple >> 16));
    if (pad < 2) out.push_back(static_cast<char>((triple >> 8) & 0xFF));
    if (pad < 1) out.push_back(static_cast<char>(triple & 0xFF));
  }
  return out;
}

// Llama 3's special tokens (Meta's tokenizer.py): ids num_base_tokens + i.
std::vector<std::string> Llama3SpecialNames() {
  std::vector<std::string> names = {"<|begin_of_text|>", "<|end_of_text|>",
                                    "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
                                    "<|reserved_special_token_2|>", "<|reserved_special_token_3|>",
                                    "<|start_header_id|>", "<|end_header_id|>",
                                    "<|reserved_special_token_4|>", "<|eot_id|>"};
  for (int i = 5; i < 256 - 5; ++i) names.push_back("<|reserved_special_token_" + std::to_string(i) + "|>");
  return names;
}

}  // namespace

bool LooksLikeTiktoken(std::string_view bytes) {
  const size_t nl = bytes.find('\n');
  const std::string_view line = bytes.substr(0, nl);
  const size_t space = line.find(' ');
  if (space == std::string_view::npos || space == 0 || space + 1 >= line.size()) return false;
  for (char c : line.substr(0, space)) {
    if (Base64Value(c) < 0 && c != '=') return false;
  }
  for (char c : line.substr(space + 1)) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

Result<std::unique_ptr<BpeTokenizer>> LoadTiktokenTokenizer(std::string_view file_bytes,
                                                            const std::string& source,
                                                            const TokenizerSideFiles& side,
                                                            SpecialTokenPolicy* policy) {
  BpeTokenizerConfig c;
  c.source = source;
  const ByteAlphabet& alphabet = ByteAlphabet::Get();
  size_t pos = 0, line_no = 0;
  int32_t next_id = 0;
  while (pos < file_bytes.size()) {
    size_t end = file_bytes.find('\n', pos);
    if (end == std::string_view::npos) end = file_bytes.size();
    std::string_view line = file_bytes.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    const std::string where = source + ": line " + std::to_string(line_no);
    if (space == std::string_view::npos) return ParseError(where + " is '" + std::string(line) + "', expected '<base64 token> <rank>'");
    auto token = DecodeBase64(line.substr(0, space));
    int32_t rank = -1;
    const std::string_view num = line.substr(space + 1);
    const auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), rank);
    if (!token || ec != std::errc() || p != num.data() + num.size() || rank < 0) {
      return ParseError(where + " is '" + std::string(line) + "', expected '<base64 token> <rank>'");
    }
    c.model.vocab.emplace_back(alphabet.EncodeBytes(*token), rank);
    next_id = std::max(next_id, rank + 1);
  }
  if (c.model.vocab.empty()) return ParseError(source + ": no tokens (expected '<base64 token> <rank>' lines)");
  // Ranks are the token ids and the id table is sized by the largest one: real files number
  // their lines densely (0..N-1). Bounding the largest rank by the line count (with slack for
  // gaps) keeps memory proportional to the file instead of to a number written in it.
  const int64_t max_ids = 2 * int64_t(c.model.vocab.size()) + 1024;
  if (next_id > max_ids) {
    return ParseError(source + ": largest rank is " + std::to_string(next_id - 1) + " for " +
                      std::to_string(c.model.vocab.size()) + " tokens, expected ranks below " +
                      std::to_string(max_ids) + " (ranks are dense token ids)");
  }
  c.model.merge_by_concatenated_rank = true;
  c.model.ignore_merges = true;
  SLM_ASSIGN_OR_RETURN(c.pre_tokenizer, MakeRegexByteLevelPreTokenizer(kLlama3Pattern, false, source + " (Llama 3 regex)"));
  c.decoder.byte_level = true;
  SLM_ASSIGN_OR_RETURN(c.added_tokens, ParseAddedTokensDecoder(side.tokenizer_config, source + " (tokenizer_config.json)"));
  if (c.added_tokens.empty()) {
    const auto names = Llama3SpecialNames();
    for (size_t i = 0; i < names.size(); ++i) {
      AddedToken a;
      a.id = next_id + static_cast<int32_t>(i);
      a.content = names[i];
      a.special = true;
      c.added_tokens.push_back(a);
    }
  }
  SLM_ASSIGN_OR_RETURN(auto tokenizer, BpeTokenizer::Create(std::move(c)));
  if (side.tokenizer_config.is_null() && side.special_tokens_map.is_null()) {
    tokenizer->set_special_ids(tokenizer->TokenToId("<|begin_of_text|>"), tokenizer->TokenToId("<|end_of_text|>"));
  }
  ResolveSpecialIds(tokenizer.get(), side);
  // HF's Llama 3 template adds BOS; tokenizer_config.json's add_bos_token/add_eos_token rule.
  SpecialTokenPolicy local;
  const nlohmann::json& cfg = side.tokenizer_config;
  const bool add_bos = cfg.is_object() ? cfg.value("add_bos_token", true) : true;
  const bool add_eos = cfg.is_object() ? cfg.value("add_eos_token", false) : false;
  if (add_bos && tokenizer->bos_id()) local.prefix.push_back(*tokenizer->bos_id());
  if (add_eos && tokenizer->eos_id()) local.suffix.push_back(*tokenizer->eos_id());
  if (policy) *policy = std::move(local);
  return tokenizer;
}

}  // namespace slm::llm
