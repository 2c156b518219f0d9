#include "llm/bpe_tokenizer.h"

#include <algorithm>
#include <charconv>
#include <queue>

namespace slm::llm {
namespace {

constexpr std::string_view kMetaspace = "\xE2\x96\x81";  // U+2581

uint64_t PairKey(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

// "<0xAB>" → 0xAB (the spelling of SentencePiece-style byte pieces).
std::optional<uint8_t> ParseBytePiece(std::string_view piece) {
  if (piece.size() != 6 || !piece.starts_with("<0x") || piece.back() != '>') return std::nullopt;
  unsigned value = 0;
  const char* begin = piece.data() + 3;
  const auto [end, ec] = std::from_chars(begin, begin + 2, value, 16);
  if (ec != std::errc() || end != begin + 2) return std::nullopt;
  return static_cast<uint8_t>(value);
}

std::string ReplaceString(std::string_view text, std::string_view from, std::string_view to) {
  if (from.empty()) return std::string(text);
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t hit = text.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(text.substr(pos));
  return out;
}

// Strips up to `count` leading copies of `content` from `text`.
std::string_view StripLeading(std::string_view text, std::string_view content, size_t count) {
  for (size_t i = 0; i < count && !content.empty() && text.starts_with(content); ++i) {
    text.remove_prefix(content.size());
  }
  return text;
}

std::string_view StripTrailing(std::string_view text, std::string_view content, size_t count) {
  for (size_t i = 0; i < count && !content.empty() && text.ends_with(content); ++i) {
    text.remove_suffix(content.size());
  }
  return text;
}

// Last character of `s` (valid UTF-8), or 0 for an empty string.
char32_t LastChar(std::string_view s) {
  if (s.empty()) return 0;
  size_t start = s.size() - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  size_t len;
  return DecodeUtf8At(s, start, &len);
}

}  // namespace

Result<std::unique_ptr<BpeTokenizer>> BpeTokenizer::Create(BpeTokenizerConfig config) {
  std::unique_ptr<BpeTokenizer> t(new BpeTokenizer());
  t->source_ = config.source;
  t->normalizer_ = std::move(config.normalizer);
  t->pre_tokenizer_ = std::move(config.pre_tokenizer);
  const BpeModelConfig& m = config.model;
  t->concat_rank_ = m.merge_by_concatenated_rank;
  t->byte_fallback_ = m.byte_fallback;
  t->fuse_unk_ = m.fuse_unk;
  t->ignore_merges_ = m.ignore_merges;

  int32_t max_id = -1;
  t->vocab_.reserve(m.vocab.size());
  for (const auto& [token, id] : m.vocab) {
    if (id < 0) {
      return ParseError(config.source + ": vocabulary token '" + token + "' has id " +
                        std::to_string(id) + ", expected a non-negative id");
    }
    t->vocab_.emplace(token, id);
    max_id = std::max(max_id, id);
  }
  for (const AddedToken& a : config.added_tokens) {
    if (a.id < 0 || a.content.empty()) {
      return ParseError(config.source + ": added token '" + a.content + "' (id " +
                        std::to_string(a.id) + ") needs a non-negative id and non-empty content");
    }
    max_id = std::max(max_id, a.id);
  }
  if (max_id < 0) return ParseError(config.source + ": the vocabulary is empty");
  const size_t n = static_cast<size_t>(max_id) + 1;
  t->pieces_.assign(n, std::string());
  for (const auto& [token, id] : m.vocab) t->pieces_[static_cast<size_t>(id)] = token;
  t->is_special_.assign(n, 0);

  if (m.unk_token) {
    auto it = t->vocab_.find(*m.unk_token);
    if (it == t->vocab_.end()) {
      return ParseError(config.source + ": model.unk_token '" + *m.unk_token +
                        "' is not in the vocabulary");
    }
    t->unk_id_ = it->second;
  }
  t->byte_ids_.fill(-1);
  if (m.byte_fallback) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      if (auto it = t->vocab_.find(std::string_view(name)); it != t->vocab_.end()) {
        t->byte_ids_[b] = it->second;
      }
    }
  }
  if (!t->concat_rank_) {
    t->merges_.reserve(m.merges.size());
    for (size_t rank = 0; rank < m.merges.size(); ++rank) {
      const auto& [a, b] = m.merges[rank];
      auto ia = t->vocab_.find(a), ib = t->vocab_.find(b), ic = t->vocab_.find(a + b);
      if (ia == t->vocab_.end() || ib == t->vocab_.end() || ic == t->vocab_.end()) {
        return ParseError(config.source + ": merge " + std::to_string(rank) + " ('" + a + "' '" + b +
                          "') names a token that is not in the vocabulary");
      }
      // The first (lowest-rank) occurrence of a pair wins, as in tokenizers.
      t->merges_.try_emplace(PairKey(ia->second, ib->second),
                             Merge{static_cast<int32_t>(rank), ic->second});
    }
  }

