#include "weft/types.h"

#include <array>
#include <string>

namespace weft {
namespace {

template <typename Enum, size_t N>
std::optional<Enum> lookup(std::string_view s, const std::array<std::pair<std::string_view, Enum>, N>& table) {
  for (const auto& [name, value] : table) {
    if (name == s) return value;
  }
  return std::nullopt;
}

}  // namespace

const char* to_string(DataType t) {
  switch (t) {
    case DataType::int8: return "i8";
    case DataType::uint8: return "u8";
    case DataType::int32: return "i32";
    case DataType::int64: return "i64";
    case DataType::fp16: return "f16";
    case DataType::bf16: return "bf16";
    case DataType::fp32: return "f32";
    case DataType::fp64: return "f64";
  }
  return "?";
}

const char* to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::prod: return "prod";
    case ReduceOp::min: return "min";
    case ReduceOp::max: return "max";
    case ReduceOp::avg: return "avg";
    case ReduceOp::band: return "band";
    case ReduceOp::bor: return "bor";
    case ReduceOp::bxor: return "bxor";
  }
  return "?";
}

const char* to_string(OpKind k) {
  switch (k) {
    case OpKind::allreduce: return "allreduce";
    case OpKind::broadcast: return "broadcast";
    case OpKind::reduce: return "reduce";
    case OpKind::allgather: return "allgather";
    case OpKind::allgatherv: return "allgatherv";
    case OpKind::reduce_scatter: return "reduce_scatter";
    case OpKind::gather: return "gather";
    case OpKind::scatter: return "scatter";
    case OpKind::alltoall: return "alltoall";
    case OpKind::alltoallv: return "alltoallv";
    case OpKind::barrier: return "barrier";
    case OpKind::send: return "send";
    case OpKind::recv: return "recv";
    case OpKind::sparse_allreduce: return "sparse_allreduce";
  }
  return "?";
}

std::optional<DataType> parse_dtype(std::string_view s) {
  static constexpr std::array<std::pair<std::string_view, DataType>, 24> table{{
      {"i8", DataType::int8},     {"int8", DataType::int8},       {"char", DataType::int8},
      {"u8", DataType::uint8},    {"uint8", DataType::uint8},     {"byte", DataType::uint8},
      {"i32", DataType::int32},   {"int32", DataType::int32},     {"int", DataType::int32},
      {"i64", DataType::int64},   {"int64", DataType::int64},     {"long", DataType::int64},
      {"f16", DataType::fp16},    {"fp16", DataType::fp16},       {"half", DataType::fp16},
      {"bf16", DataType::bf16},   {"bfloat16", DataType::bf16},   {"float16", DataType::fp16},
      {"f32", DataType::fp32},    {"fp32", DataType::fp32},       {"float", DataType::fp32},
      {"f64", DataType::fp64},    {"fp64", DataType::fp64},       {"double", DataType::fp64},
  }};
  return lookup(s, table);
}

std::optional<ReduceOp> parse_reduce_op(std::string_view s) {
  static constexpr std::array<std::pair<std::string_view, ReduceOp>, 8> table{{
      {"sum", ReduceOp::sum}, {"prod", ReduceOp::prod}, {"min", ReduceOp::min},
      {"max", ReduceOp::max}, {"avg", ReduceOp::avg},   {"band", ReduceOp::band},
      {"bor", ReduceOp::bor}, {"bxor", ReduceOp::bxor},
  }};
  return lookup(s, table);
}

std::optional<OpKind> parse_op_kind(std::string_view s) {
  for (int i = 0; i < kOpKindCount; ++i) {
    auto k = static_cast<OpKind>(i);
    if (s == to_string(k)) return k;
  }
  return std::nullopt;
}

}  // namespace weft
