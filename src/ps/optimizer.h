// The optimizers a shard applies to a partition once its gradient is aggregated: SGD, momentum,
// Adam. Weights and gradients are in the partition's dtype (fp32, fp16, bf16); the arithmetic
// and the optimizer's state are fp32, each step rounded back to the dtype (nearest even).
// One Optimizer per partition, called under the partition's lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "weft/ps.h"
#include "weft/types.h"

namespace weft::ps {

class Optimizer {
 public:
  Optimizer(const OptimizerSpec& spec, size_t count, DataType dtype);

  // weights -= update(grad); both hold `count` elements of the dtype.
  void step(void* weights, const void* grad);

 private:
  OptimizerSpec spec_;
  size_t count_;
  DataType dtype_;
  uint64_t steps_ = 0;
  std::vector<float> m_, v_;        // momentum / Adam moments (fp32)
  std::vector<float> w32_, g32_;    // scratch: the fp32 view of fp16/bf16 buffers
};

}  // namespace weft::ps
