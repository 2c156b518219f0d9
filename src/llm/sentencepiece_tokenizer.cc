#include "llm/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <charconv>
#include <type_traits>
#include <utility>

#include "core/mapped_file.h"
#include "llm/utf8_stream.h"

namespace slm::llm {
namespace {

// SentencePiece's ids are `int`; sharing the type lets Encode hand its vector over uncopied.
static_assert(std::is_same_v<int, int32_t>);

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // U+2581 "▁", SentencePiece's space

// SentencePiece's default surface for <unk> is " ⁇ " (U+2047). Some builds (Debian's 0.1.97
// among them) return the octal escapes as literal text instead; we decode such a surface to the
// intended one, as the Python wheels used by HF do.
constexpr std::string_view kDefaultUnkSurface = " \xE2\x81\x87 ";
constexpr std::string_view kBrokenDefaultUnkSurface = " \\342\\201\\207 ";

// "<0xAB>" → 0xAB. SentencePiece guarantees this spelling for byte pieces.
std::optional<char> ParseSentencePieceByte(std::string_view piece) {
  if (piece.size() != 6 || !piece.starts_with("<0x") || piece.back() != '>') return std::nullopt;
  unsigned value = 0;
  const char* begin = piece.data() + 3;
  const auto [end, ec] = std::from_chars(begin, begin + 2, value, 16);
  if (ec != std::errc() || end != begin + 2) return std::nullopt;
  return static_cast<char>(value);
}

std::string ReplaceSpaceSymbols(std::string_view piece) {
  std::string out;
  out.reserve(piece.size());
  size_t pos = 0;
  while (pos < piece.size()) {
    if (piece.substr(pos, kSpaceSymbol.size()) == kSpaceSymbol) {
      out += ' ';
      pos += kSpaceSymbol.size();
    } else {
      out += piece[pos++];
    }
  }
  return out;
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(
    std::unique_ptr<sentencepiece::SentencePieceProcessor> processor, std::string source_name)
    : processor_(std::move(processor)), source_name_(std::move(source_name)) {}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

Result<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::FromBytes(
    std::string serialized_model_proto, const std::string& source_name) {
  auto processor = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto status = processor->LoadFromSerializedProto(serialized_model_proto);
  if (!status.ok()) {
    return ParseError("SentencePiece model '" + source_name + "' (" +
                      std::to_string(serialized_model_proto.size()) +
                      " bytes) does not load: " + status.ToString());
  }
  if (processor->GetPieceSize() <= 0) {
    return ParseError("SentencePiece model '" + source_name + "' has an empty vocabulary");
  }
  std::unique_ptr<SentencePieceTokenizer> tokenizer(
      new SentencePieceTokenizer(std::move(processor), source_name));
  tokenizer->BuildSurfaces();
  return tokenizer;
}

Result<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::FromFile(
    const std::string& path) {
  SLM_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  return FromBytes(std::move(bytes), path);
}

void SentencePieceTokenizer::BuildSurfaces() {
  const int32_t n = processor_->GetPieceSize();
  surfaces_.resize(static_cast<size_t>(n));
  // Whether the model drops the dummy-prefix space at the start of decoded text depends on its
  // normalizer spec, which the public header does not expose: ask the processor once, on the
  // first ordinary piece that starts with "▁".
  bool drops_leading_space = false;
  bool probed = false;
  for (int32_t id = 0; id < n; ++id) {
    PieceSurface& s = surfaces_[id];
    const std::string& piece = processor_->IdToPiece(id);
    if (processor_->IsControl(id)) {
      s.is_control = true;
    } else if (processor_->IsUnknown(id)) {
      s.text = processor_->DecodeIds({id});  // the model's unk surface
      if (s.text == kBrokenDefaultUnkSurface) s.text = kDefaultUnkSurface;
    } else if (processor_->IsByte(id)) {
      if (auto byte = ParseSentencePieceByte(piece)) s.text.assign(1, *byte);
    } else {
      s.text = ReplaceSpaceSymbols(piece);
      s.strippable_space = piece.starts_with(kSpaceSymbol);
      // Probe with "▁x", not "▁▁..." (Llama-2's id 259): stripping one of two spaces would
      // still leave a leading space and wrongly say the model keeps it.
      if (s.strippable_space && !probed && piece.size() > kSpaceSymbol.size() &&
          !piece.substr(kSpaceSymbol.size()).starts_with(kSpaceSymbol)) {
        probed = true;
        drops_leading_space = !processor_->DecodeIds({id}).starts_with(' ');
      }
    }
  }
  if (!drops_leading_space) {
    for (auto& s : surfaces_) s.strippable_space = false;
  }
}

bool SentencePieceTokenizer::IsSequenceStart(int32_t prev_id) const {
  return prev_id < 0 || prev_id >= vocab_size() || surfaces_[prev_id].is_control;
}

Result<std::vector<int32_t>> SentencePieceTokenizer::Encode(std::string_view text) const {
  std::vector<int> ids;
  const auto status = processor_->Encode(text, &ids);
  if (!status.ok()) {
    return Internal("SentencePiece model '" + source_name_ + "' failed to encode " +
                    std::to_string(text.size()) + " bytes: " + status.ToString());
  }
  return ids;
}

std::string SentencePieceTokenizer::DecodeToken(int32_t prev_id, int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  const PieceSurface& s = surfaces_[id];
  if (s.strippable_space && IsSequenceStart(prev_id)) return s.text.substr(1);
  return s.text;
}

std::string SentencePieceTokenizer::Decode(std::span<const int32_t> ids) const {
  // SentencePiece's own Decode, re-done over the precomputed surfaces so that it shares
  // DecodeToken's tables (and the unk fix): the dummy-prefix space of the first non-control
  // token is dropped, and byte runs that are not valid UTF-8 become one U+FFFD per byte.
  std::string out;
  Utf8StreamDecoder utf8(Utf8StreamDecoder::Replacement::kPerByte);
  bool at_start = true;
  for (const int32_t id : ids) {
    if (id < 0 || id >= vocab_size()) continue;
    const PieceSurface& s = surfaces_[id];
    if (s.is_control) continue;
    std::string_view text = s.text;
    if (at_start && s.strippable_space) text.remove_prefix(1);
    at_start = false;
    utf8.Push(text, &out);
  }
  utf8.Flush(&out);
  return out;
}

std::string SentencePieceTokenizer::IdToPiece(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  return processor_->IdToPiece(id);
}

int32_t SentencePieceTokenizer::vocab_size() const {
  return static_cast<int32_t>(surfaces_.size());
}

std::optional<int32_t> SentencePieceTokenizer::bos_id() const {
  const int id = processor_->bos_id();
  return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
}

std::optional<int32_t> SentencePieceTokenizer::eos_id() const {
  const int id = processor_->eos_id();
  return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
}

}  // namespace slm::llm