  if (!t->pre_tokenizer_ && t->vocab_.count(kMetaspace)) {
    bool crossing = false;
    for (const auto& [token, id] : t->vocab_) {
      for (size_t at = token.find(kMetaspace, 1); at != std::string::npos && !crossing;
           at = token.find(kMetaspace, at + 1)) {
        crossing = !std::string_view(token).substr(0, at).ends_with(kMetaspace);
      }
      if (crossing) break;
    }
    t->split_at_metaspace_ = !crossing;
  }

  // Added tokens. Normalized ones are matched in normalized text, so their content is
  // normalized too (tokenizers' AddedVocabulary does the same).
  t->added_ = std::move(config.added_tokens);
  for (const AddedToken& a : t->added_) {
    t->pieces_[static_cast<size_t>(a.id)] = a.content;
    if (a.special) t->is_special_[static_cast<size_t>(a.id)] = 1;
    t->added_by_content_.emplace(a.content, a.id);
  }
  for (const AddedToken& a : t->added_) {
    if (a.normalized && t->normalizer_) {
      std::string content = a.content;
      SLM_RETURN_IF_ERROR(t->normalizer_->Apply(&content));
      t->normalized_patterns_.push_back({std::move(content), &a});
    } else if (a.normalized) {
      t->normalized_patterns_.push_back({a.content, &a});
    } else {
      t->raw_patterns_.push_back({a.content, &a});
    }
  }
  auto longest_first = [](const AddedPattern& x, const AddedPattern& y) {
    return x.content.size() > y.content.size();
  };
  std::stable_sort(t->raw_patterns_.begin(), t->raw_patterns_.end(), longest_first);
  std::stable_sort(t->normalized_patterns_.begin(), t->normalized_patterns_.end(), longest_first);

  // Decoder surfaces.
  t->decoder_ = config.decoder;
  const DecoderConfig& d = t->decoder_;
  t->replacement_ = d.byte_fallback ? Utf8StreamDecoder::Replacement::kPerByte
                                    : Utf8StreamDecoder::Replacement::kMaximalSubpart;
  const ByteAlphabet& alphabet = ByteAlphabet::Get();
  t->surfaces_.resize(n);
  for (size_t id = 0; id < n; ++id) {
    const std::string& piece = t->pieces_[id];
    std::string& s = t->surfaces_[id];
    if (t->is_special_[id]) continue;
    if (d.byte_fallback) {
      if (auto byte = ParseBytePiece(piece)) {
        s.assign(1, static_cast<char>(*byte));
        continue;
      }
    }
    s = piece;
    for (const auto& [from, to] : d.replacements) s = ReplaceString(s, from, to);
    if (d.byte_level) {
      std::string bytes;
      // A token outside the byte alphabet (e.g. an added token) decodes to its own text.
      if (alphabet.DecodeToBytes(s, &bytes)) s = std::move(bytes);
    }
    if (d.strip_per_token) {
      s = std::string(StripTrailing(StripLeading(s, d.strip_content, d.strip_start),
                                    d.strip_content, d.strip_stop));
    }
  }
  t->bos_id_ = config.bos_id;
  t->eos_id_ = config.eos_id;
  return t;
}

std::optional<int32_t> BpeTokenizer::TokenToId(std::string_view token) const {
  if (auto it = added_by_content_.find(token); it != added_by_content_.end()) return it->second;
  if (auto it = vocab_.find(token); it != vocab_.end()) return it->second;
  return std::nullopt;
}

std::optional<BpeTokenizer::Merge> BpeTokenizer::FindMerge(int32_t left, int32_t right) const {
  if (concat_rank_) {
    const std::string joined = pieces_[static_cast<size_t>(left)] + pieces_[static_cast<size_t>(right)];
    auto it = vocab_.find(joined);
    if (it == vocab_.end()) return std::nullopt;
    return Merge{it->second, it->second};
  }
  auto it = merges_.find(PairKey(left, right));
  if (it == merges_.end()) return std::nullopt;
  return it->second;
}

