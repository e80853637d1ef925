// A worker of `weft run -n W --ps N` (serve_process_test.cc): finds the shards through the job's
// store (weft::ps::Client::from_env), trains one bsp tensor spread over every shard for a few
// steps with SGD (lr 1, every worker pushes ones) and checks each step's weights:
// w_step = w0 - step * W. Prints "worker R: ps ok" and exits 0, or says what was wrong and
// exits 1.
#include <cstdio>
#include <vector>

#include "weft/ps.h"

int main() {
  using namespace weft;
  ps::ClientOptions options;
  options.timeout = std::chrono::seconds(30);
  auto client = ps::Client::from_env(options);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().to_string().c_str());
    return 1;
  }
  const char* size_env = std::getenv("WEFT_SIZE");
  const uint32_t workers = size_env ? static_cast<uint32_t>(std::atoi(size_env)) : 1;
  const char* rank_env = std::getenv("WEFT_RANK");
  const int rank = rank_env ? std::atoi(rank_env) : 0;
  // 6 MiB of f32: two partitions, on two shards when there are two.
  const size_t count = (size_t{6} << 20) / 4;
  ps::TensorSpec spec;
  spec.name = "weights";
  spec.shape = {count};
  spec.num_workers = workers;
  spec.optimizer.lr = 1.0f;
  std::vector<float> w(count, 100.0f), g(count, 1.0f);
  Status s = client.value()->init(spec, w.data());
  if (!s.ok()) {
    std::fprintf(stderr, "init: %s\n", s.to_string().c_str());
    return 1;
  }
  for (uint64_t step = 0; step < 3; ++step) {
    auto v = client.value()->push_pull("weights", g.data(), w.data(), count, DataType::fp32, step);
    if (!v.ok()) {
      std::fprintf(stderr, "step %lu: %s\n", static_cast<unsigned long>(step),
                   v.status().to_string().c_str());
      return 1;
    }
    const float expected = 100.0f - static_cast<float>((step + 1) * workers);
    if (v.value() != step + 1 || w.front() != expected || w.back() != expected) {
      std::fprintf(stderr, "step %lu: version %lu, weights %g..%g, expected %g\n",
                   static_cast<unsigned long>(step), static_cast<unsigned long>(v.value()),
                   w.front(), w.back(), expected);
      return 1;
    }
  }
  std::printf("worker %d: ps ok (%d shards)\n", rank, client.value()->num_shards());
  return 0;
}
