#include "rendezvous/tcp_store_protocol.h"

#include <fmt/format.h>

#include "rendezvous/store_common.h"

namespace weft::tcp_store {
namespace {

Status protocol_error(std::string what) { return Status(ErrorCode::protocol, std::move(what)); }

class Writer {
 public:
  Writer() { out_.resize(kLengthBytes); }  // length prefix, filled by finish()
  void u8(uint8_t v) { out_.push_back(v); }
  void u32(uint32_t v) { le(v, 4); }
  void u64(uint64_t v) { le(v, 8); }
  void bytes(std::string_view b) {
    u32(static_cast<uint32_t>(b.size()));
    out_.insert(out_.end(), b.begin(), b.end());
  }
  void bytes(const Bytes& b) {
    u32(static_cast<uint32_t>(b.size()));
    out_.insert(out_.end(), b.begin(), b.end());
  }
  Bytes finish() {
    uint64_t n = out_.size() - kLengthBytes;
    for (size_t i = 0; i < kLengthBytes; ++i) out_[i] = static_cast<uint8_t>(n >> (8 * i));
    return std::move(out_);
  }

 private:
  void le(uint64_t v, size_t n) {
    for (size_t i = 0; i < n; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  Bytes out_;
};

// Reads fields from a complete payload; every read checks the remaining length first.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in) : in_(in) {}

  bool u8(uint8_t* v) {
    uint64_t x = 0;
    if (!le(1, &x)) return false;
    *v = static_cast<uint8_t>(x);
    return true;
  }
  bool u32(uint32_t* v) {
    uint64_t x = 0;
    if (!le(4, &x)) return false;
    *v = static_cast<uint32_t>(x);
    return true;
  }
  bool u64(uint64_t* v) { return le(8, v); }

  // A u32 length (at most `limit`) followed by that many bytes.
  template <typename Out>
  Status sized(const char* what, size_t limit, Out* out) {
    uint32_t n = 0;
    if (!u32(&n)) return protocol_error(fmt::format("truncated {} length", what));
    if (n > limit) return protocol_error(fmt::format("{} of {} bytes (limit {})", what, n, limit));
    if (remaining() < n) return protocol_error(fmt::format("truncated {}", what));
    out->assign(in_.begin() + pos_, in_.begin() + pos_ + n);
    pos_ += n;
    return Status::success();
  }

  size_t remaining() const { return in_.size() - pos_; }

 private:
  bool le(size_t n, uint64_t* v) {
    if (remaining() < n) return false;
    uint64_t x = 0;
    for (size_t i = 0; i < n; ++i) x |= uint64_t{in_[pos_ + i]} << (8 * i);
    pos_ += n;
    *v = x;
    return true;
  }

  std::span<const uint8_t> in_;
  size_t pos_ = 0;
};

bool known_command(uint8_t c) {
  return c >= static_cast<uint8_t>(Command::ping) && c <= static_cast<uint8_t>(Command::multi_get);
}

Status read_keys(Reader& r, std::vector<std::string>* keys) {
  uint32_t count = 0;
  if (!r.u32(&count)) return protocol_error("truncated key count");
  if (count > kMaxKeysPerRequest) {
    return protocol_error(
        fmt::format("{} keys in one request (limit {})", count, kMaxKeysPerRequest));
  }
  // Every key takes at least its 4-byte length, so this bounds the reservation by real bytes.
  if (r.remaining() / 4 < count) return protocol_error("truncated key list");
  keys->resize(count);
  for (auto& k : *keys) WEFT_RETURN_IF_ERROR(r.sized("key", kMaxKeyBytes, &k));
  return Status::success();
}

Status parse_request_payload(std::span<const uint8_t> payload, Request* req) {
  Reader r(payload);
  uint8_t command = 0;
  if (!r.u8(&command)) return protocol_error("empty frame");
  if (!known_command(command)) return protocol_error(fmt::format("unknown command {}", command));
  req->command = static_cast<Command>(command);
  uint64_t u = 0;
  switch (req->command) {
    case Command::ping:
      if (!r.u32(&req->magic) || !r.u32(&req->version)) return protocol_error("truncated ping");
      if (req->magic != kMagic) {
        return protocol_error(
            fmt::format("bad magic {:#010x} (not a weft store client)", req->magic));
      }
      if (req->version >= 2) {
        for (uint8_t& b : req->nonce) {
          if (!r.u8(&b)) return protocol_error("truncated ping nonce");
        }
      }
      break;
    case Command::set:
      WEFT_RETURN_IF_ERROR(r.sized("key", kMaxKeyBytes, &req->key));
      WEFT_RETURN_IF_ERROR(r.sized("value", kMaxValueBytes, &req->value));
      break;
    case Command::get:
      WEFT_RETURN_IF_ERROR(r.sized("key", kMaxKeyBytes, &req->key));
      if (!r.u64(&req->timeout_ms)) return protocol_error("truncated timeout");
      break;
    case Command::add:
      WEFT_RETURN_IF_ERROR(r.sized("key", kMaxKeyBytes, &req->key));
      if (!r.u64(&u)) return protocol_error("truncated delta");
      req->delta = static_cast<int64_t>(u);
      break;
    case Command::wait:
    case Command::multi_get:
      WEFT_RETURN_IF_ERROR(read_keys(r, &req->keys));
      if (!r.u64(&req->timeout_ms)) return protocol_error("truncated timeout");
      break;
    case Command::check:
      WEFT_RETURN_IF_ERROR(read_keys(r, &req->keys));
      break;
    case Command::erase:
      WEFT_RETURN_IF_ERROR(r.sized("key", kMaxKeyBytes, &req->key));
      break;
  }
  if (r.remaining() != 0) {
    return protocol_error(
        fmt::format("{} trailing bytes after {} request", r.remaining(), to_string(req->command)));
  }
  return Status::success();
}

}  // namespace

const char* to_string(Command c) {
  switch (c) {
    case Command::ping:
      return "ping";
    case Command::set:
      return "set";
    case Command::get:
      return "get";
    case Command::add:
      return "add";
    case Command::wait:
      return "wait";
    case Command::check:
      return "check";
    case Command::erase:
      return "erase";
    case Command::multi_get:
      return "multi_get";
  }
  return "unknown";
}

Reply Reply::failure(ErrorCode error, std::string message) {
  Reply r;
  r.code = ReplyCode::error;
  r.error = error;
  if (message.size() > kMaxMessageBytes) message.resize(kMaxMessageBytes);
  r.message = std::move(message);
  return r;
}

Status check_key(std::string_view key) {
  if (key.size() <= kMaxKeyBytes) return Status::success();
  return Status(ErrorCode::invalid_argument,
                fmt::format("key {} is {} bytes; the tcp store allows at most {}", quote_key(key),
                            key.size(), kMaxKeyBytes));
}

Status check_value_size(size_t size) {
  if (size <= kMaxValueBytes) return Status::success();
  return Status(
      ErrorCode::invalid_argument,
      fmt::format("value of {} bytes; the tcp store allows at most {}", size, kMaxValueBytes));
}

Status check_key_count(size_t count) {
  if (count <= kMaxKeysPerRequest) return Status::success();
  return Status(ErrorCode::invalid_argument,
                fmt::format("{} keys in one call; the tcp store allows at most {}", count,
                            kMaxKeysPerRequest));
}

Bytes encode_request(const Request& req) {
  Writer w;
  w.u8(static_cast<uint8_t>(req.command));
  switch (req.command) {
    case Command::ping:
      w.u32(req.magic);
      w.u32(req.version);
      if (req.version >= 2) {
        for (uint8_t b : req.nonce) w.u8(b);
      }
      break;
    case Command::set:
      w.bytes(req.key);
      w.bytes(req.value);
      break;
    case Command::get:
      w.bytes(req.key);
      w.u64(req.timeout_ms);
      break;
    case Command::add:
      w.bytes(req.key);
      w.u64(static_cast<uint64_t>(req.delta));
      break;
    case Command::wait:
    case Command::check:
    case Command::multi_get:
      w.u32(static_cast<uint32_t>(req.keys.size()));
      for (const auto& k : req.keys) w.bytes(k);
      if (req.command != Command::check) w.u64(req.timeout_ms);
      break;
    case Command::erase:
      w.bytes(req.key);
      break;
  }
  return w.finish();
}

Bytes encode_reply(Command command, const Reply& reply) {
  Writer w;
  w.u8(static_cast<uint8_t>(reply.code));
  if (reply.code == ReplyCode::error) {
    w.u8(static_cast<uint8_t>(reply.error));
    w.bytes(std::string_view(reply.message).substr(0, kMaxMessageBytes));
  } else if (reply.code == ReplyCode::ok) {
    switch (command) {
      case Command::ping:
        w.u32(static_cast<uint32_t>(reply.integer));
        if (reply.integer >= 2) {
          w.u8(reply.auth ? 1 : 0);
          for (uint8_t b : reply.nonce) w.u8(b);
        }
        break;
      case Command::get:
        w.bytes(reply.value);
        break;
      case Command::add:
        w.u64(static_cast<uint64_t>(reply.integer));
        break;
      case Command::check:
        w.u8(reply.flag ? 1 : 0);
        break;
      case Command::multi_get:
        w.u32(static_cast<uint32_t>(reply.values.size()));
        for (const auto& v : reply.values) w.bytes(v);
        break;
      case Command::set:
      case Command::wait:
      case Command::erase:
        break;
    }
  }
  return w.finish();
}

Result<size_t> decode_length(std::span<const uint8_t> prefix) {
  if (prefix.size() < kLengthBytes) return protocol_error("truncated frame length");
  size_t n = 0;
  for (size_t i = 0; i < kLengthBytes; ++i) n |= size_t{prefix[i]} << (8 * i);
  if (n == 0) return protocol_error("empty frame");
  if (n > kMaxPayloadBytes) {
    return protocol_error(fmt::format("frame of {} bytes (limit {})", n, kMaxPayloadBytes));
  }
  return n;
}

Result<std::optional<Request>> decode_request(std::span<const uint8_t> buffer, size_t* consumed) {
  *consumed = 0;
  if (buffer.size() < kLengthBytes) return std::optional<Request>();
  Result<size_t> length = decode_length(buffer.first(kLengthBytes));
  if (!length.ok()) return length.status();
  // Reject garbage as soon as the command byte is in, not after buffering a whole bogus frame.
  if (buffer.size() > kLengthBytes && !known_command(buffer[kLengthBytes])) {
    return protocol_error(fmt::format("unknown command {}", buffer[kLengthBytes]));
  }
  if (buffer.size() - kLengthBytes < length.value()) return std::optional<Request>();
  Request req;
  WEFT_RETURN_IF_ERROR(parse_request_payload(buffer.subspan(kLengthBytes, length.value()), &req));
  *consumed = kLengthBytes + length.value();
  return std::optional<Request>(std::move(req));
}

Result<Reply> decode_reply(Command command, std::span<const uint8_t> payload) {
  Reader r(payload);
  uint8_t code = 0;
  if (!r.u8(&code)) return protocol_error("empty reply");
  Reply reply;
  if (code == static_cast<uint8_t>(ReplyCode::error)) {
    uint8_t error = 0;
    if (!r.u8(&error)) return protocol_error("truncated error reply");
    if (error == 0 || error > static_cast<uint8_t>(ErrorCode::internal)) {
      return protocol_error(fmt::format("unknown error code {} in reply", error));
    }
    std::string message;
    WEFT_RETURN_IF_ERROR(r.sized("error message", kMaxMessageBytes, &message));
    reply = Reply::failure(static_cast<ErrorCode>(error), std::move(message));
  } else if (code == static_cast<uint8_t>(ReplyCode::timeout)) {
    if (command != Command::get && command != Command::wait && command != Command::multi_get) {
      return protocol_error(fmt::format("timeout reply to {}", to_string(command)));
    }
    reply = Reply::timed_out();
  } else if (code == static_cast<uint8_t>(ReplyCode::ok)) {
    uint32_t v32 = 0;
    uint64_t v64 = 0;
    uint8_t v8 = 0;
    switch (command) {
      case Command::ping:
        if (!r.u32(&v32)) return protocol_error("truncated ping reply");
        reply.integer = v32;
        if (v32 >= 2) {
          if (!r.u8(&v8) || v8 > 1) return protocol_error("bad ping reply flags");
          reply.auth = v8 == 1;
          for (uint8_t& b : reply.nonce) {
            if (!r.u8(&b)) return protocol_error("truncated ping reply nonce");
          }
        }
        break;
      case Command::get:
        WEFT_RETURN_IF_ERROR(r.sized("value", kMaxValueBytes, &reply.value));
        break;
      case Command::add:
        if (!r.u64(&v64)) return protocol_error("truncated add reply");
        reply.integer = static_cast<int64_t>(v64);
        break;
      case Command::check:
        if (!r.u8(&v8) || v8 > 1) return protocol_error("bad check reply");
        reply.flag = v8 == 1;
        break;
      case Command::multi_get:
        if (!r.u32(&v32)) return protocol_error("truncated multi_get reply");
        if (v32 > kMaxKeysPerRequest) {
          return protocol_error(
              fmt::format("{} values in a multi_get reply (limit {})", v32, kMaxKeysPerRequest));
        }
        // Every value takes at least its 4-byte length: bounds the reservation by real bytes.
        if (r.remaining() / 4 < v32) return protocol_error("truncated multi_get reply");
        reply.values.resize(v32);
        for (auto& v : reply.values) WEFT_RETURN_IF_ERROR(r.sized("value", kMaxValueBytes, &v));
        break;
      case Command::set:
      case Command::wait:
      case Command::erase:
        break;
    }
  } else {
    return protocol_error(fmt::format("unknown reply code {}", code));
  }
  if (r.remaining() != 0) {
    return protocol_error(
        fmt::format("{} trailing bytes in {} reply", r.remaining(), to_string(command)));
  }
  return reply;
}

}  // namespace weft::tcp_store
