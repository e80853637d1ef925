// Typed test data for the collective sweeps: inputs that keep every dtype x op exact (small
// integers; products of at most two 2s), element access through doubles, and comparison with a
// tolerance for results that are rounded (avg, and fp16/bf16 storage).
//
// The fp16/bf16 conversions here are written independently of the library's kernels on purpose.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "weft/types.h"

namespace weft::harness {

inline const std::vector<DataType>& all_dtypes() {
  static const std::vector<DataType> v = {DataType::int8, DataType::uint8, DataType::int32,
                                          DataType::int64, DataType::fp16,  DataType::bf16,
                                          DataType::fp32,  DataType::fp64};
  return v;
}
inline const std::vector<ReduceOp>& all_ops() {
  static const std::vector<ReduceOp> v = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min,
                                          ReduceOp::max, ReduceOp::avg};
  return v;
}

// The ops defined for t: every op, plus the bitwise ones for integer types.
inline const std::vector<ReduceOp>& ops_for(DataType t) {
  static const std::vector<ReduceOp> integer = {ReduceOp::sum,  ReduceOp::prod, ReduceOp::min,
                                                ReduceOp::max,  ReduceOp::avg,  ReduceOp::band,
                                                ReduceOp::bor,  ReduceOp::bxor};
  return is_integer(t) ? integer : all_ops();
}

// The dtype x op pairs the sweeps run at their larger counts (every pair runs at the small ones):
// every dtype with sum and avg (the kernels' add and finishing paths), every op with one type of
// each family (int8, bf16, fp32).
inline bool representative(DataType t, ReduceOp op) {
  return op == ReduceOp::sum || op == ReduceOp::avg || t == DataType::int8 ||
         t == DataType::bf16 || t == DataType::fp32;
}

inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(man), -24);
  } else if (exp == 31) {
    v = man == 0 ? INFINITY : NAN;
  } else {
    v = std::ldexp(static_cast<float>(man | 0x400), static_cast<int>(exp) - 25);
  }
  return sign ? -v : v;
}

// Round to nearest even through double arithmetic: exact for every value the tests produce.
inline uint16_t float_to_half_bits(float f) {
  if (std::isnan(f)) return 0x7e00;
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  double a = std::fabs(static_cast<double>(f));
  if (a >= 65520.0) return sign | 0x7c00;
  if (a < std::ldexp(1.0, -14)) {  // subnormal: units of 2^-24
    return sign | static_cast<uint16_t>(std::nearbyint(a * std::ldexp(1.0, 24)));
  }
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const double unit = std::ldexp(1.0, e - 11);
  double q = std::nearbyint(a / unit) * unit;
  std::frexp(q, &e);
  const int exp = e - 1 + 15;
  const uint32_t man = static_cast<uint32_t>(std::ldexp(q, 10 - (e - 1))) & 0x3ff;
  if (exp >= 31) return sign | 0x7c00;
  return sign | static_cast<uint16_t>(exp << 10) | static_cast<uint16_t>(man);
}

