// One serialization format as the benchmark sees it: for each workload it can carry, a Coder
// that turns the application's struct into bytes and back.
//
// A Coder is used by one thread. encode() returns a view of bytes the Coder owns until its next
// call (so a format that builds in place, as FlatBuffers does, is not charged a copy out);
// decode() fills a struct the caller reuses between calls. Both report what went wrong as text
// (empty: fine) instead of throwing, so a format that cannot carry a value (JSON and NaN) yields
// "fails round trip" and no figure. The bytes given to decode() are followed by at least
// kWirePadding readable bytes (simdjson reads past the end with SIMD loads).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "workload.h"

namespace weft::bench {

inline constexpr size_t kWirePadding = 64;

template <typename T>
class Coder {
 public:
  virtual ~Coder() = default;
  virtual std::string encode(const T& in, std::string_view& wire) = 0;
  virtual std::string decode(std::string_view wire, T& out) = 0;
};

template <typename T>
using CoderFactory = std::function<std::unique_ptr<Coder<T>>()>;

// A format and the workloads it carries (an empty factory: not this one). A format whose
// encode_timed is false only decodes (simdjson: its input comes from another JSON writer). One
// whose carries_metadata is false puts only a tensor's elements on the wire (weft's frames: the
// receiver's own call supplies name, dtype and shape), so its round trip compares only those.
struct Format {
  std::string name;
  CoderFactory<Records> records;
  CoderFactory<Tensor> tensor;
  CoderFactory<SparseTensor> sparse;
  bool encode_timed = true;
  bool carries_metadata = true;
};

// The factory of coder type C, for a Format's fields.
template <typename C>
auto factory_of() {
  return [] { return std::make_unique<C>(); };
}

// Each file of a format defines one of these; main.cc lists them.
Format protobuf_format();
Format protobuf_repeated_float_format();
Format flatbuffers_format();
Format avro_format();
Format nlohmann_json_format();
Format rapidjson_format();
Format simdjson_format();
Format weft_frame_format();

}  // namespace weft::bench
