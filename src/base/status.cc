#include "weft/status.h"

namespace weft {

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::ok: return "ok";
    case ErrorCode::invalid_argument: return "invalid argument";
    case ErrorCode::timeout: return "timeout";
    case ErrorCode::peer_lost: return "peer lost";
    case ErrorCode::mismatch: return "mismatch";
    case ErrorCode::aborted: return "aborted";
    case ErrorCode::io: return "i/o error";
    case ErrorCode::protocol: return "protocol error";
    case ErrorCode::not_found: return "not found";
    case ErrorCode::internal: return "internal error";
    case ErrorCode::revoked: return "revoked";
  }
  return "unknown error";
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return rep_ ? rep_->message : kEmpty;
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  return std::string(weft::to_string(rep_->code)) + ": " + rep_->message;
}

Status Status::with_context(const std::string& prefix) const {
  if (ok()) return *this;
  return Status(rep_->code, prefix + ": " + rep_->message);
}

}  // namespace weft
