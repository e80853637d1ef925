// Collective-layer test harness: N ranks as threads of this process, each with its own Transport
// (made by a TransportFactory), BufferPool and operation sequence, calling run_collective
// directly — below the Communicator, so every algorithm can be forced and checked.
//
// transport_factories() is the one list of transports the sweeps run over: add a factory there
// and every parameterised sweep covers it. A RankGroup is used by one test at a time; run() starts
// one thread per rank, and each rank thread calls collective() for its own rank only.
// Header-only because the test binary is built from the *_test.cc files of this folder.
#pragma once

#include <gtest/gtest.h>

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "collective/collective.h"
#include "collective/context.h"
#include "runtime/buffer_pool.h"
#include "transport/local/local_transport.h"
#include "transport/shm/shm_transport.h"
#include "transport/tcp/tcp_transport.h"
#include "test_security.h"
#include "transport/transport.h"
#include "weft/store.h"
#include "weft/options.h"

namespace weft::harness {

// Whether this process may use process_vm_readv at all (a container's seccomp profile may refuse
// it; the shm transport then falls back to its rings, tested in tests/process/).
inline bool cma_allowed() {
  uint64_t from = 7, to = 0;
  iovec local{&to, sizeof(to)}, remote{&from, sizeof(from)};
  return process_vm_readv(::getpid(), &local, 1, &remote, 1, 0) == sizeof(to) && to == 7;
}

using TransportFactory = std::function<std::vector<std::unique_ptr<Transport>>(int n)>;

struct NamedTransportFactory {
  std::string name;  // a gtest-friendly identifier
  TransportFactory make;
};

// A TCP or shared-memory transport plus the BufferPool it needs, which must outlive it.
class OwningTransport final : public Transport {
 public:
  OwningTransport(std::unique_ptr<BufferPool> pool, std::unique_ptr<Transport> inner)
      : pool_(std::move(pool)), inner_(std::move(inner)) {}
  ~OwningTransport() override { inner_.reset(); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  void post_send(Request* r) override { inner_->post_send(r); }
  void post_recv(Request* r) override { inner_->post_recv(r); }
  void begin_operation(const Fingerprint& fp) override { inner_->begin_operation(fp); }
  void end_operation() override { inner_->end_operation(); }
  bool wait(Completion& c, uint32_t seen, const Request* hint,
            Completion::Clock::time_point deadline) override {
    return inner_->wait(c, seen, hint, deadline);
  }
  void fail(const Status& s) override { inner_->fail(s); }
  Status error() const override { return inner_->error(); }
  void close(std::chrono::milliseconds timeout) override { inner_->close(timeout); }
  Status heartbeat(std::chrono::steady_clock::time_point now,
                   std::chrono::milliseconds peer_timeout) override {
    return inner_->heartbeat(now, peer_timeout);
  }
  std::vector<int> lost_peers() const override { return inner_->lost_peers(); }
  size_t shared_capacity() const override { return inner_->shared_capacity(); }
  Result<uint8_t*> shared_begin(const Fingerprint& fp,
                                Completion::Clock::time_point deadline) override {
    return inner_->shared_begin(fp, deadline);
  }
  void shared_publish(size_t bytes) override { inner_->shared_publish(bytes); }
  Result<std::span<const uint8_t>> shared_read(int peer,
                                               Completion::Clock::time_point deadline) override {
    return inner_->shared_read(peer, deadline);
  }

 private:
  std::unique_ptr<BufferPool> pool_;
  std::unique_ptr<Transport> inner_;
};

// Makes n transports, one thread per rank (set-up is collective), each with its own pool.
// make_one(rank, store, pool) returns the rank's Result<std::unique_ptr<Transport>>.
template <typename MakeOne>
std::vector<std::unique_ptr<Transport>> make_transports(int n, const char* what, MakeOne make_one) {
  auto store = make_memory_store();
  std::vector<std::unique_ptr<Transport>> out(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  std::mutex mu;
  std::string error;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto pool = std::make_unique<BufferPool>();
      auto t = make_one(r, *store, *pool);
      std::lock_guard<std::mutex> lock(mu);
      if (!t.ok()) {
        error = t.status().to_string();
        return;
      }
      out[static_cast<size_t>(r)] =
          std::make_unique<OwningTransport>(std::move(pool), std::move(t.value()));
    });
  }
  for (auto& t : threads) t.join();
  if (!error.empty()) throw std::runtime_error(std::string(what) + " transports: " + error);
  return out;
}

