// The reduction loops, written once as templates over element type x op x Form and compiled once
// per instruction set (kernels_<isa>.cc) into a KernelTable.
//
// The loops are plain C++ that GCC auto-vectorises at -O3 (the __restrict parameters tell it the
// buffers do not alias, the aligned(1) element typedefs make unaligned buffers legal). fp16 goes
// through fp32 in small blocks converted by the TU's `HalfConv` policy (F16C instructions where
// the TU may use them); bf16 converts inline with shifts, which vectorises as it stands.
//
// Everything here has internal linkage (anonymous namespace, no std:: functions called): each
// including TU is compiled with different -m flags, and a shared inline/template instantiation
// would let the linker hand AVX-512 code to the baseline table. Include from kernels_*.cc only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "reduce/half_bits.h"
#include "reduce/kernel_table.h"

namespace weft::reduce_detail {
namespace {

// An element type with alignment 1: buffers may start at any byte address. Spell pointer types
// out: `auto` deduction drops the attribute and GCC would assume natural alignment again.
template <typename T>
struct UnalignedOf {
  typedef T __attribute__((aligned(1))) type;
};
template <typename T>
using Unaligned = typename UnalignedOf<T>::type;

// Integer sum/prod wrap modulo 2^bits (computed unsigned, so no undefined behaviour).
struct SumOp {
  template <typename T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using UT = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<UT>(a) + static_cast<UT>(b));
    } else {
      return a + b;
    }
  }
};

struct ProdOp {
  template <typename T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using UT = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<UT>(a) * static_cast<UT>(b));
    } else {
      return a * b;
    }
  }
};

// Bitwise ops: integer types only.
struct BandOp {
  template <typename T>
  static T apply(T a, T b) { return static_cast<T>(a & b); }
};
struct BorOp {
  template <typename T>
  static T apply(T a, T b) { return static_cast<T>(a | b); }
};
struct BxorOp {
  template <typename T>
  static T apply(T a, T b) { return static_cast<T>(a ^ b); }
};

// Floating min/max propagate NaN: if either input is NaN the result is NaN (a's NaN when both
// are). Otherwise the smaller/larger value; on a tie (including -0 vs +0) the result is b.
struct MinOp {
  template <typename T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return (a < b || a != a) ? a : b;
    } else {
      return a < b ? a : b;
    }
  }
};

struct MaxOp {
  template <typename T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return (a > b || a != a) ? a : b;
    } else {
      return a > b ? a : b;
    }
  }
};

// bf16 bits in, bf16 bits out: widen (exact), combine in fp32, round to nearest even.
template <typename Op>
struct Bf16Op {
  template <typename T>
  static T apply(T a, T b) {
    static_assert(std::is_same_v<T, uint16_t>);
    return float_to_bf16_bits(Op::apply(bf16_bits_to_float(a), bf16_bits_to_float(b)));
  }
};

template <typename T, typename Op>
inline void loop_separate(Unaligned<T>* __restrict d, const Unaligned<T>* __restrict a,
                          const Unaligned<T>* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = Op::template apply<T>(a[i], b[i]);
}

template <typename T, typename Op>
inline void loop_into_a(Unaligned<T>* __restrict d, const Unaligned<T>* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = Op::template apply<T>(d[i], b[i]);
}

template <typename T, typename Op>
inline void loop_into_b(const Unaligned<T>* __restrict a, Unaligned<T>* __restrict d, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = Op::template apply<T>(a[i], d[i]);
}

template <Form F, typename T, typename Op>
void combine(void* dst, const void* a, const void* b, size_t n) {
  Unaligned<T>* d = static_cast<Unaligned<T>*>(dst);
  const Unaligned<T>* pa = static_cast<const Unaligned<T>*>(a);
  const Unaligned<T>* pb = static_cast<const Unaligned<T>*>(b);
  if constexpr (F == Form::separate) {
    loop_separate<T, Op>(d, pa, pb, n);
  } else if constexpr (F == Form::into_a) {
    loop_into_a<T, Op>(d, pb, n);
  } else {
    loop_into_b<T, Op>(pa, d, n);
  }
}

// fp16: per block, widen a and b to fp32, combine, round back. The whole block is read before
// any of it is written, so one function serves every Form.
inline constexpr size_t kHalfBlock = 512;

template <typename HalfConv, typename Op>
void combine_half(void* dst, const void* a, const void* b, size_t n) {
  alignas(64) float fa[kHalfBlock];
  alignas(64) float fb[kHalfBlock];
  auto* d = static_cast<unsigned char*>(dst);
  const auto* pa = static_cast<const unsigned char*>(a);
  const auto* pb = static_cast<const unsigned char*>(b);
  for (size_t i = 0; i < n; i += kHalfBlock) {
    const size_t m = n - i < kHalfBlock ? n - i : kHalfBlock;
    HalfConv::to_f32(fa, pa + 2 * i, m);
    HalfConv::to_f32(fb, pb + 2 * i, m);
    loop_into_a<float, Op>(fa, fb, m);
    HalfConv::from_f32(d + 2 * i, fa, m);
  }
}

