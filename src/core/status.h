// Status / Result<T>: the error type of every library path.
// Bad input never aborts the process; a Status carries a closed error code and a message that
// names the file, the field, what was found and what was expected.
#pragma once

#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace slm {

// Closed, grouped error enum (grouping as in ExecuTorch's runtime error codes).
enum class ErrorCode : int {
  kOk = 0,
  // Input data problems.
  kInvalidArgument = 1,   // caller passed something that cannot work
  kNotFound = 2,          // file, tensor, method or field missing
  kParseError = 3,        // malformed file content
  kUnsupported = 4,       // valid input that this version does not implement
  kOutOfRange = 5,        // offsets/sizes outside their container, context overflow
  // Environment problems.
  kIoError = 10,          // read/write/mmap failed
  kResourceExhausted = 11,// allocation refused or over a limit
  // State problems.
  kFailedPrecondition = 20,  // call not valid in the current state (e.g. poisoned session)
  kInternal = 30,            // a bug: an invariant did not hold
};

const char* ErrorCodeName(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "<code name>: <message>", for printing.
  std::string ToString() const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

// Convenience constructors: InvalidArgument("...") etc.
inline Status InvalidArgument(std::string m) { return {ErrorCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {ErrorCode::kNotFound, std::move(m)}; }
inline Status ParseError(std::string m) { return {ErrorCode::kParseError, std::move(m)}; }
inline Status Unsupported(std::string m) { return {ErrorCode::kUnsupported, std::move(m)}; }
inline Status OutOfRange(std::string m) { return {ErrorCode::kOutOfRange, std::move(m)}; }
inline Status IoError(std::string m) { return {ErrorCode::kIoError, std::move(m)}; }
inline Status ResourceExhausted(std::string m) { return {ErrorCode::kResourceExhausted, std::move(m)}; }
inline Status FailedPrecondition(std::string m) { return {ErrorCode::kFailedPrecondition, std::move(m)}; }
inline Status Internal(std::string m) { return {ErrorCode::kInternal, std::move(m)}; }

// `s` with "<context>: " before its message (ok stays ok): the caller's location (a file path,
// a graph value) for an error found further down.
inline Status WithContext(const std::string& context, const Status& s) {
  return s.ok() ? s : Status(s.code(), context + ": " + s.message());
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    if (std::get<Status>(v_).ok()) v_ = Status(ErrorCode::kInternal, "Result built from an OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace slm

#define SLM_CONCAT_INNER(a, b) a##b
#define SLM_CONCAT(a, b) SLM_CONCAT_INNER(a, b)

// Returns the status from the enclosing function if `expr` is not OK.
#define SLM_RETURN_IF_ERROR(expr)                   \
  do {                                              \
    ::slm::Status slm_status_ = (expr);             \
    if (!slm_status_.ok()) return slm_status_;      \
  } while (0)

// `SLM_ASSIGN_OR_RETURN(auto x, MakeX());` declares x from a Result or returns its status.
#define SLM_ASSIGN_OR_RETURN(lhs, expr) \
  SLM_ASSIGN_OR_RETURN_IMPL(SLM_CONCAT(slm_result_, __LINE__), lhs, expr)
#define SLM_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
