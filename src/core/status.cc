#include "core/status.h"

namespace slm {

const char* ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kNotFound: return "not found";
    case ErrorCode::kParseError: return "parse error";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kOutOfRange: return "out of range";
    case ErrorCode::kIoError: return "I/O error";
    case ErrorCode::kResourceExhausted: return "resource exhausted";
    case ErrorCode::kFailedPrecondition: return "failed precondition";
    case ErrorCode::kInternal: return "internal error";
  }
  return "unknown error";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(ErrorCodeName(code_)) + ": " + message_;
}

}  // namespace slm