// n TCP transports on loopback, connected through an in-memory store. A small eager threshold
// and credit budget, and distinct host ids, so rendezvous, credits and striping over 2 sockets
// per peer are all exercised.
inline std::vector<std::unique_ptr<Transport>> make_tcp_transports(int n) {
  return make_transports(n, "tcp", [n](int r, Store& store, BufferPool& pool) {
    TcpTransportConfig cfg;
    cfg.rank = r;
    cfg.size = n;
    cfg.token = 42;
    // Every rank "on its own host" (over loopback) so pairs use 2 sockets and stripe.
    cfg.host_id = "host-" + std::to_string(r);
    cfg.options.interface = "lo";
    cfg.options.sockets_per_peer = 2;
    cfg.options.rank = r;
    cfg.options.size = n;
    cfg.options.eager_threshold = 4096;
    cfg.options.eager_credit_bytes = 64 * 1024;
    cfg.options.connect_timeout = std::chrono::seconds(30);
    cfg.security = weft::testing::test_security().mode;
    cfg.job_key = weft::testing::test_security().job_key;
    return make_tcp_transport(cfg, store, pool);
  });
}

// n shared-memory transports (threads of this process share the segments like processes would).
// Small rings, eager threshold and credits, so pads, full rings, rendezvous and credits are all
// exercised.
inline std::vector<std::unique_ptr<Transport>> make_shm_transports(int n) {
  static std::atomic<uint64_t> next_token{0x5348};
  const uint64_t token = next_token.fetch_add(1) ^ (static_cast<uint64_t>(::getpid()) << 20);
  return make_transports(n, "shm", [n, token](int r, Store& store, BufferPool& pool) {
    ShmTransportConfig cfg;
    cfg.rank = r;
    cfg.size = n;
    cfg.token = token;
    cfg.options.rank = r;
    cfg.options.size = n;
    cfg.options.shm_ring_bytes = 64 * 1024;
    cfg.options.eager_threshold = 4096;
    cfg.options.eager_credit_bytes = 64 * 1024;
    cfg.options.connect_timeout = std::chrono::seconds(30);
    return make_shm_transport(cfg, store, pool);
  });
}

// "local": in-process, small messages eager, large ones rendezvous (like TCP).
// "local_rendezvous": every send waits for its receive, which catches any algorithm that waits
// on a send before posting the receive that would drain it.
inline const std::vector<NamedTransportFactory>& transport_factories() {
  static const std::vector<NamedTransportFactory> factories = {
      {"local", [](int n) { return make_local_transports(n); }},
      {"local_rendezvous",
       [](int n) { return make_local_transports(n, LocalTransportOptions{.eager_threshold = 0}); }},
      {"tcp", [](int n) { return make_tcp_transports(n); }},
      {"shm", [](int n) { return make_shm_transports(n); }},
  };
  return factories;
}

inline std::vector<std::string> transport_names() {
  std::vector<std::string> names;
  for (const auto& f : transport_factories()) names.push_back(f.name);
  return names;
}

inline const TransportFactory& transport_factory(std::string_view name) {
  for (const auto& f : transport_factories()) {
    if (f.name == name) return f.make;
  }
  throw std::invalid_argument("no transport factory named " + std::string(name));
}

// Options for collective tests: a 10 s timeout, so a hang fails the test instead of the run.
inline Options harness_options() {
  Options o;
  o.timeout = std::chrono::seconds(10);
  return o;
}

// Identifier for test names; independent of options.cc.
inline const char* algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::automatic: return "automatic";
    case Algorithm::ring: return "ring";
    case Algorithm::recursive_doubling: return "recursive_doubling";
    case Algorithm::halving_doubling: return "halving_doubling";
    case Algorithm::binomial: return "binomial";
    case Algorithm::direct: return "direct";
    case Algorithm::pairwise: return "pairwise";
    case Algorithm::dissemination: return "dissemination";
    case Algorithm::hierarchical: return "hierarchical";
    case Algorithm::shm_direct: return "shm_direct";
  }
  return "unknown";
}

