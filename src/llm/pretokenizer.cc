#include "llm/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>

#include "io/json_util.h"

namespace slm::llm {
namespace {

using nlohmann::json;

std::string Describe(const json& j) { return io::DescribeJson(j); }

// A field that must be a string; errors name source and field.
Result<std::string> StringField(const json& obj, const char* key, const std::string& source,
                                const std::string& field) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) {
    return ParseError(source + ": " + field + "." + key + " is " +
                      (it == obj.end() ? std::string("missing") : Describe(*it)) +
                      ", expected a string");
  }
  return it->get<std::string>();
}

// tokenizer.json pattern: {"String": "..."} (a literal) or {"Regex": "..."}.
Result<std::shared_ptr<const Regex>> ParsePattern(const json& obj, const std::string& source,
                                                  const std::string& field) {
  auto it = obj.find("pattern");
  if (it == obj.end() || !it->is_object()) {
    return ParseError(source + ": " + field + ".pattern is " +
                      (it == obj.end() ? std::string("missing") : Describe(*it)) +
                      ", expected {\"String\": ...} or {\"Regex\": ...}");
  }
  if (auto s = it->find("String"); s != it->end() && s->is_string()) {
    return Regex::Literal(s->get<std::string>(), source + ": " + field + ".pattern.String");
  }
  if (auto r = it->find("Regex"); r != it->end() && r->is_string()) {
    return Regex::Compile(r->get<std::string>(), source + ": " + field + ".pattern.Regex");
  }
  return ParseError(source + ": " + field + ".pattern is " + Describe(*it) +
                    ", expected {\"String\": ...} or {\"Regex\": ...}");
}

Result<SplitBehavior> ParseBehavior(const json& obj, const std::string& source,
                                    const std::string& field, SplitBehavior fallback) {
  auto it = obj.find("behavior");
  if (it == obj.end() || it->is_null()) return fallback;
  const std::string b = it->is_string() ? it->get<std::string>() : "";
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  return ParseError(source + ": " + field + ".behavior is " + Describe(*it) +
                    ", expected one of Removed, Isolated, MergedWithPrevious, MergedWithNext, "
                    "Contiguous");
}

// Replaces every match of `regex` in *text by `content`.
Status ReplaceAll(const Regex& regex, const std::string& content, std::string* text) {
  const auto matches = regex.FindAll(*text);
  if (matches.empty()) return Status::Ok();
  std::string out;
  out.reserve(text->size());
  size_t prev = 0;
  for (const auto& [b, e] : matches) {
    out.append(*text, prev, b - prev);
    out += content;
    prev = e;
  }
  out.append(*text, prev, std::string::npos);
  *text = std::move(out);
  return Status::Ok();
}

// Splits every piece around the matches of `regex`.
void SplitPieces(const Regex& regex, SplitBehavior behavior, bool invert,
                 std::vector<TextPiece>* pieces) {
  std::vector<TextPiece> out;
  out.reserve(pieces->size());
  for (const TextPiece& p : *pieces) {
    const auto matches = regex.FindAll(p.text);
    for (std::string_view s : SplitAround(p.text, matches, behavior, invert)) {
      out.push_back({std::string(s), p.at_input_start && s.data() == p.text.data()});
    }
  }
  *pieces = std::move(out);
}

// ---------------------------------------------------------------- normalizers

class SequenceNormalizer final : public Normalizer {
 public:
  std::vector<std::unique_ptr<Normalizer>> steps;
  Status Apply(std::string* text) const override {
    for (const auto& s : steps) SLM_RETURN_IF_ERROR(s->Apply(text));
    return Status::Ok();
  }
};

class PrependNormalizer final : public Normalizer {
 public:
  std::string prepend;
  Status Apply(std::string* text) const override {
    if (!text->empty()) text->insert(0, prepend);
    return Status::Ok();
  }
};

