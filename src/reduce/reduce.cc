// reduce.h entry points: pick the kernel table for this CPU once, route each call to the kernel
// compiled for the way dst relates to the inputs.
#include "reduce/reduce.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <atomic>
#include <cstring>

#include "reduce/half_bits.h"
#include "reduce/kernel_table.h"

namespace weft {
namespace reduce_detail {
namespace {

const KernelTable* table_for(Isa isa) {
  switch (isa) {
    case Isa::generic: return &kernels_generic();
#if defined(WEFT_REDUCE_X86)
    case Isa::avx2: return &kernels_avx2();
    case Isa::avx512: return &kernels_avx512();
#else
    case Isa::avx2:
    case Isa::avx512: return nullptr;
#endif
  }
  return nullptr;
}

#if defined(WEFT_REDUCE_X86)
// F16C from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports does not know "f16c".
bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}
#endif

bool cpu_has(Isa isa) {
  switch (isa) {
    case Isa::generic: return true;
#if defined(WEFT_REDUCE_X86)
    case Isa::avx2:
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx2") && cpu_has_f16c();
    case Isa::avx512:
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
             cpu_has_f16c();
#else
    case Isa::avx2:
    case Isa::avx512: return false;
#endif
  }
  return false;
}

Isa best_isa() {
  for (Isa isa : {Isa::avx512, Isa::avx2}) {
    if (isa_supported(isa)) return isa;
  }
  return Isa::generic;
}

// Set once on first use (every thread computes the same answer, so a race is harmless), or by
// force_isa in tests. Stored as Isa + 1 so that 0 means "not chosen yet".
std::atomic<int> g_active{0};

size_t op_index(ReduceOp op) {
  switch (op) {
    case ReduceOp::avg: return static_cast<size_t>(ReduceOp::sum);
    case ReduceOp::band: return kBandIndex;
    case ReduceOp::bor: return kBorIndex;
    case ReduceOp::bxor: return kBxorIndex;
    default: return static_cast<size_t>(op);
  }
}

// Callers validate first (validate.cc); an undefined pair is a no-op here, never a crash.
bool valid(DataType dtype, ReduceOp op) {
  return static_cast<int>(dtype) < kDataTypeCount && static_cast<int>(op) < kReduceOpCount &&
         (!is_bitwise(op) || is_integer(dtype));
}

}  // namespace

const char* to_string(Isa isa) {
  switch (isa) {
    case Isa::generic: return "generic";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
  }
  return "?";
}

bool isa_supported(Isa isa) { return table_for(isa) != nullptr && cpu_has(isa); }

Isa active_isa() {
  int v = g_active.load(std::memory_order_acquire);
  if (v == 0) {
    v = static_cast<int>(best_isa()) + 1;
    g_active.store(v, std::memory_order_release);
  }
  return static_cast<Isa>(v - 1);
}

const KernelTable& active_kernels() { return *table_for(active_isa()); }

bool force_isa(Isa isa) {
  if (!isa_supported(isa)) return false;
  g_active.store(static_cast<int>(isa) + 1, std::memory_order_release);
  return true;
}

}  // namespace reduce_detail

using reduce_detail::Form;

void reduce_out_of_place(void* dst, const void* a, const void* b, size_t count, DataType dtype,
                         ReduceOp op) {
  if (count == 0 || !reduce_detail::valid(dtype, op)) return;
  const auto& table = reduce_detail::active_kernels();
  const size_t d = static_cast<size_t>(dtype);
  const size_t o = reduce_detail::op_index(op);
  if (dst != a && dst != b) {
    table.combine[static_cast<int>(Form::separate)][d][o](dst, a, b, count);
  } else if (dst != b) {
    table.combine[static_cast<int>(Form::into_a)][d][o](dst, a, b, count);
  } else if (dst != a) {
    table.combine[static_cast<int>(Form::into_b)][d][o](dst, a, b, count);
  } else {
    // dst == a == b: the kernels promise their inputs do not alias the output, so feed a copy of
    // each block as b. Rare (reducing a buffer with itself), so a small stack block is enough.
    alignas(64) unsigned char copy[8192];
    const size_t elem = dtype_size(dtype);
    const size_t per_block = sizeof(copy) / elem;
    auto* p = static_cast<unsigned char*>(dst);
    for (size_t i = 0; i < count; i += per_block) {
      const size_t m = count - i < per_block ? count - i : per_block;
      std::memcpy(copy, p + i * elem, m * elem);
      table.combine[static_cast<int>(Form::into_a)][d][o](p + i * elem, p + i * elem, copy, m);
    }
  }
}

void reduce_into(void* dst, const void* src, size_t count, DataType dtype, ReduceOp op) {
  reduce_out_of_place(dst, dst, src, count, dtype, op);
}

void scale_for_avg(void* buf, size_t count, DataType dtype, int n) {
  if (count == 0 || n <= 1 || static_cast<int>(dtype) >= kDataTypeCount) return;
  reduce_detail::active_kernels().scale[static_cast<size_t>(dtype)](buf, count, n);
}

float half_to_float(uint16_t h) { return reduce_detail::half_bits_to_float(h); }
uint16_t float_to_half(float f) { return reduce_detail::float_to_half_bits(f); }
float bf16_to_float(uint16_t b) { return reduce_detail::bf16_bits_to_float(b); }
uint16_t float_to_bf16(float f) { return reduce_detail::float_to_bf16_bits(f); }

}  // namespace weft
