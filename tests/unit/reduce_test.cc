// Reduction kernels (src/reduce): every dtype x op x kernel table against a scalar reference, on
// unaligned buffers; fp16/bf16 conversions exhaustively against independent reference rounding.
#include "reduce/reduce.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "reduce/kernel_table.h"

namespace weft {
namespace {

using reduce_detail::Isa;

constexpr DataType kAllTypes[] = {DataType::int8, DataType::uint8, DataType::int32, DataType::int64,
                                  DataType::fp16, DataType::bf16,  DataType::fp32,  DataType::fp64};
constexpr ReduceOp kAllOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max,
                                ReduceOp::avg};
constexpr int kAvgRanks = 3;

bool is_nan16(uint16_t h, DataType t) {
  return t == DataType::fp16 ? (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0
                             : (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
}

// ---- scalar reference: the documented semantics, one element at a time ----------------------

template <typename T>
T ref_op(T a, T b, ReduceOp op) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case ReduceOp::prod: return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
      case ReduceOp::min: return std::min(a, b);
      case ReduceOp::max: return std::max(a, b);
      default: return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    }
  } else {
    switch (op) {
      case ReduceOp::prod: return a * b;
      case ReduceOp::min: return std::isnan(a) ? a : std::isnan(b) ? b : (a < b ? a : b);
      case ReduceOp::max: return std::isnan(a) ? a : std::isnan(b) ? b : (a > b ? a : b);
      default: return a + b;
    }
  }
}

template <typename T>
T ref_scale(T v, int n) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<int64_t>(v) / n);
  } else {
    return v / static_cast<T>(n);
  }
}

// Combines element i of a and b (raw bytes) and writes it to out; avg also scales (n ranks).
template <typename T>
void ref_typed(DataType t, unsigned char* out, const unsigned char* a, const unsigned char* b,
               ReduceOp op) {
  T x, y;
  std::memcpy(&x, a, sizeof(T));
  std::memcpy(&y, b, sizeof(T));
  T r = ref_op(x, y, op);
  if (op == ReduceOp::avg) r = ref_scale(r, kAvgRanks);
  (void)t;
  std::memcpy(out, &r, sizeof(T));
}

void ref_half(DataType t, unsigned char* out, const unsigned char* a, const unsigned char* b,
              ReduceOp op) {
  auto widen = t == DataType::fp16 ? half_to_float : bf16_to_float;
  auto narrow = t == DataType::fp16 ? float_to_half : float_to_bf16;
  uint16_t x, y;
  std::memcpy(&x, a, 2);
  std::memcpy(&y, b, 2);
  uint16_t r = narrow(ref_op(widen(x), widen(y), op));
  if (op == ReduceOp::avg) r = narrow(widen(r) / static_cast<float>(kAvgRanks));
  std::memcpy(out, &r, 2);
}

void ref_element(DataType t, unsigned char* out, const unsigned char* a, const unsigned char* b,
                 ReduceOp op) {
  switch (t) {
    case DataType::int8: return ref_typed<int8_t>(t, out, a, b, op);
    case DataType::uint8: return ref_typed<uint8_t>(t, out, a, b, op);
    case DataType::int32: return ref_typed<int32_t>(t, out, a, b, op);
    case DataType::int64: return ref_typed<int64_t>(t, out, a, b, op);
    case DataType::fp16:
    case DataType::bf16: return ref_half(t, out, a, b, op);
    case DataType::fp32: return ref_typed<float>(t, out, a, b, op);
    case DataType::fp64: return ref_typed<double>(t, out, a, b, op);
  }
}

// Bitwise equality, except that any NaN equals any NaN (payload choice is not specified).
bool same_element(DataType t, const unsigned char* x, const unsigned char* y) {
  if (t == DataType::fp16 || t == DataType::bf16) {
    uint16_t p, q;
    std::memcpy(&p, x, 2);
    std::memcpy(&q, y, 2);
    return p == q || (is_nan16(p, t) && is_nan16(q, t));
  }
  if (t == DataType::fp32) {
    float p, q;
    std::memcpy(&p, x, 4);
    std::memcpy(&q, y, 4);
    if (std::isnan(p) || std::isnan(q)) return std::isnan(p) && std::isnan(q);
  }
  if (t == DataType::fp64) {
    double p, q;
    std::memcpy(&p, x, 8);
    std::memcpy(&q, y, 8);
    if (std::isnan(p) || std::isnan(q)) return std::isnan(p) && std::isnan(q);
  }
  return std::memcmp(x, y, dtype_size(t)) == 0;
}