class ReplaceNormalizer final : public Normalizer {
 public:
  std::shared_ptr<const Regex> pattern;
  std::string content;
  Status Apply(std::string* text) const override { return ReplaceAll(*pattern, content, text); }
};

class UnicodeNormalizer final : public Normalizer {
 public:
  const icu::Normalizer2* norm = nullptr;
  Status Apply(std::string* text) const override {
    if (std::all_of(text->begin(), text->end(), [](char c) { return (c & 0x80) == 0; })) {
      return Status::Ok();  // ASCII is invariant under every normalization form
    }
    UErrorCode err = U_ZERO_ERROR;
    const icu::UnicodeString in = icu::UnicodeString::fromUTF8(*text);
    if (norm->isNormalized(in, err) && U_SUCCESS(err)) return Status::Ok();
    err = U_ZERO_ERROR;
    const icu::UnicodeString out = norm->normalize(in, err);
    if (U_FAILURE(err)) return Internal(std::string("ICU normalization failed: ") + u_errorName(err));
    text->clear();
    out.toUTF8String(*text);
    return Status::Ok();
  }
};

class LowercaseNormalizer final : public Normalizer {
 public:
  Status Apply(std::string* text) const override {
    icu::UnicodeString s = icu::UnicodeString::fromUTF8(*text);
    s.toLower(icu::Locale::getRoot());
    text->clear();
    s.toUTF8String(*text);
    return Status::Ok();
  }
};

class StripNormalizer final : public Normalizer {
 public:
  bool left = true, right = true;
  Status Apply(std::string* text) const override {
    size_t begin = 0, end = text->size();
    if (left) {
      while (begin < end) {
        size_t len;
        if (!IsUnicodeWhitespace(DecodeUtf8At(*text, begin, &len))) break;
        begin += len;
      }
    }
    if (right) {
      while (end > begin) {
        size_t start = end - 1;
        while (start > begin && ((*text)[start] & 0xC0) == 0x80) --start;
        size_t len;
        if (!IsUnicodeWhitespace(DecodeUtf8At(*text, start, &len))) break;
        end = start;
      }
    }
    *text = text->substr(begin, end - begin);
    return Status::Ok();
  }
};

// ---------------------------------------------------------------- pre-tokenizers

class SequencePreTokenizer final : public PreTokenizer {
 public:
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  void Apply(std::vector<TextPiece>* pieces) const override {
    for (const auto& s : steps) s->Apply(pieces);
  }
};

class SplitPreTokenizer final : public PreTokenizer {
 public:
  std::shared_ptr<const Regex> regex;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  void Apply(std::vector<TextPiece>* pieces) const override {
    SplitPieces(*regex, behavior, invert, pieces);
  }
};

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  bool add_prefix_space = false;
  std::shared_ptr<const Regex> regex;  // null when use_regex is false
  void Apply(std::vector<TextPiece>* pieces) const override {
    if (add_prefix_space) {
      for (TextPiece& p : *pieces) {
        if (!p.text.starts_with(' ')) p.text.insert(0, " ");
      }
    }
    if (regex) SplitPieces(*regex, SplitBehavior::kIsolated, false, pieces);
    const ByteAlphabet& alphabet = ByteAlphabet::Get();
    for (TextPiece& p : *pieces) p.text = alphabet.EncodeBytes(p.text);
  }
};

class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  enum class Prepend { kAlways, kFirst, kNever };
  std::string replacement = "\xE2\x96\x81";
  Prepend prepend = Prepend::kAlways;
  std::shared_ptr<const Regex> split;  // the replacement, when "split" is true
  void Apply(std::vector<TextPiece>* pieces) const override {
    for (TextPiece& p : *pieces) {
      std::string out;
      for (char c : p.text) {
        if (c == ' ') out += replacement; else out += c;
      }
      const bool want = prepend == Prepend::kAlways || (prepend == Prepend::kFirst && p.at_input_start);
      if (want && !out.starts_with(replacement)) out.insert(0, replacement);
      p.text = std::move(out);
    }
    if (split) SplitPieces(*split, SplitBehavior::kMergedWithNext, false, pieces);
  }
};

