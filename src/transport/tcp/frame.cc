#include "transport/tcp/frame.h"

#include <bit>
#include <cstring>
#include <string>

namespace weft::tcp {
namespace {

// Fixed offsets of the header fields (docs/wire-format.md).
constexpr size_t kOffMagic = 0, kOffVersion = 4, kOffType = 5, kOffKind = 6, kOffDtype = 7,
                 kOffOp = 8, kOffReserved1 = 9, kOffReserved2 = 10, kOffComm = 12, kOffTag = 16,
                 kOffLength = 24, kOffMsgId = 32, kOffOffset = 40, kOffRoot = 48,
                 kOffReserved3 = 52, kOffCount = 56, kOffSeq = 64;

template <typename T>
void put(uint8_t* p, T v) {
  static_assert(std::endian::native == std::endian::little, "weft frames are little-endian");
  std::memcpy(p, &v, sizeof(T));
}
template <typename T>
T get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

Status bad(const std::string& what) { return Status(ErrorCode::protocol, "bad frame: " + what); }

}  // namespace

void encode_header(const FrameHeader& h, uint8_t out[kHeaderBytes]) {
  std::memset(out, 0, kHeaderBytes);
  put<uint32_t>(out + kOffMagic, kMagic);
  put<uint8_t>(out + kOffVersion, kWireVersion);
  put<uint8_t>(out + kOffType, static_cast<uint8_t>(h.type));
  put<uint8_t>(out + kOffKind, static_cast<uint8_t>(h.fp.kind));
  put<uint8_t>(out + kOffDtype, static_cast<uint8_t>(h.fp.dtype));
  put<uint8_t>(out + kOffOp, static_cast<uint8_t>(h.fp.op));
  put<uint32_t>(out + kOffComm, h.comm);
  put<uint64_t>(out + kOffTag, h.tag);
  put<uint64_t>(out + kOffLength, h.length);
  put<uint64_t>(out + kOffMsgId, h.msg_id);
  put<uint64_t>(out + kOffOffset, h.offset);
  put<int32_t>(out + kOffRoot, h.fp.root);
  put<uint64_t>(out + kOffCount, h.fp.count);
  put<uint64_t>(out + kOffSeq, h.fp.seq);
}

Result<FrameHeader> decode_header(const uint8_t in[kHeaderBytes], const FrameLimits& limits) {
  if (get<uint32_t>(in + kOffMagic) != kMagic) return bad("wrong magic (not a weft peer?)");
  uint8_t version = get<uint8_t>(in + kOffVersion);
  if (version != kWireVersion) {
    return bad("wire version " + std::to_string(version) + ", expected " +
               std::to_string(kWireVersion));
  }
  if (get<uint8_t>(in + kOffReserved1) != 0 || get<uint16_t>(in + kOffReserved2) != 0 ||
      get<uint32_t>(in + kOffReserved3) != 0) {
    return bad("reserved bytes are not zero");
  }
  FrameHeader h;
  uint8_t type = get<uint8_t>(in + kOffType);
  if (type < 1 || type > 9) return bad("unknown frame type " + std::to_string(type));
  h.type = static_cast<FrameType>(type);
  uint8_t kind = get<uint8_t>(in + kOffKind), dtype = get<uint8_t>(in + kOffDtype),
          op = get<uint8_t>(in + kOffOp);
  if (kind >= kOpKindCount) return bad("unknown operation kind " + std::to_string(kind));
  if (dtype >= kDataTypeCount) return bad("unknown dtype " + std::to_string(dtype));
  if (op >= kReduceOpCount) return bad("unknown reduce op " + std::to_string(op));
  h.fp.kind = static_cast<OpKind>(kind);
  h.fp.dtype = static_cast<DataType>(dtype);
  h.fp.op = static_cast<ReduceOp>(op);
  h.comm = get<uint32_t>(in + kOffComm);
  h.tag = get<uint64_t>(in + kOffTag);
  h.length = get<uint64_t>(in + kOffLength);
  h.msg_id = get<uint64_t>(in + kOffMsgId);
  h.offset = get<uint64_t>(in + kOffOffset);
  h.fp.root = get<int32_t>(in + kOffRoot);
  h.fp.count = get<uint64_t>(in + kOffCount);
  h.fp.seq = get<uint64_t>(in + kOffSeq);

  switch (h.type) {
    case FrameType::hello:
      if (h.length != kHelloPayload) return bad("hello payload must be 24 bytes");
      break;
    case FrameType::eager:
      if (h.length > limits.max_eager) {
        return bad("eager payload of " + std::to_string(h.length) + " bytes exceeds the limit of " +
                   std::to_string(limits.max_eager));
      }
      break;
    case FrameType::rts:
      if (h.length != 0) return bad("rts carries no payload");
      if (h.offset > limits.max_message) return bad("rts message size out of range");
      break;
    case FrameType::data:
      if (h.length > limits.max_message || h.offset > limits.max_message - h.length) {
        return bad("data segment out of range");
      }
      break;
    case FrameType::cts:
    case FrameType::credit:
    case FrameType::goodbye:
    case FrameType::heartbeat:
      if (h.length != 0) return bad("control frame carries a payload");
      break;
    case FrameType::error:
      if (h.length > kMaxErrorText) return bad("error text too long");
      break;
  }
  return h;
}

void encode_hello(const Hello& h, uint8_t out[kHelloPayload]) {
  put<uint64_t>(out, h.token);
  put<uint32_t>(out + 8, h.rank);
  put<uint32_t>(out + 12, h.size);
  put<uint32_t>(out + 16, h.socket_index);
  put<uint32_t>(out + 20, h.sockets_per_peer);
}

Hello decode_hello(const uint8_t in[kHelloPayload]) {
  Hello h;
  h.token = get<uint64_t>(in);
  h.rank = get<uint32_t>(in + 8);
  h.size = get<uint32_t>(in + 12);
  h.socket_index = get<uint32_t>(in + 16);
  h.sockets_per_peer = get<uint32_t>(in + 20);
  return h;
}

}  // namespace weft::tcp
