// BpeTokenizer: a Hugging Face `tokenizers`-compatible BPE pipeline —
//   added/special tokens split out → normalizer → pre-tokenizer → BPE model → ids
// and its decoder (ByteLevel, Metaspace, Replace/ByteFallback/Fuse/Strip).
//
// One class serves every BPE format: tokenizer.json (hf_tokenizer_json.h), vocab.json +
// merges.txt and tiktoken files (tiktoken_tokenizer.h) build a BpeTokenizerConfig and call
// Create. Encode(text) gives the ids of HF's `encode(text, add_special_tokens=False)`.
//
// BPE: the word is split into characters (each looked up in the vocabulary; byte_fallback →
// <0xXX> pieces, else unk, fused when fuse_unk), then the adjacent pair with the lowest merge
// rank is merged (leftmost first on ties) until none applies, with a priority queue over a
// linked list of symbols. Tiktoken's rule (rank of a pair = rank of the concatenated token) is
// the same algorithm with a different rank lookup. Results are cached per pre-token word.
//
// Decoding: each id has a precomputed surface (its bytes after the decoder chain). Special
// added tokens decode to nothing. Decoders that strip a leading space (Strip after Fuse,
// Metaspace with a prefix) strip it from the first non-special token, both in Decode and in
// DecodeToken (where "first" = prev_id is kNoPreviousToken, out of range or special).
// Invalid UTF-8 in Decode: ByteLevel decoders → one U+FFFD per maximal ill-formed subpart
// (from_utf8_lossy, as tokenizers does); ByteFallback decoders → one U+FFFD per byte.
// Not modelled: tokenizers replaces a whole byte-fallback run by U+FFFD per byte when any of it
// is invalid (we keep its valid characters); Strip's trailing `stop` applies in Decode only.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "llm/pretokenizer.h"
#include "llm/tokenizer.h"
#include "llm/utf8_stream.h"

namespace slm::llm {

// An entry of tokenizer.json's "added_tokens" (or tokenizer_config.json's
// "added_tokens_decoder"): split out of the text before the model runs.
struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;     // skipped when decoding
  bool lstrip = false;      // also absorbs the whitespace before it
  bool rstrip = false;      // also absorbs the whitespace after it
  bool normalized = false;  // matched in the normalized text (else in the raw text)
  bool single_word = false; // only matches when not inside a word
};

struct BpeModelConfig {
  // Vocabulary: token string (in the model's alphabet, e.g. byte-level "Ġthe") and id.
  std::vector<std::pair<std::string, int32_t>> vocab;
  // Merges in rank order (rank = index). Ignored when merge_by_concatenated_rank.
  std::vector<std::pair<std::string, std::string>> merges;
  // tiktoken: a pair merges when its concatenation is a token; its rank is that token's id.
  bool merge_by_concatenated_rank = false;
  bool byte_fallback = false;
  bool fuse_unk = false;
  bool ignore_merges = false;  // a word that is itself a token is emitted whole
  std::optional<std::string> unk_token;
};

struct DecoderConfig {
  bool byte_level = false;   // ByteLevel: characters → bytes of GPT-2's alphabet
  bool byte_fallback = false;  // "<0xAB>" → byte 0xAB
  std::vector<std::pair<std::string, std::string>> replacements;  // Replace (string → string), in order
  std::string strip_content = " ";
  size_t strip_start = 0;    // characters stripped from the start of the text
  size_t strip_stop = 0;     // ... from its end (Decode only)
  bool strip_per_token = false;  // Strip ran before Fuse: it applies to every token
};

struct BpeTokenizerConfig {
  std::string source;  // named in errors
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  BpeModelConfig model;
  std::vector<AddedToken> added_tokens;
  DecoderConfig decoder;
  std::optional<int32_t> bos_id;
  std::optional<int32_t> eos_id;
};

class BpeTokenizer final : public Tokenizer {
 public:
  // Validates the configuration: merges name vocabulary tokens, the unk token exists, ids are
  // non-negative; ParseError naming `config.source` and the entry otherwise.
  static Result<std::unique_ptr<BpeTokenizer>> Create(BpeTokenizerConfig config);

  // InvalidArgument when `text` is not valid UTF-8 (HF tokenizers take `str` only); Internal
  // when a character has no token and the model has neither byte_fallback nor unk.
  Result<std::vector<int32_t>> Encode(std::string_view text) const override;
  std::string DecodeToken(int32_t prev_id, int32_t id) const override;
  std::string Decode(std::span<const int32_t> ids) const override;
  std::string IdToPiece(int32_t id) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(pieces_.size()); }
  std::optional<int32_t> bos_id() const override { return bos_id_; }
  std::optional<int32_t> eos_id() const override { return eos_id_; }

  // Token string → id (vocabulary and added tokens), for resolving "<s>"-style names.
  std::optional<int32_t> TokenToId(std::string_view token) const;
  bool IsSpecial(int32_t id) const {
    return id >= 0 && id < vocab_size() && is_special_[static_cast<size_t>(id)];
  }
  const std::string& source() const { return source_; }
  // The loaders resolve bos/eos from side files (tokenizer_config.json) after Create.
  void set_special_ids(std::optional<int32_t> bos, std::optional<int32_t> eos) {
    bos_id_ = bos;
    eos_id_ = eos;
  }

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using Vocab = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  // A split of the input: an added token (id >= 0) or text to tokenize.
  struct Segment {
    int32_t id = -1;
    std::string text;
    bool at_input_start = false;
  };

  // What the added-token splitter looks for: the content (normalized for normalized tokens,
  // as tokenizers does) and the token; longest first, so the first hit is leftmost-longest.
  struct AddedPattern {
    std::string content;
    const AddedToken* token;
  };

  BpeTokenizer() = default;
  std::optional<Merge> FindMerge(int32_t left, int32_t right) const;
  Status TokenizeWord(std::string_view word, std::vector<int32_t>* out) const;
  Status MergeWord(std::string_view word, std::vector<int32_t>* out) const;
  void SplitAddedTokens(const std::vector<AddedPattern>& patterns, std::string_view text,
                        bool at_input_start, std::vector<Segment>* out) const;
  std::string_view Surface(int32_t prev_id, int32_t id) const;

  std::string source_;
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  Vocab vocab_;                   // model vocabulary
  Vocab added_by_content_;        // added tokens
  std::unordered_map<uint64_t, Merge> merges_;
  bool concat_rank_ = false;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  std::optional<int32_t> unk_id_;
  // No pre-tokenizer (SentencePiece-style): when no token has a "▁" right after another
  // character, no merge can cross the start of a "▁" run, so the text is tokenized in chunks
  // split there — exact, and it lets the word cache work on long texts.
  bool split_at_metaspace_ = false;
  std::array<int32_t, 256> byte_ids_{};  // <0xAB> token ids, -1 when absent
  std::vector<AddedToken> added_;
  std::vector<AddedPattern> raw_patterns_;         // matched in the raw text
  std::vector<AddedPattern> normalized_patterns_;  // matched in the normalized text

  std::vector<std::string> pieces_;    // [vocab_size] token strings ("" for holes)
  std::vector<std::string> surfaces_;  // [vocab_size] decoded bytes of each token
  std::vector<uint8_t> is_special_;    // [vocab_size]
  DecoderConfig decoder_;
  Utf8StreamDecoder::Replacement replacement_ = Utf8StreamDecoder::Replacement::kMaximalSubpart;
  std::optional<int32_t> bos_id_, eos_id_;

  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace slm::llm