// ---------------------------------------------------------------- parsing

Result<std::unique_ptr<Normalizer>> ParseNormalizerImpl(const json& j, const std::string& source,
                                                        const std::string& field) {
  if (!j.is_object()) {
    return ParseError(source + ": " + field + " is " + Describe(j) + ", expected an object or null");
  }
  SLM_ASSIGN_OR_RETURN(std::string type, StringField(j, "type", source, field));
  if (type == "Sequence") {
    auto seq = std::make_unique<SequenceNormalizer>();
    auto it = j.find("normalizers");
    if (it == j.end() || !it->is_array()) {
      return ParseError(source + ": " + field + ".normalizers is missing or not a list");
    }
    for (size_t i = 0; i < it->size(); ++i) {
      SLM_ASSIGN_OR_RETURN(auto step, ParseNormalizerImpl((*it)[i], source,
                                                          field + ".normalizers[" + std::to_string(i) + "]"));
      seq->steps.push_back(std::move(step));
    }
    return std::unique_ptr<Normalizer>(std::move(seq));
  }
  if (type == "Prepend") {
    auto n = std::make_unique<PrependNormalizer>();
    SLM_ASSIGN_OR_RETURN(n->prepend, StringField(j, "prepend", source, field));
    return std::unique_ptr<Normalizer>(std::move(n));
  }
  if (type == "Replace") {
    auto n = std::make_unique<ReplaceNormalizer>();
    SLM_ASSIGN_OR_RETURN(n->pattern, ParsePattern(j, source, field));
    SLM_ASSIGN_OR_RETURN(n->content, StringField(j, "content", source, field));
    return std::unique_ptr<Normalizer>(std::move(n));
  }
  if (type == "NFC") return MakeUnicodeNormalizer(UnicodeForm::kNFC);
  if (type == "NFD") return MakeUnicodeNormalizer(UnicodeForm::kNFD);
  if (type == "NFKC") return MakeUnicodeNormalizer(UnicodeForm::kNFKC);
  if (type == "NFKD") return MakeUnicodeNormalizer(UnicodeForm::kNFKD);
  if (type == "Lowercase") return std::unique_ptr<Normalizer>(new LowercaseNormalizer());
  if (type == "Strip") {
    auto n = std::make_unique<StripNormalizer>();
    n->left = io::BoolFieldOr(j, "strip_left", true);
    n->right = io::BoolFieldOr(j, "strip_right", true);
    return std::unique_ptr<Normalizer>(std::move(n));
  }
  return Unsupported(source + ": " + field + " type '" + type +
                     "' is not supported (supported: Sequence, Prepend, Replace, NFC, NFD, NFKC, "
                     "NFKD, Lowercase, Strip)");
}

