// Status and Result<T>: how library code reports failure. Nothing on the data
// path throws or aborts; a failed call returns a Status that says what and why.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace syncline {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // the caller (or a peer's message) is wrong
  kNotFound,
  kAlreadyExists,
  kFailedPrecondition,
  kDeadlineExceeded,  // a wait ran past its deadline
  kUnavailable,       // a peer or resource cannot be reached (port in use, peer dead)
  kAborted,           // the job was aborted; the message carries the reason
  kInternal,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "DeadlineExceeded: waiting for barrier" or "OK".
  std::string ToString() const;
  // A copy whose message is prefixed with `context: `.
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status FailedPrecondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    if (status_.ok()) status_ = Status(StatusCode::kInternal, "Result made from an OK Status without a value");
  }
  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;  // OK exactly when value_ is set
};

}  // namespace syncline

#define SYNCLINE_CONCAT_INNER(a, b) a##b
#define SYNCLINE_CONCAT(a, b) SYNCLINE_CONCAT_INNER(a, b)

// Returns the Status of `expr` from the enclosing function if it is not OK.
#define SYNCLINE_RETURN_IF_ERROR(expr)               \
  do {                                               \
    ::syncline::Status _st = (expr);                 \
    if (!_st.ok()) return _st;                       \
  } while (0)

// `lhs = value of expr`, or return its Status from the enclosing function.
#define SYNCLINE_ASSIGN_OR_RETURN(lhs, expr) \
  SYNCLINE_ASSIGN_OR_RETURN_IMPL(SYNCLINE_CONCAT(_result_, __LINE__), lhs, expr)
#define SYNCLINE_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()