inline float bf16_bits_to_float(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}
inline uint16_t float_to_bf16_bits(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return 0x7fc0;
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

inline double load(DataType t, const void* base, size_t i) {
  const auto* p = static_cast<const std::byte*>(base) + i * dtype_size(t);
  switch (t) {
    case DataType::int8: { int8_t v; std::memcpy(&v, p, 1); return v; }
    case DataType::uint8: { uint8_t v; std::memcpy(&v, p, 1); return v; }
    case DataType::int32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case DataType::int64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case DataType::fp16: { uint16_t v; std::memcpy(&v, p, 2); return half_bits_to_float(v); }
    case DataType::bf16: { uint16_t v; std::memcpy(&v, p, 2); return bf16_bits_to_float(v); }
    case DataType::fp32: { float v; std::memcpy(&v, p, 4); return v; }
    case DataType::fp64: { double v; std::memcpy(&v, p, 8); return v; }
  }
  return 0;
}

inline void store(DataType t, void* base, size_t i, double x) {
  auto* p = static_cast<std::byte*>(base) + i * dtype_size(t);
  switch (t) {
    case DataType::int8: { auto v = static_cast<int8_t>(x); std::memcpy(p, &v, 1); return; }
    case DataType::uint8: { auto v = static_cast<uint8_t>(x); std::memcpy(p, &v, 1); return; }
    case DataType::int32: { auto v = static_cast<int32_t>(x); std::memcpy(p, &v, 4); return; }
    case DataType::int64: { auto v = static_cast<int64_t>(x); std::memcpy(p, &v, 8); return; }
    case DataType::fp16: {
      uint16_t v = float_to_half_bits(static_cast<float>(x));
      std::memcpy(p, &v, 2);
      return;
    }
    case DataType::bf16: {
      uint16_t v = float_to_bf16_bits(static_cast<float>(x));
      std::memcpy(p, &v, 2);
      return;
    }
    case DataType::fp32: { auto v = static_cast<float>(x); std::memcpy(p, &v, 4); return; }
    case DataType::fp64: std::memcpy(p, &x, 8); return;
  }
}

// x rounded as storing it in `t` would.
inline double representable(DataType t, double x) {
  std::byte buf[8];
  store(t, buf, 0, x);
  return load(t, buf, 0);
}


// The input of element i on rank `rank`, chosen so the reduction over up to 8 ranks is exact in
// every dtype: sums stay within [-120, 240], products within [-4, 4], min/max inputs within
// [-100, 200) (all exact even in bf16).
inline double input_value(int rank, size_t i, DataType t, ReduceOp op) {
  const bool unsigned_type = t == DataType::uint8;
  const long k = static_cast<long>(i % 1000003);
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: {
      const long v = (rank * 7 + k * 3) % 31;
      return static_cast<double>(unsigned_type ? v : v - 15);
    }
    case ReduceOp::prod: {
      if ((rank + k) % 5 == 0) return 2;
      if (!unsigned_type && (rank + 2 * k) % 3 == 0) return -1;
      return 1;
    }
    case ReduceOp::min:
    case ReduceOp::max: {
      const long v = (rank * 13 + k * 7) % 200;
      return static_cast<double>(unsigned_type ? v : v - 100);
    }
    case ReduceOp::band:
    case ReduceOp::bor:
    case ReduceOp::bxor:
      return static_cast<double>((rank * 37 + k * 11 + 5) % 128);  // integer types only
  }
  return 0;
}

// OP over the values of ranks 0..n-1 (already representable), finished for avg and rounded to t.
template <typename ValueOfRank>
double reference(DataType t, ReduceOp op, int n, ValueOfRank value_of_rank) {
  double acc = value_of_rank(0);
  for (int r = 1; r < n; ++r) {
    const double v = value_of_rank(r);
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: acc += v; break;
      case ReduceOp::prod: acc *= v; break;
      case ReduceOp::min: acc = std::min(acc, v); break;
      case ReduceOp::max: acc = std::max(acc, v); break;
      case ReduceOp::band: acc = static_cast<double>(static_cast<int64_t>(acc) & static_cast<int64_t>(v)); break;
      case ReduceOp::bor: acc = static_cast<double>(static_cast<int64_t>(acc) | static_cast<int64_t>(v)); break;
      case ReduceOp::bxor: acc = static_cast<double>(static_cast<int64_t>(acc) ^ static_cast<int64_t>(v)); break;
    }
  }
  if (op == ReduceOp::avg) {
    if (is_integer(t)) return static_cast<double>(static_cast<int64_t>(acc) / n);
    acc /= n;
  }
  return representable(t, acc);
}

// Exact for integers; within rounding of the storage type otherwise.
inline bool close_enough(DataType t, double got, double want) {
  if (is_integer(t)) return got == want;
  double rel;
  switch (t) {
    case DataType::fp16: rel = 2e-3; break;
    case DataType::bf16: rel = 1.6e-2; break;
    case DataType::fp32: rel = 1e-6; break;
    default: rel = 1e-12; break;
  }
  return std::fabs(got - want) <= rel * std::max(1.0, std::fabs(want));
}

// A buffer of `count` elements of `t`, element i = value(i).
template <typename Value>
std::vector<std::byte> make_buffer(DataType t, size_t count, Value value) {
  std::vector<std::byte> b(count * dtype_size(t));
  for (size_t i = 0; i < count; ++i) store(t, b.data(), i, value(i));
  return b;
}

// Compares `count` elements of `got` with want(i); returns "" or the first difference.
template <typename Want>
std::string compare(DataType t, const void* got, size_t count, Want want) {
  for (size_t i = 0; i < count; ++i) {
    const double g = load(t, got, i), w = want(i);
    if (!close_enough(t, g, w)) {
      return fmt::format("element {} of {}: got {} want {}", i, count, g, w);
    }
  }
  return "";
}

inline constexpr std::byte kSentinel{0xA5};

// True when all bytes equal kSentinel (buffers the collective must not touch).
inline bool untouched(const std::vector<std::byte>& b) {
  for (std::byte x : b) {
    if (x != kSentinel) return false;
  }
  return true;
}

}  // namespace weft::harness