Result<std::unique_ptr<PreTokenizer>> ParsePreTokenizerImpl(const json& j, const std::string& source,
                                                            const std::string& field) {
  if (!j.is_object()) {
    return ParseError(source + ": " + field + " is " + Describe(j) + ", expected an object or null");
  }
  SLM_ASSIGN_OR_RETURN(std::string type, StringField(j, "type", source, field));
  const std::string where = source + ": " + field;
  if (type == "Sequence") {
    auto seq = std::make_unique<SequencePreTokenizer>();
    auto it = j.find("pretokenizers");
    if (it == j.end() || !it->is_array()) {
      return ParseError(where + ".pretokenizers is missing or not a list");
    }
    for (size_t i = 0; i < it->size(); ++i) {
      SLM_ASSIGN_OR_RETURN(auto step, ParsePreTokenizerImpl((*it)[i], source,
                                                            field + ".pretokenizers[" + std::to_string(i) + "]"));
      seq->steps.push_back(std::move(step));
    }
    return std::unique_ptr<PreTokenizer>(std::move(seq));
  }
  if (type == "Split") {
    auto p = std::make_unique<SplitPreTokenizer>();
    SLM_ASSIGN_OR_RETURN(p->regex, ParsePattern(j, source, field));
    SLM_ASSIGN_OR_RETURN(p->behavior, ParseBehavior(j, source, field, SplitBehavior::kIsolated));
    p->invert = io::BoolFieldOr(j, "invert", false);
    return std::unique_ptr<PreTokenizer>(std::move(p));
  }
  if (type == "ByteLevel") {
    auto p = std::make_unique<ByteLevelPreTokenizer>();
    p->add_prefix_space = io::BoolFieldOr(j, "add_prefix_space", true);
    if (io::BoolFieldOr(j, "use_regex", true)) {
      SLM_ASSIGN_OR_RETURN(p->regex, Regex::Compile(kGpt2Pattern, where + " (GPT-2 regex)"));
    }
    return std::unique_ptr<PreTokenizer>(std::move(p));
  }
  if (type == "Metaspace") {
    auto p = std::make_unique<MetaspacePreTokenizer>();
    if (auto it = j.find("replacement"); it != j.end() && it->is_string()) {
      p->replacement = it->get<std::string>();
    }
    if (auto it = j.find("prepend_scheme"); it != j.end() && it->is_string()) {
      const std::string s = it->get<std::string>();
      if (s == "always") p->prepend = MetaspacePreTokenizer::Prepend::kAlways;
      else if (s == "first") p->prepend = MetaspacePreTokenizer::Prepend::kFirst;
      else if (s == "never") p->prepend = MetaspacePreTokenizer::Prepend::kNever;
      else return ParseError(where + ".prepend_scheme is '" + s + "', expected always, first or never");
    } else {
      p->prepend = io::BoolFieldOr(j, "add_prefix_space", true) ? MetaspacePreTokenizer::Prepend::kAlways
                                                       : MetaspacePreTokenizer::Prepend::kNever;
    }
    if (io::BoolFieldOr(j, "split", true)) {
      SLM_ASSIGN_OR_RETURN(p->split, Regex::Literal(p->replacement, where + ".replacement"));
    }
    return std::unique_ptr<PreTokenizer>(std::move(p));
  }
  if (type == "Digits") {
    auto p = std::make_unique<SplitPreTokenizer>();
    SLM_ASSIGN_OR_RETURN(p->regex, Regex::Compile(R"(\p{N})", where));
    p->behavior = io::BoolFieldOr(j, "individual_digits", false) ? SplitBehavior::kIsolated
                                                        : SplitBehavior::kContiguous;
    return std::unique_ptr<PreTokenizer>(std::move(p));
  }
  if (type == "Punctuation") {
    // tokenizers: char::is_ascii_punctuation() || Unicode general category P*.
    auto p = std::make_unique<SplitPreTokenizer>();
    SLM_ASSIGN_OR_RETURN(p->regex, Regex::Compile(R"([\p{P}!-/:-@\[-`{-~])", where));
    SLM_ASSIGN_OR_RETURN(p->behavior, ParseBehavior(j, source, field, SplitBehavior::kIsolated));
    return std::unique_ptr<PreTokenizer>(std::move(p));
  }
  if (type == "Whitespace") {
    auto p = std::make_unique<SplitPreTokenizer>();
    SLM_ASSIGN_OR_RETURN(p->regex, Regex::Compile(R"(\w+|[^\w\s]+)", where));
    p->behavior = SplitBehavior::kRemoved;
    p->invert = true;
    return std::unique_ptr<PreTokenizer>(std::move(p));
  }
  if (type == "WhitespaceSplit") {
    auto p = std::make_unique<SplitPreTokenizer>();
    SLM_ASSIGN_OR_RETURN(p->regex, Regex::Compile(R"(\s)", where));
    p->behavior = SplitBehavior::kRemoved;
    return std::unique_ptr<PreTokenizer>(std::move(p));
  }
  return Unsupported(source + ": " + field + " type '" + type +
                     "' is not supported (supported: Sequence, Split, ByteLevel, Metaspace, Digits, "
                     "Punctuation, Whitespace, WhitespaceSplit)");
}

}  // namespace

