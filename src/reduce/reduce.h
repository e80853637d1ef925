// Reduction kernels: dst[i] = dst[i] OP src[i] for every dtype x op, vectorised.
//
// fp16 and bf16 are converted to fp32, combined, and rounded back to nearest-even. avg is not an
// elementwise op: the kernels sum for it, and the caller runs scale_for_avg once on the final
// result. Buffers may be unaligned; dst and src must not overlap unless they are equal.
//
// Semantics, identical on every CPU (the kernel table is picked at run time, see kernel_table.h):
// - integer sum and prod wrap modulo 2^bits; integer avg (scale_for_avg) truncates toward zero;
// - floating min/max propagate NaN: if either input is NaN the result is NaN. Otherwise the
//   smaller/larger input; on a tie (including -0 vs +0) the result is the second operand (src, b);
// - floating sum/prod are single IEEE operations (no FMA, no reassociation), so every rank that
//   reduces the same inputs in the same order gets the same bits.
#pragma once

#include <cstddef>

#include "weft/types.h"

namespace weft {

// dst = dst OP src, `count` elements. ReduceOp::avg behaves as sum.
void reduce_into(void* dst, const void* src, size_t count, DataType dtype, ReduceOp op);
// dst = a OP b (dst may equal a or b). ReduceOp::avg behaves as sum.
void reduce_out_of_place(void* dst, const void* a, const void* b, size_t count, DataType dtype,
                         ReduceOp op);
// Divides each element by `n` (the finishing step of avg); integers truncate toward zero.
void scale_for_avg(void* buf, size_t count, DataType dtype, int n);

// Scalar fp16/bf16 conversions (round to nearest even), exposed for tests and tools.
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);

}  // namespace weft
