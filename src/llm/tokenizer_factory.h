// One entry point for every tokenizer a checkpoint or artifact can carry.
//
// LoadTokenizer(path) accepts
//  - a checkpoint directory: tokenizer.json, else vocab.json + merges.txt, else
//    tokenizer.model, else original/tokenizer.model (each tokenizer.model is detected as a
//    SentencePiece protobuf or a tiktoken text file), with tokenizer_config.json and
//    special_tokens_map.json from the directory;
//  - a tokenizer file (tokenizer.json, vocab.json or merges.txt with its partner beside it,
//    tokenizer.model, *.tiktoken), with side files from its directory (and the parent of an
//    "original/" directory);
//  - a .slm artifact: its embedded tokenizer.
//
// Embedding: PackCheckpointTokenizer(dir) picks the same file the directory load would and
// returns the artifact's tokenizer (kind, bytes). Kinds: "sentencepiece" (the ModelProto bytes),
// "hf_tokenizer_json", "tiktoken", "bpe_vocab_merges" (a file container, see
// docs/tokenizers.md: the tokenizer file(s) plus tokenizer_config.json and
// special_tokens_map.json when the checkpoint has them).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "llm/hf_tokenizer_json.h"
#include "llm/tokenizer.h"

namespace slm::llm {

struct TokenizerBundle {
  std::unique_ptr<Tokenizer> tokenizer;
  // The special tokens HF's encode(text, add_special_tokens=True) adds.
  SpecialTokenPolicy add_special;
  std::string kind;    // "sentencepiece" | "hf_tokenizer_json" | "tiktoken" | "bpe_vocab_merges"
  std::string source;  // the file(s) it came from
};

Result<TokenizerBundle> LoadTokenizerBundle(const std::string& path);
Result<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path);

struct EmbeddedTokenizer {
  std::string kind;
  std::string bytes;
  std::string source;  // the checkpoint file(s) packed
  // Whether HF's encode(add_special_tokens=True) starts with BOS for this tokenizer (its
  // post_processor / tokenizer_config.json add_bos_token); the artifact's add_bos follows it.
  bool adds_bos = true;
  // The ids encode(add_special_tokens=True) appends (EOS when add_eos_token), for the metadata.
  std::vector<int32_t> suffix_ids;
};

// The tokenizer `checkpoint_dir` ships, packed for the artifact (nullopt when it ships none).
// The packed tokenizer is loaded once as a check, so an unsupported tokenizer is an error at
// compile time, naming the feature and the file.
Result<std::optional<EmbeddedTokenizer>> PackCheckpointTokenizer(const std::string& checkpoint_dir);

// An artifact's embedded tokenizer → tokenizer. `source` is named in errors.
Result<TokenizerBundle> LoadEmbeddedTokenizer(std::string_view kind, std::string_view bytes,
                                              const std::string& source);

// The file container of non-SentencePiece kinds: "SLMTOKFILES1\n", then per file
// "<name> <size>\n<size bytes>". Exposed for tests and tools.
std::string PackTokenizerFiles(const std::vector<std::pair<std::string, std::string>>& files);
Result<std::vector<std::pair<std::string, std::string>>> UnpackTokenizerFiles(
    std::string_view bytes, const std::string& source);

}  // namespace slm::llm