// ---------------------------------------------------------------- Regex

Result<std::shared_ptr<const Regex>> Regex::Compile(std::string_view pattern,
                                                    const std::string& where) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return Unsupported(where + ": regex '" + std::string(pattern) + "' does not compile with PCRE2 at offset " +
                       std::to_string(offset) + ": " + reinterpret_cast<const char*>(message));
  }
  // JIT is an optimization only: when unavailable pcre2_match interprets the pattern.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  std::shared_ptr<Regex> regex(new Regex());
  regex->code_ = code;
  return std::shared_ptr<const Regex>(std::move(regex));
}

Result<std::shared_ptr<const Regex>> Regex::Literal(std::string_view text, const std::string& where) {
  std::string quoted;
  for (char c : text) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) quoted += '\\';
    quoted += c;
  }
  return Compile(quoted, where);
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

std::vector<std::pair<size_t, size_t>> Regex::FindAll(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos <= text.size()) {
    // The subject was validated once; re-checking per call would make this quadratic.
    int rc = pcre2_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      rc = pcre2_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, nullptr);
    }
    if (rc < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t b = ov[0], e = ov[1];
    if (e <= b) {
      pos = b + (b < text.size() ? Utf8CharLen(static_cast<unsigned char>(text[b])) : 1);
      continue;
    }
    out.emplace_back(b, e);
    pos = e;
  }
  pcre2_match_data_free(md);
  return out;
}

std::vector<std::string_view> SplitAround(std::string_view text,
                                          const std::vector<std::pair<size_t, size_t>>& matches,
                                          SplitBehavior behavior, bool invert) {
  struct Seg { size_t b, e; bool match; };
  std::vector<Seg> segs;
  size_t prev = 0;
  for (const auto& [b, e] : matches) {
    if (b > prev) segs.push_back({prev, b, false});
    segs.push_back({b, e, true});
    prev = e;
  }
  if (prev < text.size()) segs.push_back({prev, text.size(), false});
  if (invert) for (Seg& s : segs) s.match = !s.match;

  std::vector<std::pair<size_t, size_t>> out;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const Seg& s : segs) if (!s.match) out.emplace_back(s.b, s.e);
      break;
    case SplitBehavior::kIsolated:
      for (const Seg& s : segs) out.emplace_back(s.b, s.e);
      break;
    case SplitBehavior::kMergedWithPrevious: {
      bool prev_match = false;
      for (const Seg& s : segs) {
        if (s.match && !prev_match && !out.empty()) out.back().second = s.e;
        else out.emplace_back(s.b, s.e);
        prev_match = s.match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool prev_match = false;
      for (auto it = segs.rbegin(); it != segs.rend(); ++it) {
        if (it->match && !prev_match && !out.empty()) out.back().first = it->b;
        else out.emplace_back(it->b, it->e);
        prev_match = it->match;
      }
      std::reverse(out.begin(), out.end());
      break;
    }
    case SplitBehavior::kContiguous: {
      bool prev_match = false;
      for (const Seg& s : segs) {
        if (s.match == prev_match && !out.empty()) out.back().second = s.e;
        else out.emplace_back(s.b, s.e);
        prev_match = s.match;
      }
      break;
    }
  }
  std::vector<std::string_view> pieces;
  pieces.reserve(out.size());
  for (const auto& [b, e] : out) {
    if (e > b) pieces.push_back(text.substr(b, e - b));
  }
  return pieces;
}

Result<std::unique_ptr<Normalizer>> ParseNormalizer(const json& j, const std::string& source,
                                                    const std::string& field) {
  if (j.is_null()) return std::unique_ptr<Normalizer>();
  return ParseNormalizerImpl(j, source, field);
}

