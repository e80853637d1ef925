// weft_metrics_job: a rank program for the observability tests under `weft run`.
//
//   weft_metrics_job ITERATIONS STOP_FILE
//
// Joins through Communicator::from_env, runs ITERATIONS allreduces of 256 floats (checking the
// sums), prints "rank R: done", then keeps its communicator (and so its metrics endpoint) alive
// until STOP_FILE exists, for at most two minutes. Exits 0, or 1 on any error.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "weft/communicator.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s ITERATIONS STOP_FILE\n", argv[0]);
    return 2;
  }
  const int iterations = std::atoi(argv[1]);
  const std::string stop_file = argv[2];
  auto comm = weft::Communicator::from_env();
  if (!comm.ok()) {
    std::fprintf(stderr, "cannot create the communicator: %s\n", comm.status().to_string().c_str());
    return 1;
  }
  weft::Communicator& c = *comm.value();
  std::vector<float> v(256);
  for (int i = 0; i < iterations; ++i) {
    std::fill(v.begin(), v.end(), 1.0f);
    weft::Status st = c.allreduce(v.data(), v.data(), v.size(), weft::DataType::fp32,
                                  weft::ReduceOp::sum);
    if (!st.ok() || v[0] != float(c.size())) {
      std::fprintf(stderr, "rank %d: allreduce %d: %s\n", c.rank(), i, st.to_string().c_str());
      return 1;
    }
  }
  std::printf("rank %d: done\n", c.rank());
  std::fflush(stdout);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (::access(stop_file.c_str(), F_OK) != 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "rank %d: %s never appeared\n", c.rank(), stop_file.c_str());
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return 0;
}
