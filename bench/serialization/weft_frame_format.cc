// weft's own framing (docs/wire-format.md), with the transport's real encoder and decoder
// (src/transport/tcp/frame.h): a tensor travels as one 72-byte frame header followed by its raw
// little-endian bytes, as an eager frame of an fp32 allreduce does; a sparse tensor as the block
// sparse_allreduce's gather_merge puts on the wire (its indices, then its values padded to 8
// bytes; docs/algorithms.md). Name and shape are not on weft's wire: both ranks' calls supply the
// buffer, and the header's fingerprint (operation, dtype, count) checks that they agree. Larger
// messages go as rts/cts plus data frames of >= 256 KiB segments: a header per segment, the same
// raw bytes.
#include <cstring>

#include "format.h"
#include "transport/tcp/frame.h"

namespace weft::bench {
namespace {

tcp::FrameHeader header(OpKind kind, DataType dtype, uint64_t count, uint64_t payload_bytes) {
  tcp::FrameHeader h;
  h.type = tcp::FrameType::eager;
  h.comm = 0x2357;
  h.tag = 1;
  h.length = payload_bytes;
  h.fp.kind = kind;
  h.fp.dtype = dtype;
  h.fp.count = count;
  return h;
}

// The header of `wire`, checked as the TCP transport checks it, and its payload's size.
Result<tcp::FrameHeader> decode(std::string_view wire) {
  if (wire.size() < tcp::kHeaderBytes) return Status(ErrorCode::protocol, "shorter than a header");
  tcp::FrameLimits limits;
  limits.max_eager = wire.size();
  auto h = tcp::decode_header(reinterpret_cast<const uint8_t*>(wire.data()), limits);
  if (h.ok() && h->length != wire.size() - tcp::kHeaderBytes) {
    return Status(ErrorCode::protocol, "length disagrees with the bytes");
  }
  return h;
}

class TensorCoder final : public Coder<Tensor> {
 public:
  std::string encode(const Tensor& in, std::string_view& wire) override {
    size_t payload = in.data.size() * sizeof(float);
    bytes_.resize(tcp::kHeaderBytes + payload);
    auto* out = reinterpret_cast<uint8_t*>(bytes_.data());
    tcp::encode_header(header(OpKind::allreduce, DataType::fp32, in.data.size(), payload), out);
    std::memcpy(out + tcp::kHeaderBytes, in.data.data(), payload);
    wire = bytes_;
    return {};
  }
  std::string decode(std::string_view wire, Tensor& out) override {
    auto h = bench::decode(wire);
    if (!h.ok()) return h.status().to_string();
    if (h->fp.dtype != DataType::fp32 || h->fp.count * sizeof(float) != h->length) {
      return "not an fp32 message";
    }
    out.data.resize(h->fp.count);
    std::memcpy(out.data.data(), wire.data() + tcp::kHeaderBytes, h->length);
    return {};
  }

 private:
  std::string bytes_;
};

// gather_merge's block: m int64 indices, then m fp32 values, the whole padded to 8 bytes; it
// travels as this rank's part of an allgatherv of bytes.
size_t block_bytes(size_t m) { return (m * (sizeof(int64_t) + sizeof(float)) + 7) / 8 * 8; }

class SparseCoder final : public Coder<SparseTensor> {
 public:
  std::string encode(const SparseTensor& in, std::string_view& wire) override {
    size_t m = in.indices.size();
    size_t payload = block_bytes(m);
    bytes_.assign(tcp::kHeaderBytes + payload, '\0');
    auto* out = reinterpret_cast<uint8_t*>(bytes_.data());
    tcp::encode_header(header(OpKind::allgatherv, DataType::uint8, payload, payload), out);
    std::memcpy(out + tcp::kHeaderBytes, in.indices.data(), m * sizeof(int64_t));
    std::memcpy(out + tcp::kHeaderBytes + m * sizeof(int64_t), in.values.data(), m * sizeof(float));
    wire = bytes_;
    return {};
  }
  std::string decode(std::string_view wire, SparseTensor& out) override {
    auto h = bench::decode(wire);
    if (!h.ok()) return h.status().to_string();
    if (h->fp.dtype != DataType::uint8 || h->fp.count != h->length) return "not a block of bytes";
    // weft learns m from the allgather of step 1; here it follows from the block's size.
    size_t m = h->length / (sizeof(int64_t) + sizeof(float));
    if (block_bytes(m) != h->length) return "not a whole index/value block";
    const char* payload = wire.data() + tcp::kHeaderBytes;
    out.indices.resize(m);
    out.values.resize(m);
    std::memcpy(out.indices.data(), payload, m * sizeof(int64_t));
    std::memcpy(out.values.data(), payload + m * sizeof(int64_t), m * sizeof(float));
    return {};
  }

 private:
  std::string bytes_;
};

}  // namespace

Format weft_frame_format() {
  return {.name = "weft-frame",
          .tensor = factory_of<TensorCoder>(),
          .sparse = factory_of<SparseCoder>(),
          .carries_metadata = false};
}

}  // namespace weft::bench
