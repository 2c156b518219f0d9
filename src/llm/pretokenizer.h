// The text-processing steps of a Hugging Face tokenizer pipeline that run before the BPE model:
// normalizers (NFC, Prepend, Replace, ...) and pre-tokenizers (ByteLevel, Split, Metaspace,
// Digits, Punctuation, ...), parsed from tokenizer.json and applied exactly as the `tokenizers`
// library applies them, plus the GPT-2 byte <-> unicode alphabet.
//
// Regexes run through PCRE2 in UTF + UCP mode (Unicode properties for \p{L}, \s, \w), JIT
// compiled when the platform supports it. Input text must be valid UTF-8 (checked once by the
// tokenizer before any step runs).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace slm::llm {

// A compiled PCRE2 pattern. Thread-safe: each match call uses its own match data.
class Regex {
 public:
  // `where` (file and field) is named in the error when the pattern does not compile.
  static Result<std::shared_ptr<const Regex>> Compile(std::string_view pattern,
                                                      const std::string& where);
  // A literal string (tokenizer.json's {"String": ...} patterns).
  static Result<std::shared_ptr<const Regex>> Literal(std::string_view text,
                                                      const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Byte ranges [begin, end) of the non-overlapping, non-empty matches in `text`, left to right.
  // `text` must be valid UTF-8.
  std::vector<std::pair<size_t, size_t>> FindAll(std::string_view text) const;

 private:
  Regex() = default;
  void* code_ = nullptr;  // pcre2_code_8*
};

// One piece of text moving through the pipeline. `at_input_start`: the piece begins at offset 0
// of the original input (Metaspace's prepend_scheme "first" prepends only there).
struct TextPiece {
  std::string text;
  bool at_input_start = false;
};

// tokenizers' SplitDelimiterBehavior.
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Splits `text` around `matches` (sorted, non-overlapping byte ranges) as tokenizers'
// NormalizedString::split does; empty pieces are dropped. `invert` swaps matches and gaps.
std::vector<std::string_view> SplitAround(std::string_view text,
                                          const std::vector<std::pair<size_t, size_t>>& matches,
                                          SplitBehavior behavior, bool invert);

// A normalizer: rewrites one piece of text.
class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual Status Apply(std::string* text) const = 0;
};

// A pre-tokenizer: splits pieces into smaller pieces (and may rewrite them).
class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void Apply(std::vector<TextPiece>* pieces) const = 0;
};

// Parses tokenizer.json's "normalizer" / "pre_tokenizer" object (null → nullptr). Unknown or
// unsupported types are kUnsupported naming the type, the field and `source`.
Result<std::unique_ptr<Normalizer>> ParseNormalizer(const nlohmann::json& j,
                                                    const std::string& source,
                                                    const std::string& field = "normalizer");
Result<std::unique_ptr<PreTokenizer>> ParsePreTokenizer(const nlohmann::json& j,
                                                        const std::string& source,
                                                        const std::string& field = "pre_tokenizer");

// Unicode normalization forms through ICU.
enum class UnicodeForm { kNFC, kNFD, kNFKC, kNFKD };
Result<std::unique_ptr<Normalizer>> MakeUnicodeNormalizer(UnicodeForm form);
// A pre-tokenizer splitting with `pattern` (Isolated), for tokenizers that do not store theirs
// (vocab.json + merges.txt, tiktoken). `byte_level` maps pieces to the GPT-2 byte alphabet.
Result<std::unique_ptr<PreTokenizer>> MakeRegexByteLevelPreTokenizer(std::string_view pattern,
                                                                     bool add_prefix_space,
                                                                     const std::string& where);

// Pre-tokenizer regexes of the major byte-level BPE families.
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// GPT-2's reversible byte → printable-unicode-character mapping used by byte-level BPE.
class ByteAlphabet {
 public:
  static const ByteAlphabet& Get();
  // UTF-8 encoding of the character that stands for `byte`.
  std::string_view Encode(uint8_t byte) const { return encoded_[byte]; }
  // Maps every byte of `bytes` to its character.
  std::string EncodeBytes(std::string_view bytes) const;
  // Maps each character back to its byte. False (out untouched) when a character is not in the
  // alphabet or `text` is not valid UTF-8.
  bool DecodeToBytes(std::string_view text, std::string* out) const;

 private:
  ByteAlphabet();
  std::array<std::string, 256> encoded_;
  std::array<int16_t, 324> byte_of_codepoint_;  // codepoints used are < 324; -1 = unused
};

// UTF-8 helpers.
bool IsValidUtf8(std::string_view text);
// Length of the UTF-8 sequence starting with lead byte `c` (1 for invalid leads).
inline size_t Utf8CharLen(unsigned char c) {
  return c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
}
// Decodes the character at text[pos] (valid UTF-8 assumed).
char32_t DecodeUtf8At(std::string_view text, size_t pos, size_t* len);
bool IsUnicodeWhitespace(char32_t c);
bool IsUnicodeAlnum(char32_t c);

}  // namespace slm::llm
