// A two-layer perceptron (input -> ReLU hidden -> linear output) trained on mean squared error,
// written in plain C++ for the data-parallel training demo. All parameters and all gradients live
// in one flat float buffer each, in the same layout, so one allreduce averages every gradient.
// Not thread-safe; one model per rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace weft::examples {

struct MlpShape {
  size_t inputs = 256;
  size_t hidden = 8192;
  size_t outputs = 256;

  size_t parameter_count() const { return inputs * hidden + hidden + hidden * outputs + outputs; }
};

class Mlp {
 public:
  // Parameters drawn from a fixed seed (He initialisation), identical on every rank.
  Mlp(const MlpShape& shape, size_t max_batch, uint64_t seed);

  const MlpShape& shape() const { return shape_; }
  std::span<float> parameters() { return params_; }
  std::span<float> gradients() { return grads_; }

  // Forward and backward pass over `batch` samples (rows of `x` and `target`): fills
  // gradients() with d(loss)/d(parameters) and returns the loss: half the mean squared error
  // over every output element of the batch.
  float forward_backward(const float* x, const float* target, size_t batch);
  // params -= learning_rate * grads
  void sgd_step(float learning_rate);

 private:
  MlpShape shape_;
  std::vector<float> params_;
  std::vector<float> grads_;
  // Views into params_ / grads_: w1 is inputs x hidden, w2 is hidden x outputs (row-major, so
  // the inner loops run over contiguous memory).
  float *w1_, *b1_, *w2_, *b2_;
  float *gw1_, *gb1_, *gw2_, *gb2_;
  std::vector<float> z1_, a1_, y_, dy_;  // activations and their gradients, per batch
};

// Synthetic regression data: targets come from a fixed random linear "teacher" (the same on
// every rank) applied to inputs drawn from a per-rank seed, plus a little noise.
struct Dataset {
  size_t samples = 0;
  std::vector<float> x;       // samples x inputs
  std::vector<float> target;  // samples x outputs
};
Dataset make_dataset(const MlpShape& shape, size_t samples, uint64_t teacher_seed,
                     uint64_t data_seed);

}  // namespace weft::examples