class RankGroup {
 public:
  RankGroup(const TransportFactory& factory, int n) : transports_(factory(n)) {
    for (int r = 0; r < n; ++r) pools_.push_back(std::make_unique<BufferPool>());
    seq_.assign(static_cast<size_t>(n), 0);
  }

  int size() const { return static_cast<int>(transports_.size()); }
  Transport& transport(int rank) { return *transports_[static_cast<size_t>(rank)]; }
  BufferPool& pool(int rank) { return *pools_[static_cast<size_t>(rank)]; }

  // Runs body(rank) on size() threads at once and joins them.
  void run(const std::function<void(int rank)>& body) {
    std::vector<std::thread> threads;
    for (int r = 0; r < size(); ++r) threads.emplace_back([&body, r] { body(r); });
    for (auto& t : threads) t.join();
  }

  // On rank `rank`'s thread: that rank's next collective (next sequence number, begin_operation,
  // a fresh Context, run_collective, end_operation), as the communicator runs it. `options` must
  // outlive the call.
  Status collective(int rank, const CollectiveArgs& args, const Options& options) {
    const Fingerprint fp = make_fingerprint(args, ++seq_[static_cast<size_t>(rank)]);
    Transport& t = transport(rank);
    t.begin_operation(fp);
    Status s;
    {
      Context ctx(t, options, fp, pool(rank));
      s = run_collective(ctx, args);
    }
    t.end_operation();
    return s;
  }

  // Skips a sequence number on `rank`, as if it had run a collective that others did not see.
  void skip_sequence(int rank) { ++seq_[static_cast<size_t>(rank)]; }

  // Every rank runs args_for(rank) once, under `options`; returns each rank's status.
  std::vector<Status> collective_all(const std::function<CollectiveArgs(int rank)>& args_for,
                                     const Options& options) {
    std::vector<Status> out(static_cast<size_t>(size()));
    run([&](int r) { out[static_cast<size_t>(r)] = collective(r, args_for(r), options); });
    return out;
  }

 private:
  std::vector<std::unique_ptr<Transport>> transports_;
  std::vector<std::unique_ptr<BufferPool>> pools_;
  std::vector<uint64_t> seq_;  // element r touched only by rank r's thread
};

// Thread-safe collector of check failures; keeps the first few messages.
class Failures {
 public:
  static constexpr size_t kKept = 12;

  void add(std::string message) {
    std::lock_guard<std::mutex> lock(mu_);
    if (kept_.size() < kKept) kept_.push_back(std::move(message));
    ++total_;
  }
  size_t count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return total_;
  }
  // Reports the kept messages as one gtest failure; returns true when there was none.
  bool expect_none() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (total_ == 0) return true;
    std::string all;
    for (const auto& m : kept_) all += "\n  " + m;
    ADD_FAILURE() << total_ << " check(s) failed; the first " << kept_.size() << ":" << all;
    return false;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> kept_;
  size_t total_ = 0;
};

// gtest parameter of the sweeps: transport x world size x algorithm.
struct SweepParam {
  std::string transport;
  int n;
  Algorithm algorithm;
};

inline std::string sweep_name(const ::testing::TestParamInfo<SweepParam>& info) {
  return info.param.transport + "_n" + std::to_string(info.param.n) + "_" +
         algorithm_name(info.param.algorithm);
}

// Every transport x every size in `sizes` x every algorithm in `algorithms` (shm_direct: over
// shm only).
inline std::vector<SweepParam> sweep(const std::vector<int>& sizes,
                                     const std::vector<Algorithm>& algorithms) {
  std::vector<SweepParam> out;
  for (const auto& t : transport_names()) {
    for (int n : sizes) {
      for (Algorithm a : algorithms) {
        // Only the shm transport has shared buffers (elsewhere it would run the automatic choice).
        if (a == Algorithm::shm_direct && t != "shm") continue;
        out.push_back({t, n, a});
      }
    }
  }
  return out;
}

inline const std::vector<int>& all_sizes() {
  static const std::vector<int> sizes = {1, 2, 3, 4, 5, 6, 7, 8};
  return sizes;
}

}  // namespace weft::harness
