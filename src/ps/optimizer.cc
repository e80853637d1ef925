// Optimizer: the update rules of docs/parameter-server.md, in fp32.
#include "optimizer.h"

#include <cmath>
#include <cstring>

#include "reduce/reduce.h"

namespace weft::ps {
namespace {

void to_f32(const void* src, float* dst, size_t n, DataType dtype) {
  const auto* s = static_cast<const uint16_t*>(src);
  if (dtype == DataType::fp16) {
    for (size_t i = 0; i < n; ++i) dst[i] = half_to_float(s[i]);
  } else {
    for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_float(s[i]);
  }
}

void from_f32(const float* src, void* dst, size_t n, DataType dtype) {
  auto* d = static_cast<uint16_t*>(dst);
  if (dtype == DataType::fp16) {
    for (size_t i = 0; i < n; ++i) d[i] = float_to_half(src[i]);
  } else {
    for (size_t i = 0; i < n; ++i) d[i] = float_to_bf16(src[i]);
  }
}

}  // namespace

Optimizer::Optimizer(const OptimizerSpec& spec, size_t count, DataType dtype)
    : spec_(spec), count_(count), dtype_(dtype) {
  if (spec.kind != OptimizerKind::sgd) m_.assign(count, 0.0f);
  if (spec.kind == OptimizerKind::adam) v_.assign(count, 0.0f);
  if (dtype != DataType::fp32) {
    w32_.resize(count);
    g32_.resize(count);
  }
}

void Optimizer::step(void* weights, const void* grad) {
  float* w = static_cast<float*>(weights);
  const float* g = static_cast<const float*>(grad);
  if (dtype_ != DataType::fp32) {
    to_f32(weights, w32_.data(), count_, dtype_);
    to_f32(grad, g32_.data(), count_, dtype_);
    w = w32_.data();
    g = g32_.data();
  }
  ++steps_;
  const float lr = spec_.lr;
  switch (spec_.kind) {
    case OptimizerKind::sgd:
      for (size_t i = 0; i < count_; ++i) w[i] -= lr * g[i];
      break;
    case OptimizerKind::momentum:
      for (size_t i = 0; i < count_; ++i) {
        m_[i] = spec_.momentum * m_[i] + g[i];
        w[i] -= lr * m_[i];
      }
      break;
    case OptimizerKind::adam: {
      const float b1 = spec_.beta1, b2 = spec_.beta2;
      const float c1 = 1.0f - std::pow(b1, static_cast<float>(steps_));
      const float c2 = 1.0f - std::pow(b2, static_cast<float>(steps_));
      for (size_t i = 0; i < count_; ++i) {
        m_[i] = b1 * m_[i] + (1.0f - b1) * g[i];
        v_[i] = b2 * v_[i] + (1.0f - b2) * g[i] * g[i];
        const float m_hat = m_[i] / c1, v_hat = v_[i] / c2;
        w[i] -= lr * m_hat / (std::sqrt(v_hat) + spec_.eps);
      }
      break;
    }
  }
  if (dtype_ != DataType::fp32) from_f32(w32_.data(), weights, count_, dtype_);
}

}  // namespace weft::ps