Status BpeTokenizer::MergeWord(std::string_view word, std::vector<int32_t>* out) const {
  if (ignore_merges_) {
    if (auto it = vocab_.find(word); it != vocab_.end()) {
      out->push_back(it->second);
      return Status::Ok();
    }
  }
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    bool alive;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  auto add = [&](int32_t id) {
    const int32_t index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, index - 1, -1, true});
    if (index > 0) symbols[static_cast<size_t>(index - 1)].next = index;
  };
  // Initial symbols: one per character (tokenizers' BPE::merge_word).
  std::optional<int32_t> pending_unk;
  size_t pos = 0;
  while (pos < word.size()) {
    const size_t len = Utf8CharLen(static_cast<unsigned char>(word[pos]));
    const std::string_view ch = word.substr(pos, len);
    pos += len;
    if (auto it = vocab_.find(ch); it != vocab_.end()) {
      if (pending_unk) add(*pending_unk), pending_unk.reset();
      add(it->second);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (char c : ch) all = all && byte_ids_[static_cast<uint8_t>(c)] >= 0;
      if (all) {
        for (char c : ch) add(byte_ids_[static_cast<uint8_t>(c)]);
        continue;
      }
    }
    if (!unk_id_) {
      return Internal(source_ + ": character '" + std::string(ch) +
                      "' has no token and the model has no unk_token");
    }
    if (pending_unk && !fuse_unk_) add(*pending_unk);
    pending_unk = *unk_id_;
  }
  if (pending_unk) add(*pending_unk);

  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t new_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (auto m = FindMerge(symbols[i].id, symbols[i + 1].id)) {
      queue.push({m->rank, static_cast<int32_t>(i), m->new_id});
    }
  }
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[static_cast<size_t>(top.pos)];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[static_cast<size_t>(left.next)];
    // Stale entry: one side changed since it was queued.
    auto current = FindMerge(left.id, right.id);
    if (!current || current->new_id != top.new_id || current->rank != top.rank) continue;
    left.id = top.new_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = top.pos;
    if (left.prev >= 0) {
      if (auto m = FindMerge(symbols[static_cast<size_t>(left.prev)].id, left.id)) {
        queue.push({m->rank, left.prev, m->new_id});
      }
    }
    if (left.next >= 0) {
      if (auto m = FindMerge(left.id, symbols[static_cast<size_t>(left.next)].id)) {
        queue.push({m->rank, top.pos, m->new_id});
      }
    }
  }
  for (const Symbol& s : symbols) {
    if (s.alive) out->push_back(s.id);
  }
  return Status::Ok();
}

Status BpeTokenizer::TokenizeWord(std::string_view word, std::vector<int32_t>* out) const {
  // Long words (a whole paragraph when there is no pre-tokenizer) are not worth caching.
  constexpr size_t kMaxCachedWord = 256;
  constexpr size_t kMaxCacheEntries = 1 << 18;
  if (word.size() > kMaxCachedWord) return MergeWord(word, out);
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (auto it = cache_.find(word); it != cache_.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return Status::Ok();
    }
  }
  std::vector<int32_t> ids;
  SLM_RETURN_IF_ERROR(MergeWord(word, &ids));
  out->insert(out->end(), ids.begin(), ids.end());
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() >= kMaxCacheEntries) cache_.clear();
  cache_.emplace(std::string(word), std::move(ids));
  return Status::Ok();
}

void BpeTokenizer::SplitAddedTokens(const std::vector<AddedPattern>& patterns, std::string_view text,
                                    bool at_input_start, std::vector<Segment>* out) const {
  size_t start_offset = 0;  // end of the previous split
  size_t pos = 0;
  std::array<bool, 256> first_byte{};  // positions that cannot start a pattern are skipped fast
  for (const AddedPattern& p : patterns) first_byte[static_cast<uint8_t>(p.content[0])] = true;
  while (!patterns.empty() && pos < text.size()) {
    if (!first_byte[static_cast<uint8_t>(text[pos])]) {
      ++pos;
      continue;
    }
    // Leftmost-longest: the first position where any pattern matches, its longest pattern.
    const AddedPattern* hit = nullptr;
    for (const AddedPattern& p : patterns) {
      if (text.compare(pos, p.content.size(), p.content) == 0) {
        hit = &p;
        break;
      }
    }
    if (hit == nullptr) {
      ++pos;
      continue;
    }
    const AddedToken& tok = *hit->token;
    size_t start = pos, stop = pos + hit->content.size();
    if (tok.single_word) {
      size_t len;
      const bool word_before = start > 0 && IsUnicodeAlnum(LastChar(text.substr(0, start)));
      const bool word_after = stop < text.size() && IsUnicodeAlnum(DecodeUtf8At(text, stop, &len));
      if (word_before || word_after) {
        ++pos;
        continue;
      }
    }
    if (tok.lstrip) {
      while (start > start_offset) {
        size_t s = start - 1;
        while (s > start_offset && (static_cast<unsigned char>(text[s]) & 0xC0) == 0x80) --s;
        size_t len;
        if (!IsUnicodeWhitespace(DecodeUtf8At(text, s, &len))) break;
        start = s;
      }
    }
    if (tok.rstrip) {
      while (stop < text.size()) {
        size_t len;
        if (!IsUnicodeWhitespace(DecodeUtf8At(text, stop, &len))) break;
        stop += len;
      }
    }
    if (start > start_offset) {
      out->push_back({-1, std::string(text.substr(start_offset, start - start_offset)),
                      at_input_start && start_offset == 0});
    }
    out->push_back({tok.id, {}, false});
    start_offset = stop;
    pos = stop;
  }
  if (start_offset < text.size()) {
    out->push_back({-1, std::string(text.substr(start_offset)), at_input_start && start_offset == 0});
  }
}

