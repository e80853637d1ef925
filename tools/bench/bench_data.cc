#include "tools/bench/bench_data.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "reduce/half_bits.h"

namespace weft::bench {

namespace {

using reduce_detail::float_to_half_bits;
using reduce_detail::half_bits_to_float;

double input_value(ReduceOp op, int rank, size_t k, int world_size) {
  if (op == ReduceOp::prod) {
    size_t period = static_cast<size_t>(std::max(world_size, 2));
    return (k + static_cast<size_t>(rank)) % period == 0 ? 2.0 : 1.0;
  }
  return static_cast<double>((static_cast<size_t>(rank) * 5 + k) % 9 + 1);
}

void store(void* buf, size_t i, DataType t, double v) {
  switch (t) {
    case DataType::int8:
      static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(v);
      break;
    case DataType::uint8:
      static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(v);
      break;
    case DataType::int32:
      static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v);
      break;
    case DataType::int64:
      static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v);
      break;
    case DataType::fp16:
      static_cast<uint16_t*>(buf)[i] = float_to_half_bits(static_cast<float>(v));
      break;
    case DataType::bf16:  // the inputs are small integers: truncating the fp32 pattern is exact
      static_cast<uint16_t*>(buf)[i] =
          static_cast<uint16_t>(__builtin_bit_cast(uint32_t, static_cast<float>(v)) >> 16);
      break;
    case DataType::fp32:
      static_cast<float*>(buf)[i] = static_cast<float>(v);
      break;
    case DataType::fp64:
      static_cast<double*>(buf)[i] = v;
      break;
  }
}

double load(const void* buf, size_t i, DataType t) {
  switch (t) {
    case DataType::int8:
      return static_cast<const int8_t*>(buf)[i];
    case DataType::uint8:
      return static_cast<const uint8_t*>(buf)[i];
    case DataType::int32:
      return static_cast<const int32_t*>(buf)[i];
    case DataType::int64:
      return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case DataType::fp16:
      return half_bits_to_float(static_cast<const uint16_t*>(buf)[i]);
    case DataType::bf16:
      return __builtin_bit_cast(float, static_cast<uint32_t>(static_cast<const uint16_t*>(buf)[i])
                                           << 16);
    case DataType::fp32:
      return static_cast<const float*>(buf)[i];
    case DataType::fp64:
      return static_cast<const double*>(buf)[i];
  }
  return 0;
}

bool matches(double got, double expected, DataType t) {
  if (is_integer(t)) return got == expected;
  double tolerance = t == DataType::fp16   ? 2e-3
                     : t == DataType::bf16 ? 1e-2
                     : t == DataType::fp32 ? 1e-5
                                           : 1e-12;
  return std::fabs(got - expected) <= tolerance * std::max(1.0, std::fabs(expected));
}

// The reduction over every rank's input element k.
double reduced_value(const BenchParams& p, size_t k, int world_size) {
  double acc = input_value(p.op, 0, k, world_size);
  for (int r = 1; r < world_size; ++r) {
    double v = input_value(p.op, r, k, world_size);
    switch (p.op) {
      case ReduceOp::sum:
      case ReduceOp::avg:
        acc += v;
        break;
      case ReduceOp::prod:
        acc *= v;
        break;
      case ReduceOp::min:
        acc = std::min(acc, v);
        break;
      case ReduceOp::max:
        acc = std::max(acc, v);
        break;
      case ReduceOp::band:
        acc = static_cast<double>(static_cast<int64_t>(acc) & static_cast<int64_t>(v));
        break;
      case ReduceOp::bor:
        acc = static_cast<double>(static_cast<int64_t>(acc) | static_cast<int64_t>(v));
        break;
      case ReduceOp::bxor:
        acc = static_cast<double>(static_cast<int64_t>(acc) ^ static_cast<int64_t>(v));
        break;
    }
  }
  if (p.op == ReduceOp::avg) {
    acc /= world_size;
    if (is_integer(p.dtype)) acc = std::trunc(acc);
  }
  return acc;
}

}  // namespace

void fill_inputs(OpKind kind, const CaseShape& shape, const BenchParams& p, int rank,
                 int world_size, const CallBuffers& buffers, void* recv_buffer) {
  if (kind == OpKind::barrier) return;
  std::memset(recv_buffer, 0, shape.bytes);
  auto fill = [&](size_t n) {
    for (size_t k = 0; k < n; ++k) {
      store(buffers.send, k, p.dtype, input_value(p.op, rank, k, world_size));
    }
  };
  switch (kind) {
    case OpKind::broadcast:
      if (rank == p.root) fill(shape.count);
      break;
    case OpKind::allreduce:
    case OpKind::reduce:
    case OpKind::allgather:
    case OpKind::gather:
      fill(shape.count);
      break;
    default:  // reduce_scatter, scatter, alltoall: a block for every rank
      fill(shape.total_count);
      break;
  }
}

size_t count_wrong(OpKind kind, const CaseShape& shape, const BenchParams& p, int rank,
                   int world_size, const void* recv) {
  const size_t c = shape.count;
  const size_t me = static_cast<size_t>(rank);
  size_t wrong = 0;
  auto expect = [&](size_t i, double value) {
    if (!matches(load(recv, i, p.dtype), value, p.dtype)) ++wrong;
  };
  switch (kind) {
    case OpKind::allreduce:
      for (size_t k = 0; k < c; ++k) expect(k, reduced_value(p, k, world_size));
      break;
    case OpKind::reduce:
      if (rank != p.root) break;
      for (size_t k = 0; k < c; ++k) expect(k, reduced_value(p, k, world_size));
      break;
    case OpKind::broadcast:
      for (size_t k = 0; k < c; ++k) expect(k, input_value(p.op, p.root, k, world_size));
      break;
    case OpKind::gather:
      if (rank != p.root) break;
      [[fallthrough]];
    case OpKind::allgather:
      for (int b = 0; b < world_size; ++b) {
        for (size_t j = 0; j < c; ++j) expect(b * c + j, input_value(p.op, b, j, world_size));
      }
      break;
    case OpKind::reduce_scatter:
      for (size_t j = 0; j < c; ++j) expect(j, reduced_value(p, me * c + j, world_size));
      break;
    case OpKind::scatter:
      for (size_t j = 0; j < c; ++j) expect(j, input_value(p.op, p.root, me * c + j, world_size));
      break;
    case OpKind::alltoall:
      for (int s = 0; s < world_size; ++s) {
        for (size_t j = 0; j < c; ++j) {
          expect(s * c + j, input_value(p.op, s, me * c + j, world_size));
        }
      }
      break;
    default:
      break;
  }
  return wrong;
}

}  // namespace weft::bench
