// Data types, reduction operations and operation kinds understood by every weft collective.
//
// Buffers are described as (pointer, element count, DataType). fp16 and bf16 are stored as their
// 16-bit IEEE / bfloat patterns; reductions on them accumulate in fp32. avg is sum divided by the
// number of ranks (integer types divide with truncation toward zero).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "weft/export.h"

namespace weft {

enum class DataType : uint8_t { int8 = 0, uint8, int32, int64, fp16, bf16, fp32, fp64 };
inline constexpr int kDataTypeCount = 8;

// band, bor and bxor (bitwise and, or, xor) are defined for the integer types only.
enum class ReduceOp : uint8_t { sum = 0, prod, min, max, avg, band, bor, bxor };
inline constexpr int kReduceOpCount = 8;
inline constexpr bool is_bitwise(ReduceOp op) { return op >= ReduceOp::band; }
inline constexpr bool is_integer(DataType t) {
  return t == DataType::int8 || t == DataType::uint8 || t == DataType::int32 ||
         t == DataType::int64;
}

// Every operation a communicator runs; also the key for per-collective algorithm choice.
enum class OpKind : uint8_t {
  allreduce = 0,
  broadcast,
  reduce,
  allgather,
  allgatherv,
  reduce_scatter,
  gather,
  scatter,
  alltoall,
  alltoallv,
  barrier,
  send,
  recv,
  sparse_allreduce,  // after the point-to-point kinds: the values on the wire stay as they were
};
inline constexpr int kOpKindCount = 14;

// Bytes per element (0 for a value outside the enum). Inline: it sits on every call's path.
constexpr size_t dtype_size(DataType t) {
  switch (t) {
    case DataType::int8:
    case DataType::uint8: return 1;
    case DataType::fp16:
    case DataType::bf16: return 2;
    case DataType::int32:
    case DataType::fp32: return 4;
    case DataType::int64:
    case DataType::fp64: return 8;
  }
  return 0;
}
WEFT_API const char* to_string(DataType t);  // "f32", "bf16", "i64", ...
WEFT_API const char* to_string(ReduceOp op);  // "sum", ...
WEFT_API const char* to_string(OpKind k);     // "allreduce", ...
WEFT_API std::optional<DataType> parse_dtype(std::string_view s);  // accepts "f32", "float", "fp32" ...
WEFT_API std::optional<ReduceOp> parse_reduce_op(std::string_view s);
WEFT_API std::optional<OpKind> parse_op_kind(std::string_view s);

}  // namespace weft