Result<std::vector<int32_t>> BpeTokenizer::Encode(std::string_view text) const {
  if (!IsValidUtf8(text)) {
    return InvalidArgument(source_ + ": the text to encode is not valid UTF-8 (" +
                           std::to_string(text.size()) + " bytes)");
  }
  std::vector<Segment> first;
  SplitAddedTokens(raw_patterns_, text, true, &first);
  std::vector<Segment> segments;
  for (Segment& s : first) {
    if (s.id >= 0) {
      segments.push_back(std::move(s));
      continue;
    }
    if (normalizer_) SLM_RETURN_IF_ERROR(normalizer_->Apply(&s.text));
    SplitAddedTokens(normalized_patterns_, s.text, s.at_input_start, &segments);
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3);
  std::vector<TextPiece> pieces;
  for (Segment& s : segments) {
    if (s.id >= 0) {
      ids.push_back(s.id);
      continue;
    }
    pieces.clear();
    pieces.push_back({std::move(s.text), s.at_input_start});
    if (pre_tokenizer_) pre_tokenizer_->Apply(&pieces);
    for (const TextPiece& p : pieces) {
      std::string_view rest = p.text;
      if (split_at_metaspace_) {
        // Chunks start where a "▁" run starts (see split_at_metaspace_).
        size_t at = rest.find(kMetaspace, 1);
        while (at != std::string_view::npos) {
          if (!rest.substr(0, at).ends_with(kMetaspace)) {
            SLM_RETURN_IF_ERROR(TokenizeWord(rest.substr(0, at), &ids));
            rest.remove_prefix(at);
            at = rest.find(kMetaspace, 1);
          } else {
            at = rest.find(kMetaspace, at + 1);
          }
        }
      }
      if (!rest.empty()) SLM_RETURN_IF_ERROR(TokenizeWord(rest, &ids));
    }
  }
  return ids;
}

std::string_view BpeTokenizer::Surface(int32_t prev_id, int32_t id) const {
  std::string_view s = surfaces_[static_cast<size_t>(id)];
  const bool at_start = prev_id < 0 || prev_id >= vocab_size() || IsSpecial(prev_id);
  if (at_start && !decoder_.strip_per_token) {
    s = StripLeading(s, decoder_.strip_content, decoder_.strip_start);
  }
  return s;
}

std::string BpeTokenizer::DecodeToken(int32_t prev_id, int32_t id) const {
  if (id < 0 || id >= vocab_size() || IsSpecial(id)) return {};
  return std::string(Surface(prev_id, id));
}

std::string BpeTokenizer::Decode(std::span<const int32_t> ids) const {
  std::string bytes;
  int32_t prev = kNoPreviousToken;
  for (const int32_t id : ids) {
    if (id < 0 || id >= vocab_size() || IsSpecial(id)) continue;
    bytes.append(Surface(prev, id));
    prev = id;
  }
  std::string_view view = bytes;
  if (!decoder_.strip_per_token) view = StripTrailing(view, decoder_.strip_content, decoder_.strip_stop);
  std::string out;
  Utf8StreamDecoder utf8(replacement_);
  utf8.Push(view, &out);
  utf8.Flush(&out);
  return out;
}

std::string BpeTokenizer::IdToPiece(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  return pieces_[static_cast<size_t>(id)];
}

}  // namespace slm::llm