Result<std::unique_ptr<PreTokenizer>> ParsePreTokenizer(const json& j, const std::string& source,
                                                        const std::string& field) {
  if (j.is_null()) return std::unique_ptr<PreTokenizer>();
  return ParsePreTokenizerImpl(j, source, field);
}

Result<std::unique_ptr<Normalizer>> MakeUnicodeNormalizer(UnicodeForm form) {
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  switch (form) {
    case UnicodeForm::kNFC: n = icu::Normalizer2::getNFCInstance(err); break;
    case UnicodeForm::kNFD: n = icu::Normalizer2::getNFDInstance(err); break;
    case UnicodeForm::kNFKC: n = icu::Normalizer2::getNFKCInstance(err); break;
    case UnicodeForm::kNFKD: n = icu::Normalizer2::getNFKDInstance(err); break;
  }
  if (U_FAILURE(err) || n == nullptr) {
    return Internal(std::string("ICU normalizer unavailable: ") + u_errorName(err));
  }
  auto u = std::make_unique<UnicodeNormalizer>();
  u->norm = n;
  return std::unique_ptr<Normalizer>(std::move(u));
}

Result<std::unique_ptr<PreTokenizer>> MakeRegexByteLevelPreTokenizer(std::string_view pattern,
                                                                     bool add_prefix_space,
                                                                     const std::string& where) {
  auto p = std::make_unique<ByteLevelPreTokenizer>();
  p->add_prefix_space = add_prefix_space;
  SLM_ASSIGN_OR_RETURN(p->regex, Regex::Compile(pattern, where));
  return std::unique_ptr<PreTokenizer>(std::move(p));
}

// ---------------------------------------------------------------- ByteAlphabet

const ByteAlphabet& ByteAlphabet::Get() {
  static const ByteAlphabet* alphabet = new ByteAlphabet();
  return *alphabet;
}

ByteAlphabet::ByteAlphabet() {
  byte_of_codepoint_.fill(-1);
  // GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves; the others are
  // numbered from U+0100 in byte order.
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    const int cp = printable ? b : next++;
    byte_of_codepoint_[cp] = static_cast<int16_t>(b);
    std::string& s = encoded_[b];
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
}

std::string ByteAlphabet::EncodeBytes(std::string_view bytes) const {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += encoded_[static_cast<uint8_t>(c)];
  return out;
}

bool ByteAlphabet::DecodeToBytes(std::string_view text, std::string* out) const {
  std::string bytes;
  bytes.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[pos]);
    uint32_t cp;
    if (c < 0x80) {
      cp = c;
      pos += 1;
    } else if ((c >> 5) == 0x6 && pos + 1 < text.size()) {
      cp = ((c & 0x1Fu) << 6) | (static_cast<unsigned char>(text[pos + 1]) & 0x3Fu);
      pos += 2;
    } else {
      return false;
    }
    if (cp >= byte_of_codepoint_.size() || byte_of_codepoint_[cp] < 0) return false;
    bytes.push_back(static_cast<char>(byte_of_codepoint_[cp]));
  }
  *out += bytes;
  return true;
}

// ---------------------------------------------------------------- UTF-8

bool IsValidUtf8(std::string_view text) {
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) { ++i; continue; }
    size_t len;
    uint32_t cp, min;
    if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; min = 0x800; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; min = 0x10000; }
    else return false;
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      const unsigned char cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

char32_t DecodeUtf8At(std::string_view text, size_t pos, size_t* len) {
  const unsigned char c = static_cast<unsigned char>(text[pos]);
  size_t n = Utf8CharLen(c);
  if (pos + n > text.size()) n = 1;
  *len = n;
  if (n == 1) return c;
  char32_t cp = c & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[pos + k]) & 0x3F);
  return cp;
}

bool IsUnicodeWhitespace(char32_t c) { return u_isUWhiteSpace(static_cast<UChar32>(c)); }

bool IsUnicodeAlnum(char32_t c) {
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_ALPHABETIC) ||
         (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_N_MASK) != 0;
}

}  // namespace slm::llm