// Random contents: integers over their whole range; fp16/bf16 random bit patterns (NaN, inf and
// subnormals included); fp32/fp64 moderate values with a special value every 61 elements.
std::vector<unsigned char> random_bytes(DataType t, size_t count, uint32_t seed) {
  const size_t es = dtype_size(t);
  std::vector<unsigned char> out(count * es);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> value(-4.0, 4.0);
  const double specials[] = {std::numeric_limits<double>::quiet_NaN(),
                             std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(),
                             -0.0,
                             0.0,
                             1e-310,
                             1e-40,
                             3e38,
                             -3e38,
                             1e300};
  for (size_t i = 0; i < count; ++i) {
    unsigned char* p = out.data() + i * es;
    if (t == DataType::fp32 || t == DataType::fp64) {
      const size_t k = i + 17 * seed;  // specials sit at different places in a and b
      double v = k % 61 == 0 ? specials[(k / 61) % std::size(specials)] : value(rng);
      if (t == DataType::fp32) {
        auto f = static_cast<float>(v);
        std::memcpy(p, &f, 4);
      } else {
        std::memcpy(p, &v, 8);
      }
    } else {
      uint64_t bits = rng();
      std::memcpy(p, &bits, es);
    }
  }
  return out;
}

// ---- every dtype x op x table, on every way dst can relate to the inputs --------------------

constexpr size_t kCounts[] = {0, 1, 7, 1000003};
constexpr size_t kMaxCount = 1000003;

// Runs `fn` once with each kernel table this CPU supports forced, then restores the default.
template <typename Fn>
void for_each_isa(Fn fn) {
  const Isa saved = reduce_detail::active_isa();
  for (Isa isa : {Isa::generic, Isa::avx2, Isa::avx512}) {
    if (!reduce_detail::force_isa(isa)) continue;
    SCOPED_TRACE(reduce_detail::to_string(isa));
    fn(isa);
  }
  ASSERT_TRUE(reduce_detail::force_isa(saved));
}

enum class Alias { separate, into_a, into_b, self };

std::vector<unsigned char> reference(DataType t, ReduceOp op, const std::vector<unsigned char>& a,
                                     const std::vector<unsigned char>& b) {
  const size_t es = dtype_size(t);
  std::vector<unsigned char> out(a.size());
  for (size_t i = 0; i < a.size(); i += es) ref_element(t, &out[i], &a[i], &b[i], op);
  return out;
}

// Runs one case on buffers at odd byte offsets and compares the first `count` elements.
void check_case(DataType t, ReduceOp op, size_t count, Alias alias,
                const std::vector<unsigned char>& a, const std::vector<unsigned char>& b,
                const std::vector<unsigned char>& expect) {
  const size_t es = dtype_size(t), bytes = count * es;
  static std::vector<unsigned char> slab;
  slab.resize(3 * (kMaxCount * 8 + 64));
  unsigned char* pa = slab.data() + 1;
  unsigned char* pb = pa + bytes + 66;
  unsigned char* pd = pb + bytes + 3;
  std::memcpy(pa, a.data(), bytes);
  std::memcpy(pb, b.data(), bytes);
  unsigned char* result = pd;
  switch (alias) {
    case Alias::separate: reduce_out_of_place(pd, pa, pb, count, t, op); break;
    case Alias::into_a:
      reduce_into(pa, pb, count, t, op);
      result = pa;
      break;
    case Alias::into_b:
      reduce_out_of_place(pb, pa, pb, count, t, op);
      result = pb;
      break;
    case Alias::self:
      reduce_out_of_place(pa, pa, pa, count, t, op);
      result = pa;
      break;
  }
  if (op == ReduceOp::avg) scale_for_avg(result, count, t, kAvgRanks);
  if (count == 0 || std::memcmp(result, expect.data(), bytes) == 0) return;
  size_t bad = 0;
  for (size_t i = 0; i < count && bad < 5; ++i) {
    if (!same_element(t, result + i * es, &expect[i * es])) {
      ++bad;
      ADD_FAILURE() << to_string(t) << " " << to_string(op) << " count " << count << " alias "
                    << static_cast<int>(alias) << ": element " << i << " differs";
    }
  }
}

class ReduceSweep : public ::testing::TestWithParam<DataType> {};

TEST_P(ReduceSweep, EveryOpTableCountAndAliasingMatchesReference) {
  const DataType t = GetParam();
  const auto a = random_bytes(t, kMaxCount, 1);
  const auto b = random_bytes(t, kMaxCount, 2);
  for (ReduceOp op : kAllOps) {
    const auto expect_ab = reference(t, op, a, b);
    const auto expect_aa = reference(t, op, a, a);
    for_each_isa([&](Isa) {
      for (size_t count : kCounts) {
        for (Alias alias : {Alias::separate, Alias::into_a, Alias::into_b, Alias::self}) {
          check_case(t, op, count, alias, a, b, alias == Alias::self ? expect_aa : expect_ab);
        }
      }
    });
  }
}

