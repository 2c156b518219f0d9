// Loaders for Hugging Face BPE tokenizer files → BpeTokenizer:
//  - tokenizer.json (the `tokenizers` library's serialization): normalizer, pre_tokenizer,
//    model (type BPE), added_tokens, post_processor (for --add-special) and decoder;
//  - vocab.json + merges.txt (the "slow" GPT2Tokenizer / Qwen2Tokenizer files): byte-level BPE
//    whose pre-tokenizer regex and normalizer follow tokenizer_config.json's tokenizer_class
//    (Qwen2Tokenizer: NFC + Qwen2's regex; GPT2Tokenizer, CodeGenTokenizer or none: GPT-2's).
// Side files are optional: tokenizer_config.json (added_tokens_decoder, bos/eos/unk/pad tokens,
// add_bos_token / add_eos_token) and special_tokens_map.json.
//
// Anything the pipeline does not implement (a model type other than BPE, an unknown
// normalizer / pre-tokenizer / decoder type, BPE dropout, subword prefixes) is kUnsupported
// naming the type, the field and the file — never silently approximated.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "llm/bpe_tokenizer.h"

namespace slm::llm {

// What Hugging Face adds around the ids when add_special_tokens=True.
struct SpecialTokenPolicy {
  std::vector<int32_t> prefix;  // e.g. {BOS}
  std::vector<int32_t> suffix;  // e.g. {EOS}
  // Set when the file's rule is one we do not implement (a post_processor type): adding
  // special tokens then fails with this message instead of guessing.
  std::string unsupported;
};

// Parsed side files of a checkpoint's tokenizer; null json = absent.
struct TokenizerSideFiles {
  nlohmann::json tokenizer_config;    // tokenizer_config.json
  nlohmann::json special_tokens_map;  // special_tokens_map.json
};

// tokenizer.json content → tokenizer. `source` (the path) is named in errors.
Result<std::unique_ptr<BpeTokenizer>> LoadHfTokenizerJson(std::string_view json_text,
                                                          const std::string& source,
                                                          const TokenizerSideFiles& side,
                                                          SpecialTokenPolicy* policy);

// vocab.json + merges.txt contents → tokenizer.
Result<std::unique_ptr<BpeTokenizer>> LoadVocabMergesTokenizer(std::string_view vocab_json,
                                                               std::string_view merges_txt,
                                                               const std::string& source,
                                                               const TokenizerSideFiles& side,
                                                               SpecialTokenPolicy* policy);

// Helpers shared with the tiktoken loader.
// tokenizer_config.json "added_tokens_decoder" → added tokens (ParseError naming the entry).
Result<std::vector<AddedToken>> ParseAddedTokensDecoder(const nlohmann::json& tokenizer_config,
                                                        const std::string& source);
// A special-token field of tokenizer_config.json / special_tokens_map.json: a string, an
// {"content": ...} object, or null/absent (→ nullopt).
std::optional<std::string> SpecialTokenContent(const nlohmann::json& config, const char* key);
// Sets bos/eos from tokenizer_config.json (then special_tokens_map.json) token names.
void ResolveSpecialIds(BpeTokenizer* tokenizer, const TokenizerSideFiles& side);

}  // namespace slm::llm
