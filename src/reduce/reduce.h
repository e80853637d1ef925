// Reduction kernels: dst[i] = dst[i] OP src[i] for every dtype x op, vectorised.
//
// fp16 and bf16 are converted to fp32, combined, and rounded back to nearest-even. avg is not an
// elementwise op: reduce with sum (reduce_op_for_avg) and call scale_for_avg once on the final
// result. Buffers may be unaligned; dst and src must not overlap unless they are equal.
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
