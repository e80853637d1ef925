// Scalar fp16 / bf16 <-> fp32 conversions on bit patterns, round to nearest even.
//
// Branch-light integer code, identical bit for bit to the x86 F16C instructions (vcvtph2ps /
// vcvtps2ph with round-to-nearest-even): a NaN keeps its sign and the top payload bits and comes
// out quiet; infinities and signed zeros are preserved; fp16 subnormals are produced and read.
// bf16 -> fp32 is an exact 16-bit shift (a NaN stays the same NaN); fp32 -> bf16 rounds to
// nearest even and turns a NaN into a quiet NaN. Denormals are never flushed.
//
// Every function has internal linkage on purpose: this header is compiled into translation units
// built with different -m flags (kernels_avx2.cc, kernels_avx512.cc), and an inline function with
// external linkage would let the linker keep the AVX-512 copy for every caller.
#pragma once

#include <cstdint>

namespace weft::reduce_detail {
namespace {

inline uint32_t f32_bits(float f) { return __builtin_bit_cast(uint32_t, f); }
inline float f32_from_bits(uint32_t u) { return __builtin_bit_cast(float, u); }

inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) {  // inf, or NaN made quiet
    return f32_from_bits(sign | 0x7f800000u | (mant != 0 ? (0x400000u | (mant << 13)) : 0u));
  }
  if (exp != 0) return f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
  // Zero or subnormal: mant * 2^-24 is exact in fp32.
  const float magnitude = static_cast<float>(mant) * 0x1p-24f;
  return f32_from_bits(sign | f32_bits(magnitude));
}

inline uint16_t float_to_half_bits(float f) {
  uint32_t x = f32_bits(f);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) {  // inf, or NaN: quiet, keep the top 9 payload bits
    if (x == 0x7f800000u) return sign | 0x7c00u;
    return static_cast<uint16_t>(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
  }
  if (x >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to infinity
  if (x >= 0x38800000u) {                       // normal fp16 (>= 2^-14)
    const uint32_t odd = (x >> 13) & 1u;
    x += 0xc8000000u + 0xfffu + odd;  // rebias exponent by -112, round to nearest even
    return static_cast<uint16_t>(sign | (x >> 13));
  }
  if (x <= 0x33000000u) return sign;  // <= 2^-25 (half the smallest subnormal) rounds to zero
  // Subnormal: the result is round(f * 2^24) = mant24 >> shift, rounded to nearest even.
  const uint32_t exp = x >> 23;
  const uint32_t mant = (x & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - exp;  // 14..24
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1u);
  uint32_t h = mant >> shift;
  if (rem > halfway || (rem == halfway && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

inline float bf16_bits_to_float(uint16_t b) {
  return f32_from_bits(static_cast<uint32_t>(b) << 16);
}

// Written without branches so that loops over it vectorise.
inline uint16_t float_to_bf16_bits(float f) {
  const uint32_t x = f32_bits(f);
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (x >> 16) | 0x40u;
  return static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

}  // namespace
}  // namespace weft::reduce_detail