template <typename T>
void scale(void* buf, size_t n, int divisor) {
  Unaligned<T>* p = static_cast<Unaligned<T>*>(buf);
  if constexpr (std::is_integral_v<T>) {
    // Promoted to int / int64_t: C++ division truncates toward zero.
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] / divisor);
  } else {
    const T dv = static_cast<T>(divisor);
    for (size_t i = 0; i < n; ++i) p[i] = p[i] / dv;
  }
}

void scale_bf16(void* buf, size_t n, int divisor) {
  Unaligned<uint16_t>* p = static_cast<Unaligned<uint16_t>*>(buf);
  const float dv = static_cast<float>(divisor);
  for (size_t i = 0; i < n; ++i) p[i] = float_to_bf16_bits(bf16_bits_to_float(p[i]) / dv);
}

template <typename HalfConv>
void scale_half(void* buf, size_t n, int divisor) {
  alignas(64) float f[kHalfBlock];
  auto* p = static_cast<unsigned char*>(buf);
  const float dv = static_cast<float>(divisor);
  for (size_t i = 0; i < n; i += kHalfBlock) {
    const size_t m = n - i < kHalfBlock ? n - i : kHalfBlock;
    HalfConv::to_f32(f, p + 2 * i, m);
    for (size_t j = 0; j < m; ++j) f[j] = f[j] / dv;
    HalfConv::from_f32(p + 2 * i, f, m);
  }
}

// Portable fp16 policy: the scalar bit conversions, one element at a time.
struct SoftHalfConv {
  static void to_f32(float* __restrict out, const void* in, size_t n) {
    const Unaligned<uint16_t>* p = static_cast<const Unaligned<uint16_t>*>(in);
    for (size_t i = 0; i < n; ++i) out[i] = half_bits_to_float(p[i]);
  }
  static void from_f32(void* out, const float* __restrict in, size_t n) {
    Unaligned<uint16_t>* p = static_cast<Unaligned<uint16_t>*>(out);
    for (size_t i = 0; i < n; ++i) p[i] = float_to_half_bits(in[i]);
  }
};

constexpr int index_of(DataType t) { return static_cast<int>(t); }

template <typename HalfConv, Form F, typename Op>
constexpr void fill_op(KernelTable& t, int op) {
  auto& row = t.combine[static_cast<int>(F)];
  row[index_of(DataType::int8)][op] = &combine<F, int8_t, Op>;
  row[index_of(DataType::uint8)][op] = &combine<F, uint8_t, Op>;
  row[index_of(DataType::int32)][op] = &combine<F, int32_t, Op>;
  row[index_of(DataType::int64)][op] = &combine<F, int64_t, Op>;
  row[index_of(DataType::fp16)][op] = &combine_half<HalfConv, Op>;
  row[index_of(DataType::bf16)][op] = &combine<F, uint16_t, Bf16Op<Op>>;
  row[index_of(DataType::fp32)][op] = &combine<F, float, Op>;
  row[index_of(DataType::fp64)][op] = &combine<F, double, Op>;
}

template <Form F, typename Op>
constexpr void fill_integer_op(KernelTable& t, int op) {
  auto& row = t.combine[static_cast<int>(F)];
  row[index_of(DataType::int8)][op] = &combine<F, int8_t, Op>;
  row[index_of(DataType::uint8)][op] = &combine<F, uint8_t, Op>;
  row[index_of(DataType::int32)][op] = &combine<F, int32_t, Op>;
  row[index_of(DataType::int64)][op] = &combine<F, int64_t, Op>;
}

template <typename HalfConv, Form F>
constexpr void fill_form(KernelTable& t) {
  fill_op<HalfConv, F, SumOp>(t, static_cast<int>(ReduceOp::sum));
  fill_op<HalfConv, F, ProdOp>(t, static_cast<int>(ReduceOp::prod));
  fill_op<HalfConv, F, MinOp>(t, static_cast<int>(ReduceOp::min));
  fill_op<HalfConv, F, MaxOp>(t, static_cast<int>(ReduceOp::max));
  fill_integer_op<F, BandOp>(t, kBandIndex);
  fill_integer_op<F, BorOp>(t, kBorIndex);
  fill_integer_op<F, BxorOp>(t, kBxorIndex);
}

template <typename HalfConv>
constexpr KernelTable make_table(const char* name) {
  KernelTable t{};
  t.name = name;
  fill_form<HalfConv, Form::separate>(t);
  fill_form<HalfConv, Form::into_a>(t);
  fill_form<HalfConv, Form::into_b>(t);
  t.scale[index_of(DataType::int8)] = &scale<int8_t>;
  t.scale[index_of(DataType::uint8)] = &scale<uint8_t>;
  t.scale[index_of(DataType::int32)] = &scale<int32_t>;
  t.scale[index_of(DataType::int64)] = &scale<int64_t>;
  t.scale[index_of(DataType::fp16)] = &scale_half<HalfConv>;
  t.scale[index_of(DataType::bf16)] = &scale_bf16;
  t.scale[index_of(DataType::fp32)] = &scale<float>;
  t.scale[index_of(DataType::fp64)] = &scale<double>;
  return t;
}

}  // namespace
}  // namespace weft::reduce_detail
