// Reduction kernels for CPUs with AVX-512 (F, BW, DQ, VL) and F16C: this file alone is compiled
// with those -m flags and 512-bit vectors preferred (see CMakeLists.txt), and is only called
// after __builtin_cpu_supports says the CPU has them. valgrind cannot run AVX-512, but its virtual
// CPU does not report it either, so under valgrind the AVX2 table is chosen.
#include <immintrin.h>

#include "reduce/kernels.h"

namespace weft::reduce_detail {
namespace {

// The plain _mm512_cvtph_ps / _mm512_cvtps_ph start from an "undefined" register, which GCC 12
// reports as maybe-uninitialized; the all-lanes masked forms with a zero source are the same
// instructions without the warning.
inline __m512 cvt_to_f32(__m256i h) { return _mm512_mask_cvtph_ps(_mm512_setzero_ps(), 0xffff, h); }
inline __m256i cvt_to_f16(__m512 f) {
  return _mm512_mask_cvtps_ph(_mm256_setzero_si256(), 0xffff, f, _MM_FROUND_TO_NEAREST_INT);
}

// fp16 <-> fp32 sixteen at a time; the tail goes through a zero-padded stack block.
struct F16c512Conv {
  static void to_f32(float* out, const void* in, size_t n) {
    const auto* p = static_cast<const unsigned char*>(in);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2 * i));
      _mm512_storeu_ps(out + i, cvt_to_f32(h));
    }
    if (i < n) {
      alignas(32) unsigned char h[32] = {};
      alignas(64) float f[16];
      __builtin_memcpy(h, p + 2 * i, 2 * (n - i));
      _mm512_store_ps(f, cvt_to_f32(_mm256_load_si256(reinterpret_cast<const __m256i*>(h))));
      __builtin_memcpy(out + i, f, 4 * (n - i));
    }
  }
  static void from_f32(void* out, const float* in, size_t n) {
    auto* p = static_cast<unsigned char*>(out);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m256i h = cvt_to_f16(_mm512_loadu_ps(in + i));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(p + 2 * i), h);
    }
    if (i < n) {
      alignas(64) float f[16] = {};
      alignas(32) unsigned char h[32];
      __builtin_memcpy(f, in + i, 4 * (n - i));
      _mm256_store_si256(reinterpret_cast<__m256i*>(h), cvt_to_f16(_mm512_load_ps(f)));
      __builtin_memcpy(p + 2 * i, h, 2 * (n - i));
    }
  }
};

constexpr KernelTable kAvx512Table = make_table<F16c512Conv>("avx512");

}  // namespace

const KernelTable& kernels_avx512() { return kAvx512Table; }

}  // namespace weft::reduce_detail
