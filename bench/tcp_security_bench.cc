// The TCP transport plain vs secured, ranks as threads of this process over loopback: set-up
// time of N ranks, 8-byte allreduce latency and large allreduce bus bandwidth for 2 ranks, for
// security off, encrypt and auth in the same run (docs/security.md has figures).
//
//   weft_tcp_security_bench [setup_ranks=8] [iterations=2000] [MiB=64]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>
#include <vector>

#include "security/job_key.h"
#include "transport/factory.h"
#include "weft/weft.h"

using namespace weft;
using Clock = std::chrono::steady_clock;

namespace {

// Runs fn(rank, comm) on n rank threads; returns the slowest rank's set-up time (seconds).
double run_ranks(int n, const std::function<void(int, Communicator&)>& fn) {
  auto store = make_memory_store();
  std::vector<std::thread> threads;
  std::vector<double> setup(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Options o;
      o.rank = r;
      o.size = n;
      o.transport = TransportKind::tcp;
      o.host_id = "bench";
      o.connect_timeout = std::chrono::seconds(60);
      o.timeout = std::chrono::seconds(120);
      const auto t0 = Clock::now();
      auto comm = Communicator::create(o, store);
      setup[static_cast<size_t>(r)] = std::chrono::duration<double>(Clock::now() - t0).count();
      if (!comm.ok()) {
        std::fprintf(stderr, "rank %d: %s\n", r, comm.status().to_string().c_str());
        std::exit(1);
      }
      fn(r, *comm.value());
    });
  }
  for (auto& t : threads) t.join();
  return *std::max_element(setup.begin(), setup.end());
}

}  // namespace

int main(int argc, char** argv) {
  const int setup_ranks = argc > 1 ? std::atoi(argv[1]) : 8;
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 2000;
  const size_t big = (argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 64) << 20;
  auto key = security::JobKey::generate();
  if (!key.ok()) return 1;
  auto shared_key = std::make_shared<const security::JobKey>(std::move(key.value()));
  std::printf("%-8s %14s %18s %16s\n", "security", "setup_ms(n)", "8B_allreduce_us", "busbw_GB/s");
  for (auto mode : {security::SecurityMode::off, security::SecurityMode::encrypt,
                    security::SecurityMode::auth}) {
    set_tcp_security_for_testing(mode, mode == security::SecurityMode::off ? nullptr : shared_key);
    // Set-up: the median of 5 runs of `setup_ranks` ranks.
    std::vector<double> setups;
    for (int i = 0; i < 5; ++i) setups.push_back(run_ranks(setup_ranks, [](int, Communicator&) {}));
    std::sort(setups.begin(), setups.end());
    // Latency and bandwidth, 2 ranks.
    double lat_us = 0, busbw = 0;
    run_ranks(2, [&](int r, Communicator& c) {
      std::vector<float> in(big / sizeof(float), 1.0f), out(in.size());
      float a = 1, b = 0;
      for (int i = 0; i < 200; ++i) (void)c.allreduce(&a, &b, 2, DataType::fp32, ReduceOp::sum);
      std::vector<double> samples;
      for (int rep = 0; rep < 5; ++rep) {
        const auto t0 = Clock::now();
        for (int i = 0; i < iterations; ++i) (void)c.allreduce(&a, &b, 2, DataType::fp32, ReduceOp::sum);
        samples.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() /
                          iterations);
      }
      std::sort(samples.begin(), samples.end());
      (void)c.allreduce(in.data(), out.data(), in.size(), DataType::fp32, ReduceOp::sum);
      std::vector<double> bw;
      for (int rep = 0; rep < 5; ++rep) {
        const auto t0 = Clock::now();
        (void)c.allreduce(in.data(), out.data(), in.size(), DataType::fp32, ReduceOp::sum);
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        bw.push_back(2.0 * (2 - 1) / 2 * static_cast<double>(big) / s / 1e9);
      }
      std::sort(bw.begin(), bw.end());
      if (r == 0) {
        lat_us = samples[samples.size() / 2];
        busbw = bw[bw.size() / 2];
      }
    });
    std::printf("%-8s %10.2f(%d) %18.2f %16.2f\n", security::to_string(mode),
                setups[setups.size() / 2] * 1e3, setup_ranks, lat_us, busbw);
    std::fflush(stdout);
  }
  set_tcp_security_for_testing(security::SecurityMode::off, nullptr);
  return 0;
}