INSTANTIATE_TEST_SUITE_P(Reduce, ReduceSweep, ::testing::ValuesIn(kAllTypes),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// Bitwise and/or/xor on every integer type, every table and aliasing, against the operators; on
// floating types they are undefined and leave the destination untouched.
template <typename T>
void check_bitwise() {
  std::vector<T> a(1001), b(1001);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<T>(i * 2654435761u);
    b[i] = static_cast<T>(i * 40503u + 7);
  }
  constexpr DataType t = std::is_same_v<T, int8_t>    ? DataType::int8
                         : std::is_same_v<T, uint8_t> ? DataType::uint8
                         : std::is_same_v<T, int32_t> ? DataType::int32
                                                      : DataType::int64;
  for_each_isa([&](Isa) {
    for (ReduceOp op : {ReduceOp::band, ReduceOp::bor, ReduceOp::bxor}) {
      std::vector<T> out(a.size()), into = a;
      reduce_out_of_place(out.data(), a.data(), b.data(), a.size(), t, op);
      reduce_into(into.data(), b.data(), b.size(), t, op);
      for (size_t i = 0; i < a.size(); ++i) {
        T want = op == ReduceOp::band  ? static_cast<T>(a[i] & b[i])
                 : op == ReduceOp::bor ? static_cast<T>(a[i] | b[i])
                                       : static_cast<T>(a[i] ^ b[i]);
        ASSERT_EQ(out[i], want) << to_string(op) << " element " << i;
        ASSERT_EQ(into[i], want) << to_string(op) << " in place, element " << i;
      }
    }
  });
}

TEST(ReduceKernels, BitwiseOpsOnIntegerTypes) {
  check_bitwise<int8_t>();
  check_bitwise<uint8_t>();
  check_bitwise<int32_t>();
  check_bitwise<int64_t>();
  std::vector<float> x(8, 1.5f), y(8, 2.5f);
  reduce_into(x.data(), y.data(), x.size(), DataType::fp32, ReduceOp::bxor);
  EXPECT_EQ(x[7], 1.5f);
}

// The vectorised fp16/bf16 paths (F16C in the avx tables) convert every bit pattern exactly as
// the scalar functions do, NaN payloads included: max(x, -inf) == round_trip(x).
TEST(ReduceKernels, HalfPathsConvertEveryPatternLikeScalar) {
  for_each_isa([](Isa) {
    for (DataType t : {DataType::fp16, DataType::bf16}) {
      std::vector<uint16_t> x(65536), y(65536, t == DataType::fp16 ? 0xfc00 : 0xff80);
      for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint16_t>(i);
      reduce_into(x.data(), y.data(), x.size(), t, ReduceOp::max);
      for (uint32_t i = 0; i < 65536; ++i) {
        auto h = static_cast<uint16_t>(i);
        uint16_t want =
            t == DataType::fp16 ? float_to_half(half_to_float(h)) : float_to_bf16(bf16_to_float(h));
        ASSERT_EQ(x[i], want) << to_string(t) << " pattern " << std::hex << i;
      }
    }
  });
}

TEST(ReduceKernels, DocumentedEdgeCases) {
  for_each_isa([](Isa) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    float a[4] = {nan, 1.0f, -0.0f, 0.0f}, b[4] = {1.0f, nan, 0.0f, -0.0f};
    float mn[4], mx[4];
    reduce_out_of_place(mn, a, b, 4, DataType::fp32, ReduceOp::min);
    reduce_out_of_place(mx, a, b, 4, DataType::fp32, ReduceOp::max);
    EXPECT_TRUE(std::isnan(mn[0]) && std::isnan(mn[1]) && std::isnan(mx[0]) && std::isnan(mx[1]));
    EXPECT_FALSE(std::signbit(mn[2]));  // a tie returns b
    EXPECT_TRUE(std::signbit(mx[3]));
    int8_t i8[2] = {127, -128}, one[2] = {1, -1};
    reduce_into(i8, one, 2, DataType::int8, ReduceOp::sum);
    EXPECT_EQ(i8[0], -128);
    EXPECT_EQ(i8[1], 127);
    int32_t v[4] = {-7, 7, -1, 5};
    scale_for_avg(v, 4, DataType::int32, 2);
    EXPECT_EQ(v[0], -3);  // truncation toward zero
    EXPECT_EQ(v[1], 3);
    EXPECT_EQ(v[2], 0);
    EXPECT_EQ(v[3], 2);
  });
}

