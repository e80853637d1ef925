#include "mlp.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

namespace weft::examples {

namespace {

// y[0..n) += a * x[0..n)
inline void axpy(float a, const float* __restrict x, float* __restrict y, size_t n) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) y[i] += a * x[i];
}

inline float dot(const float* __restrict a, const float* __restrict b, size_t n) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (size_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

void fill_normal(float* p, size_t n, float stddev, std::mt19937_64& rng) {
  std::normal_distribution<float> dist(0.0f, stddev);
  for (size_t i = 0; i < n; ++i) p[i] = dist(rng);
}

}  // namespace

Mlp::Mlp(const MlpShape& shape, size_t max_batch, uint64_t seed)
    : shape_(shape),
      params_(shape.parameter_count()),
      grads_(shape.parameter_count()),
      z1_(max_batch * shape.hidden),
      a1_(max_batch * shape.hidden),
      y_(max_batch * shape.outputs),
      dy_(max_batch * shape.outputs) {
  const size_t in = shape.inputs, h = shape.hidden, out = shape.outputs;
  w1_ = params_.data();
  b1_ = w1_ + in * h;
  w2_ = b1_ + h;
  b2_ = w2_ + h * out;
  gw1_ = grads_.data();
  gb1_ = gw1_ + in * h;
  gw2_ = gb1_ + h;
  gb2_ = gw2_ + h * out;
  std::mt19937_64 rng(seed);
  fill_normal(w1_, in * h, std::sqrt(2.0f / static_cast<float>(in)), rng);
  fill_normal(w2_, h * out, std::sqrt(1.0f / static_cast<float>(h)), rng);
}

// Loops run over weight rows outside and samples inside, so each row is read from memory once per
// batch and stays in cache while every sample uses it.
float Mlp::forward_backward(const float* x, const float* target, size_t batch) {
  const size_t in = shape_.inputs, h = shape_.hidden, out = shape_.outputs;
  float* z1 = z1_.data();  // batch x hidden; after the forward pass it holds d(loss)/d(z1)
  float* a1 = a1_.data();  // batch x hidden
  float* y = y_.data();    // batch x outputs
  float* dy = dy_.data();  // batch x outputs

  // Forward: z1 = b1 + x W1, a1 = relu(z1), y = b2 + a1 W2.
  for (size_t b = 0; b < batch; ++b) std::memcpy(z1 + b * h, b1_, h * sizeof(float));
  for (size_t i = 0; i < in; ++i) {
    for (size_t b = 0; b < batch; ++b) axpy(x[b * in + i], w1_ + i * h, z1 + b * h, h);
  }
  for (size_t k = 0; k < batch * h; ++k) a1[k] = std::max(z1[k], 0.0f);
  for (size_t b = 0; b < batch; ++b) std::memcpy(y + b * out, b2_, out * sizeof(float));
  for (size_t j = 0; j < h; ++j) {
    for (size_t b = 0; b < batch; ++b) {
      float a = a1[b * h + j];
      if (a != 0.0f) axpy(a, w2_ + j * out, y + b * out, out);
    }
  }

  // Loss and d(loss)/dy.
  const float elements = static_cast<float>(batch * out);
  float loss = 0;
  for (size_t k = 0; k < batch * out; ++k) {
    float e = y[k] - target[k];
    loss += e * e;
    dy[k] = e / elements;
  }

  // Backward: layer 2, the ReLU (into z1), then layer 1.
  std::fill(grads_.begin(), grads_.end(), 0.0f);
  for (size_t b = 0; b < batch; ++b) axpy(1.0f, dy + b * out, gb2_, out);
  for (size_t j = 0; j < h; ++j) {
    const float* w2_row = w2_ + j * out;
    for (size_t b = 0; b < batch; ++b) {
      float a = a1[b * h + j];
      if (a == 0.0f) {
        z1[b * h + j] = 0.0f;
        continue;
      }
      axpy(a, dy + b * out, gw2_ + j * out, out);
      z1[b * h + j] = dot(w2_row, dy + b * out, out);
    }
  }
  for (size_t b = 0; b < batch; ++b) axpy(1.0f, z1 + b * h, gb1_, h);
  for (size_t i = 0; i < in; ++i) {
    for (size_t b = 0; b < batch; ++b) axpy(x[b * in + i], z1 + b * h, gw1_ + i * h, h);
  }
  return loss / (2.0f * elements);
}

void Mlp::sgd_step(float learning_rate) {
  axpy(-learning_rate, grads_.data(), params_.data(), params_.size());
}

Dataset make_dataset(const MlpShape& shape, size_t samples, uint64_t teacher_seed,
                     uint64_t data_seed) {
  const size_t in = shape.inputs, out = shape.outputs;
  std::vector<float> teacher(in * out);
  std::mt19937_64 teacher_rng(teacher_seed);
  fill_normal(teacher.data(), teacher.size(), 1.0f / std::sqrt(static_cast<float>(in)),
              teacher_rng);

  Dataset d;
  d.samples = samples;
  d.x.resize(samples * in);
  d.target.assign(samples * out, 0.0f);
  std::mt19937_64 rng(data_seed);
  fill_normal(d.x.data(), d.x.size(), 1.0f, rng);
  std::normal_distribution<float> noise(0.0f, 0.01f);
  for (size_t s = 0; s < samples; ++s) {
    float* t = d.target.data() + s * out;
    for (size_t i = 0; i < in; ++i) axpy(d.x[s * in + i], teacher.data() + i * out, t, out);
    for (size_t k = 0; k < out; ++k) t[k] += noise(rng);
  }
  return d;
}

}  // namespace weft::examples
