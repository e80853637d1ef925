#include "workload.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace weft::bench {
namespace {

// Values every tensor carries among its random normal numbers (finite ones): the cases a float
// printer most often gets wrong.
const float kFiniteEdges[] = {-0.0f,
                              std::numeric_limits<float>::denorm_min(),
                              -1.17549421e-38f /* largest subnormal, negated */,
                              std::numeric_limits<float>::min(),
                              std::numeric_limits<float>::max(),
                              -std::numeric_limits<float>::max(),
                              0.1f,
                              16777215.0f};

std::vector<float> make_values(size_t count, Values values, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> out(count);
  for (float& v : out) v = normal(rng);
  size_t at = 0;
  for (float edge : kFiniteEdges) {
    if (at < count) out[at++] = edge;
  }
  if (values == Values::with_nonfinite) {
    const float nonfinite[] = {std::bit_cast<float>(uint32_t{0x7fc01234}),  // quiet NaN, payload
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity()};
    for (float v : nonfinite) {
      if (at < count) out[at++] = v;
    }
  }
  return out;
}

template <typename T>
std::string compare_bits(const char* what, const std::vector<T>& want, const std::vector<T>& got) {
  if (want.size() != got.size()) {
    return std::string(what) + ": " + std::to_string(got.size()) + " elements, expected " +
           std::to_string(want.size());
  }
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::memcmp(&want[i], &got[i], sizeof(T)) != 0) {
      return std::string(what) + "[" + std::to_string(i) + "] differs in its bits";
    }
  }
  return {};
}

std::string compare_header(const std::string& name, uint32_t dtype,
                           const std::vector<int64_t>& shape, const std::string& got_name,
                           uint32_t got_dtype, const std::vector<int64_t>& got_shape) {
  if (name != got_name) return "name '" + got_name + "', expected '" + name + "'";
  if (dtype != got_dtype) return "dtype " + std::to_string(got_dtype);
  return compare_bits("shape", shape, got_shape);
}

}  // namespace

Records make_records(size_t count) {
  std::mt19937_64 rng(23);
  std::uniform_int_distribution<int> length(8, 16), letter('a', 'z'), age(18, 90);
  Records out(count);
  for (Record& r : out) {
    r.name.resize(static_cast<size_t>(length(rng)));
    for (char& c : r.name) c = static_cast<char>(letter(rng));
    r.age = age(rng);
  }
  return out;
}

Tensor make_tensor(size_t bytes, Values values) {
  Tensor t;
  t.name = "layer3.weight";
  size_t elements = bytes / sizeof(float);
  if (elements % 1024 == 0) {
    t.shape = {static_cast<int64_t>(elements / 1024), 1024};
  } else {
    t.shape = {static_cast<int64_t>(elements)};
  }
  t.data = make_values(elements, values, bytes);
  return t;
}

SparseTensor make_sparse(size_t dense_bytes, Values values) {
  constexpr size_t kDensityInverse = 100;
  Tensor dense = make_tensor(dense_bytes, Values::finite);
  SparseTensor s;
  s.name = "embedding.weight.grad";
  s.shape = dense.shape;
  size_t count = dense.data.size() / kDensityInverse;
  s.values = make_values(count, values, dense_bytes + 1);
  std::mt19937_64 rng(dense_bytes);
  std::uniform_int_distribution<size_t> jitter(0, kDensityInverse - 1);
  for (size_t i = 0; i < count; ++i) {
    s.indices.push_back(static_cast<int64_t>(i * kDensityInverse + jitter(rng)));
  }
  return s;
}

std::string compare(const Records& want, const Records& got) {
  if (want.size() != got.size()) {
    return std::to_string(got.size()) + " records, expected " + std::to_string(want.size());
  }
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] != got[i]) return "record " + std::to_string(i) + " differs";
  }
  return {};
}

std::string compare(const Tensor& want, const Tensor& got) {
  std::string header =
      compare_header(want.name, want.dtype, want.shape, got.name, got.dtype, got.shape);
  return header.empty() ? compare_bits("data", want.data, got.data) : header;
}

std::string compare(const SparseTensor& want, const SparseTensor& got) {
  std::string header =
      compare_header(want.name, want.dtype, want.shape, got.name, got.dtype, got.shape);
  if (!header.empty()) return header;
  std::string indices = compare_bits("indices", want.indices, got.indices);
  return indices.empty() ? compare_bits("values", want.values, got.values) : indices;
}

}  // namespace weft::bench
