#include "transport/mixed/mixed_transport.h"

#include <algorithm>
#include <chrono>

namespace weft {
namespace {

class MixedTransport final : public Transport {
 public:
  MixedTransport(int rank, int size, std::vector<bool> local, std::unique_ptr<Transport> shm,
                 std::unique_ptr<Transport> tcp)
      : rank_(rank), size_(size), local_(std::move(local)), shm_(std::move(shm)), tcp_(std::move(tcp)) {}
  ~MixedTransport() override {
    // The TCP part first: its reactor may still complete requests while the shm part goes.
    tcp_.reset();
    shm_.reset();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void post_send(Request* r) override { route(*r).post_send(r); }
  void post_recv(Request* r) override { route(*r).post_recv(r); }
  void begin_operation(const Fingerprint& fp) override {
    shm_->begin_operation(fp);
    tcp_->begin_operation(fp);
  }
  void end_operation() override {
    shm_->end_operation();
    tcp_->end_operation();
  }

  // The TCP part reads its sockets on this thread (as alone); the shm part's progress thread
  // completes the shm requests and wakes this thread through the completion. Waiting for a peer
  // on this host, a few microseconds of polling its ring come first (skipped when the host's
  // ranks outnumber its CPUs: see ShmTransport::wait). Every 20 ms a failure of
  // one part is carried over to the other (its requests would otherwise wait for the timeout).
  bool wait(Completion& completion, uint32_t seen, const Request* hint,
            Completion::Clock::time_point deadline) override {
    const bool hint_local = hint != nullptr && &route(*hint) == shm_.get();
    while (true) {
      const auto now = Completion::Clock::now();
      if (now >= deadline) return completion.generation() != seen;
      if (hint_local && shm_->wait(completion, seen, hint, deadline)) return true;
      const auto slice = std::min(deadline, now + std::chrono::milliseconds(20));
      if (tcp_->wait(completion, seen, hint_local ? nullptr : hint, slice)) return true;
      spread_failure();
    }
  }

  void fail(const Status& status) override {
    shm_->fail(status);
    tcp_->fail(status);
  }
  Status error() const override {
    Status st = shm_->error();
    return st.ok() ? tcp_->error() : st;
  }
  Status heartbeat(std::chrono::steady_clock::time_point now,
                   std::chrono::milliseconds peer_timeout) override {
    spread_failure();
    Status st = shm_->heartbeat(now, peer_timeout);
    if (!st.ok()) return st;
    return tcp_->heartbeat(now, peer_timeout);
  }
  TransportCounters counters() const override { return shm_->counters(); }
  std::vector<int> lost_peers() const override {
    std::vector<int> out = shm_->lost_peers();
    for (int p : tcp_->lost_peers()) out.push_back(p);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
  void close(std::chrono::milliseconds timeout) override {
    shm_->close(timeout);
    tcp_->close(timeout);
  }

 private:
  Transport& route(const Request& r) const {
    if ((r.tag & kP2pTagBit) != 0 || r.peer < 0 || r.peer >= size_) return *tcp_;
    return local_[static_cast<size_t>(r.peer)] ? *shm_ : *tcp_;
  }
  void spread_failure() {
    Status s = shm_->error();
    Status t = tcp_->error();
    if (!s.ok() && t.ok()) tcp_->fail(s);
    if (s.ok() && !t.ok()) shm_->fail(t);
  }

  const int rank_;
  const int size_;
  const std::vector<bool> local_;
  std::unique_ptr<Transport> shm_;
  std::unique_ptr<Transport> tcp_;
};

}  // namespace

std::unique_ptr<Transport> make_mixed_transport(int rank, int size, std::vector<bool> local,
                                                std::unique_ptr<Transport> shm,
                                                std::unique_ptr<Transport> tcp) {
  return std::make_unique<MixedTransport>(rank, size, std::move(local), std::move(shm),
                                          std::move(tcp));
}

}  // namespace weft
