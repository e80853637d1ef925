// Status and Result<T>: weft reports every error as a value.
//
// A Status is either ok or carries an ErrorCode plus a message that says what happened, on which
// rank, to which peer and in which operation, e.g.
//   "rank 2: allreduce #17 (f32 x 1048576) Timed out after 30 s waiting for rank 3".
// Result<T> holds either a T or a non-ok Status. Both are cheap to move and safe to copy; neither
// throws. Any thread may create, copy or read them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>

#include "weft/export.h"

namespace weft {

enum class ErrorCode : uint8_t {
  ok = 0,
  invalid_argument,  // the caller passed something unusable; nothing was sent
  timeout,           // the operation did not finish within its timeout
  peer_lost,         // a peer closed its connection or died
  mismatch,          // ranks called different operations (or with different arguments)
  aborted,           // abort() was called on this communicator or on a peer
  io,                // a system call failed
  protocol,          // a peer sent bytes that are not valid weft frames
  not_found,         // a key or name does not exist
  internal,          // a bug in weft
  revoked,           // a rank revoked the communicator (Communicator::revoke); shrink() to go on
};
// The largest ErrorCode (codes received from peers above it are taken as internal).
inline constexpr ErrorCode kMaxErrorCode = ErrorCode::revoked;

WEFT_API const char* to_string(ErrorCode code);

class [[nodiscard]] WEFT_API Status {
 public:
  Status() = default;
  // An ok `code` makes an ok Status (the message is dropped).
  Status(ErrorCode code, std::string message)
      : rep_(code == ErrorCode::ok ? nullptr : new Rep{code, std::move(message)}) {}
  Status(const Status& other) : rep_(other.rep_ ? new Rep(*other.rep_) : nullptr) {}
  Status(Status&& other) noexcept = default;
  Status& operator=(const Status& other) {
    if (this != &other) rep_.reset(other.rep_ ? new Rep(*other.rep_) : nullptr);
    return *this;
  }
  Status& operator=(Status&& other) noexcept = default;
  ~Status() = default;

  static Status success() { return {}; }

  // An ok Status is one null pointer: returning and moving it on the hot path costs nothing.
  bool ok() const { return rep_ == nullptr; }
  ErrorCode code() const { return rep_ ? rep_->code : ErrorCode::ok; }
  const std::string& message() const;
  // "timeout: rank 2: allreduce #17 ..." or "ok".
  std::string to_string() const;

  // Returns a copy whose message is "<prefix>: <message>"; ok stays ok.
  Status with_context(const std::string& prefix) const;

 private:
  struct Rep {
    ErrorCode code;
    std::string message;
  };
  std::unique_ptr<Rep> rep_;  // null when ok
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: must not be ok

  bool ok() const { return v_.index() == 0; }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<1>(v_);
  }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &std::get<0>(v_); }
  T& operator*() & { return std::get<0>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace weft

// The one error-check helper: evaluate an expression yielding Status, return it if not ok.
#define WEFT_RETURN_IF_ERROR(expr)          \
  do {                                      \
    ::weft::Status weft_status_ = (expr);   \
    if (!weft_status_.ok()) return weft_status_; \
  } while (0)