TEST(ReduceDispatch, UsesTheBestTableTheCpuSupports) {
  const Isa best = reduce_detail::isa_supported(Isa::avx512) ? Isa::avx512
                   : reduce_detail::isa_supported(Isa::avx2) ? Isa::avx2
                                                             : Isa::generic;
  EXPECT_EQ(reduce_detail::active_isa(), best);
  EXPECT_STREQ(reduce_detail::active_kernels().name, reduce_detail::to_string(best));
}

// ---- conversions: exhaustive over the 16-bit patterns, against independent references -------

// Value of an fp16 pattern, computed in double from the definition.
double ref_half_value(uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0x1f) return m ? std::nan("") : sign * INFINITY;
  return sign * (e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25));
}

// fp16 round to nearest even, by exact arithmetic in double: scale to the fp16 quantum, rint
// (ties to even), then look the magnitude up among all finite fp16 values.
uint16_t ref_float_to_half(float f) {
  static const std::vector<double> positives = [] {
    std::vector<double> v;
    for (uint16_t h = 0; h < 0x7c00; ++h) v.push_back(ref_half_value(h));
    return v;
  }();
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 65520.0) return sign | 0x7c00;
  int exp;
  std::frexp(a, &exp);
  const double quantum = std::ldexp(1.0, std::max(exp - 1, -14) - 10);
  const double r = std::rint(a / quantum) * quantum;
  const auto it = std::lower_bound(positives.begin(), positives.end(), r);
  return sign | static_cast<uint16_t>(it - positives.begin());
}

// bf16 round to nearest even: pick the nearer of the two neighbouring bf16 values in double.
uint16_t ref_float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t lo_bits = x & 0xffff0000u;
  float lo;
  std::memcpy(&lo, &lo_bits, 4);
  const int e = static_cast<int>((x >> 23) & 0xff);
  const double ulp = std::ldexp(1.0, std::max(e, 1) - 127 - 7);
  const double d_lo = std::fabs(static_cast<double>(f) - lo), d_hi = ulp - d_lo;
  const bool up = d_hi < d_lo || (d_hi == d_lo && ((lo_bits >> 16) & 1));
  return static_cast<uint16_t>((lo_bits >> 16) + (up ? 1 : 0));
}

TEST(ReduceConversion, HalfToFloatMatchesDefinitionForAllPatterns) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float f = half_to_float(h);
    const double want = ref_half_value(h);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << i;
      ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0);
    } else {
      ASSERT_EQ(static_cast<double>(f), want) << std::hex << i;
      ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << i;
    }
  }
}

TEST(ReduceConversion, RoundTripsAllPatterns) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    // A NaN comes back quiet with its sign and payload; everything else exactly.
    ASSERT_EQ(float_to_half(half_to_float(h)), is_nan16(h, DataType::fp16) ? (h | 0x200) : h);
    ASSERT_EQ(float_to_bf16(bf16_to_float(h)), is_nan16(h, DataType::bf16) ? (h | 0x40) : h);
  }
}

// Every rounding boundary: each 16-bit value, the exact midpoints to its successor, the floats
// either side of those midpoints, plus a stride through all 2^32 float patterns.
TEST(ReduceConversion, FloatToHalfRoundsToNearestEven) {
  std::vector<float> probes;
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const auto mid = static_cast<float>(
        (ref_half_value(static_cast<uint16_t>(h)) + ref_half_value(static_cast<uint16_t>(h + 1))) /
        2);
    for (float f : {static_cast<float>(ref_half_value(static_cast<uint16_t>(h))), mid,
                    std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      probes.push_back(f);
      probes.push_back(-f);
    }
  }
  for (uint64_t x = 0; x < (1ull << 32); x += 65521) {
    float f;
    const auto bits = static_cast<uint32_t>(x);
    std::memcpy(&f, &bits, 4);
    probes.push_back(f);
  }
  for (float f : probes) {
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half(f), ref_float_to_half(f)) << std::hexfloat << f;
  }
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::quiet_NaN()) & 0x7e00, 0x7e00);
}

TEST(ReduceConversion, FloatToBf16RoundsToNearestEven) {
  for (uint32_t b = 0; b < 65536; ++b) {
    for (uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      const uint32_t bits = (b << 16) | low;
      float f;
      std::memcpy(&f, &bits, 4);
      if (std::isnan(f)) {
        const uint16_t got = float_to_bf16(f);
        ASSERT_TRUE(is_nan16(got, DataType::bf16)) << std::hex << bits;
        ASSERT_EQ(got & 0x8000u, (bits >> 16) & 0x8000u);
        continue;
      }
      ASSERT_EQ(float_to_bf16(f), ref_float_to_bf16(f)) << std::hex << bits;
    }
  }
}

}  // namespace
}  // namespace weft
