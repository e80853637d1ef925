// The per-instruction-set tables of reduction kernels behind reduce.h, and the runtime choice.
//
// The same templates (kernels.h) are compiled three times: for baseline x86-64 / any CPU
// (kernels_generic.cc), with -mavx2 -mf16c (kernels_avx2.cc) and with AVX-512 (kernels_avx512.cc).
// reduce.cc asks the CPU once (__builtin_cpu_supports) and uses the best table it can run, so the
// library itself is never built with -march=native and runs (e.g. under valgrind) on any x86-64.
// Every table produces bit-identical results for the same inputs (no FMA, no reassociation), so
// ranks on different CPUs agree. Tests may switch tables to check each one against a reference.
#pragma once

#include <cstddef>
#include <cstdint>

#include "weft/types.h"

namespace weft::reduce_detail {

// dst[i] = a[i] OP b[i]; which pointers may be equal depends on the Form the kernel was made for.
using CombineFn = void (*)(void* dst, const void* a, const void* b, size_t count);
// buf[i] = buf[i] / divisor (integers truncate toward zero), divisor >= 1.
using ScaleFn = void (*)(void* buf, size_t count, int divisor);

// How dst relates to the inputs; the kernels are compiled with __restrict for each case.
enum class Form : uint8_t {
  separate = 0,  // dst overlaps neither a nor b (a may equal b)
  into_a,        // dst == a, b is elsewhere
  into_b,        // dst == b, a is elsewhere
};
inline constexpr int kFormCount = 3;
// sum, prod, min, max, band, bor, bxor (the last three for integer types only; null otherwise);
// avg is computed as sum and finished by scale.
inline constexpr int kElementwiseOpCount = 7;
inline constexpr int kBandIndex = 4, kBorIndex = 5, kBxorIndex = 6;

struct KernelTable {
  const char* name;
  CombineFn combine[kFormCount][kDataTypeCount][kElementwiseOpCount];
  ScaleFn scale[kDataTypeCount];
};

enum class Isa : uint8_t { generic = 0, avx2, avx512 };

// kernels_avx2/avx512 exist only in x86-64 builds (reduce.cc sees WEFT_REDUCE_X86 there).
const KernelTable& kernels_generic();
const KernelTable& kernels_avx2();    // needs AVX2 + F16C
const KernelTable& kernels_avx512();  // needs AVX-512 F/BW/DQ/VL + F16C

const char* to_string(Isa isa);
// True when this build has the table and this CPU can run it.
bool isa_supported(Isa isa);
// The table reduce.h functions use now: the best supported one unless a test forced another.
Isa active_isa();
const KernelTable& active_kernels();
// For tests and benchmarks: use `isa` from now on. Returns false (and changes nothing) when it is
// not supported. Not meant to race with running reductions.
bool force_isa(Isa isa);

}  // namespace weft::reduce_detail
