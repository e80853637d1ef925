// Reduction kernels for CPUs with AVX2 and F16C: this file alone is compiled with -mavx2 -mf16c
// (see CMakeLists.txt) and is only called after __builtin_cpu_supports says the CPU has both.
#include <immintrin.h>

#include "reduce/kernels.h"

namespace weft::reduce_detail {
namespace {

// fp16 <-> fp32 eight at a time with vcvtph2ps / vcvtps2ph (round to nearest even).
struct F16c256Conv {
  static void to_f32(float* out, const void* in, size_t n) {
    const auto* p = static_cast<const unsigned char*>(in);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i));
      _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
    }
    if (i < n) {
      alignas(16) unsigned char h[16] = {};
      alignas(32) float f[8];
      __builtin_memcpy(h, p + 2 * i, 2 * (n - i));
      _mm256_store_ps(f, _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h))));
      __builtin_memcpy(out + i, f, 4 * (n - i));
    }
  }
  static void from_f32(void* out, const float* in, size_t n) {
    auto* p = static_cast<unsigned char*>(out);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(p + 2 * i), h);
    }
    if (i < n) {
      alignas(32) float f[8] = {};
      alignas(16) unsigned char h[16];
      __builtin_memcpy(f, in + i, 4 * (n - i));
      _mm_store_si128(reinterpret_cast<__m128i*>(h),
                      _mm256_cvtps_ph(_mm256_load_ps(f), _MM_FROUND_TO_NEAREST_INT));
      __builtin_memcpy(p + 2 * i, h, 2 * (n - i));
    }
  }
};

constexpr KernelTable kAvx2Table = make_table<F16c256Conv>("avx2");

}  // namespace

const KernelTable& kernels_avx2() { return kAvx2Table; }

}  // namespace weft::reduce_detail
