// tiktoken-format BPE files (Llama 3's original/tokenizer.model): one "<base64 token> <rank>"
// line per token, rank = id. The file stores neither the pre-tokenizer regex nor the special
// tokens, so, as Meta's reference tokenizer and HF's Llama-3 conversion do, we use Llama 3's
// regex, and the special tokens of tokenizer_config.json's added_tokens_decoder when a config
// is given, else Llama 3's 256 reserved names at ids [n, n + 256).
//
// Encoding = HF's converted tokenizer.json: Split(Llama-3 regex) → byte-level alphabet → BPE
// where a pair merges when its concatenation is a token, lowest rank first, and a pre-token
// that is itself a token is emitted whole (ignore_merges).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "llm/hf_tokenizer_json.h"

namespace slm::llm {

// True when `bytes` starts like a tiktoken file ("<base64> <digits>\n"), as opposed to a
// SentencePiece protobuf.
bool LooksLikeTiktoken(std::string_view bytes);

Result<std::unique_ptr<BpeTokenizer>> LoadTiktokenTokenizer(std::string_view file_bytes,
                                                            const std::string& source,
                                                            const TokenizerSideFiles& side,
                                                            SpecialTokenPolicy* policy);

}  // namespace slm::llm
