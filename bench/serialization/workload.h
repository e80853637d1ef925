// The data the serialization benchmark encodes and decodes: the seed's user records, a dense fp32
// tensor and its sparse index/value form, as an application holds them. Every format is timed from
// these structs to bytes (encode) and from bytes back into them (decode), so each figure includes
// building and reading the format's own representation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace weft::bench {

inline constexpr uint32_t kDtypeFp32 = 6;  // weft's DataType::fp32, the code every format carries

struct Record {
  std::string name;  // 8-16 lower-case letters
  int32_t age = 0;
  friend bool operator==(const Record&, const Record&) = default;
};
using Records = std::vector<Record>;

struct Tensor {
  std::string name;
  uint32_t dtype = kDtypeFp32;
  std::vector<int64_t> shape;
  std::vector<float> data;  // shape's product of elements
};

struct SparseTensor {
  std::string name;
  uint32_t dtype = kDtypeFp32;
  std::vector<int64_t> shape;    // of the dense tensor
  std::vector<int64_t> indices;  // flat, ascending
  std::vector<float> values;     // one per index
};

// Which values a tensor holds: finite ones (normal, subnormal, -0.0, the extremes), or those
// plus NaN (quiet, with a payload), +Inf and -Inf, which a format must carry bit for bit too.
enum class Values { finite, with_nonfinite };

Records make_records(size_t count);
// A tensor of `bytes` bytes (a multiple of 4), shaped [bytes / 4096, 1024] or [elements].
Tensor make_tensor(size_t bytes, Values values);
// The non-zero elements (one in a hundred) of make_tensor(dense_bytes, values).
SparseTensor make_sparse(size_t dense_bytes, Values values);

// Empty when `got` is `want` bit for bit; else what differs first.
std::string compare(const Records& want, const Records& got);
std::string compare(const Tensor& want, const Tensor& got);
std::string compare(const SparseTensor& want, const SparseTensor& got);

}  // namespace weft::bench
