// What metrics cost (docs/observability.md), measured against itself in the same run:
//
//  1. A one-rank communicator's 8-byte allreduce (everything but the transport) with
//     Options::metrics off and on, in interleaved rounds: the difference is what counting costs
//     an operation (target: at most 5 ns).
//  2. Two ranks (threads of this process) running 8-byte allreduces over shared memory and over
//     TCP, metrics off vs on with the /metrics endpoint scraped 10 times a second by a scraper
//     process (forked; Prometheus is a process of its own too): the ratio of the latencies
//     (target: within 3%). Rounds last a second or more, so each sees about ten scrapes.
//
//   weft_metrics_bench [ROUNDS]     (default 15; prints medians and the [min-max] of the rounds)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "weft/communicator.h"
#include "weft/store.h"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string range(const std::vector<double>& v) {
  auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  char buf[64];
  std::snprintf(buf, sizeof buf, "[%.2f-%.2f]", *lo, *hi);
  return buf;
}

// ns per 8-byte allreduce on a one-rank communicator.
double one_rank_round(weft::Communicator& c, int iterations) {
  float v[2] = {1, 2};
  const auto t0 = Clock::now();
  for (int i = 0; i < iterations; ++i) {
    if (!c.allreduce(v, v, 2, weft::DataType::fp32, weft::ReduceOp::sum).ok()) std::abort();
  }
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / iterations;
}

// GET /metrics from 127.0.0.1:port; the bytes received.
size_t scrape(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  size_t got = 0;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    const char req[] = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (::write(fd, req, sizeof(req) - 1) > 0) {
      char buf[16384];
      ssize_t n;
      while ((n = ::read(fd, buf, sizeof(buf))) > 0) got += size_t(n);
    }
  }
  ::close(fd);
  return got;
}

struct TwoRanks {
  std::vector<std::unique_ptr<weft::Communicator>> comms;
  uint16_t port = 0;  // the metrics endpoint, when metrics_addr was set
};

TwoRanks make_two_ranks(weft::TransportKind transport, bool metrics) {
  auto store = weft::make_memory_store();
  TwoRanks out;
  out.comms.resize(2);
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r) {
    ts.emplace_back([&, r] {
      weft::Options o;
      o.rank = r;
      o.size = 2;
      o.transport = transport;
      o.metrics = metrics;
      if (metrics) o.metrics_addr = "127.0.0.1:0";
      auto c = weft::Communicator::create(o, store);
      if (!c.ok()) {
        std::fprintf(stderr, "rank %d: %s\n", r, c.status().to_string().c_str());
        std::exit(1);
      }
      out.comms[static_cast<size_t>(r)] = std::move(c).value();
    });
  }
  for (auto& t : ts) t.join();
  if (metrics) {
    auto addr = store->get_string("weft-metrics/rank0", std::chrono::seconds(5));
    if (!addr.ok()) std::exit(1);
    out.port = static_cast<uint16_t>(std::stoi(addr->substr(addr->rfind(':') + 1)));
  }
  return out;
}

// A scraper process (as Prometheus is one): GETs /metrics 10 times a second until killed, then
// exits with the number of scrapes that returned data (at most 255).
pid_t start_scraper(uint16_t port) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  static volatile sig_atomic_t stop = 0;
  ::signal(SIGTERM, [](int) { stop = 1; });
  int n = 0;
  while (!stop) {
    if (scrape(port) > 0) ++n;
    const timespec pause{0, 100 * 1000 * 1000};
    ::nanosleep(&pause, nullptr);
  }
  ::_exit(std::min(n, 255));
}

size_t stop_scraper(pid_t pid) {
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? size_t(WEXITSTATUS(status)) : 0;
}

// us per 8-byte allreduce of two ranks; `scraped`: a scraper process GETs `port` at 10 Hz.
double two_rank_round(TwoRanks& job, int iterations, bool scraped, size_t* scrapes) {
  const pid_t scraper = scraped ? start_scraper(job.port) : -1;
  if (scraped) std::this_thread::sleep_for(std::chrono::milliseconds(20));  // it has started
  double us = 0;
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r) {
    ts.emplace_back([&, r] {
      float v[2] = {1, 2};
      weft::Communicator& c = *job.comms[static_cast<size_t>(r)];
      if (!c.barrier().ok()) std::abort();
      const auto t0 = Clock::now();
      for (int i = 0; i < iterations; ++i) {
        if (!c.allreduce(v, v, 2, weft::DataType::fp32, weft::ReduceOp::sum).ok()) std::abort();
      }
      if (r == 0) us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iterations;
    });
  }
  for (auto& t : ts) t.join();
  if (scraped) *scrapes += stop_scraper(scraper);
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 15;

  // 1. One rank.
  std::unique_ptr<weft::Communicator> one[2];
  for (int m = 0; m < 2; ++m) {
    weft::Options o;
    o.rank = 0;
    o.size = 1;
    o.metrics = m == 1;
    auto c = weft::Communicator::create(o, weft::make_memory_store());
    if (!c.ok()) return 1;
    one[m] = std::move(c).value();
    one_rank_round(*one[m], 100000);  // warm-up
  }
  std::vector<double> off, on, diff;
  for (int i = 0; i < rounds; ++i) {
    const double a = one_rank_round(*one[0], 300000);
    const double b = one_rank_round(*one[1], 300000);
    off.push_back(a);
    on.push_back(b);
    diff.push_back(b - a);
  }
  std::printf("one rank, 8-byte allreduce, %d interleaved rounds of 300000 calls (ns per call)\n",
              rounds);
  std::printf("  metrics off   %7.2f %s\n", median(off), range(off).c_str());
  std::printf("  metrics on    %7.2f %s\n", median(on), range(on).c_str());
  std::printf("  on - off      %7.2f %s   (target: <= 5 ns)\n", median(diff), range(diff).c_str());

  // 2. Two ranks, scraped at 10 Hz.
  for (auto transport : {weft::TransportKind::shm, weft::TransportKind::tcp}) {
    TwoRanks plain = make_two_ranks(transport, false);
    TwoRanks counted = make_two_ranks(transport, true);
    const int iterations = transport == weft::TransportKind::shm ? 2000000 : 100000;
    size_t scrapes = 0;
    two_rank_round(plain, iterations / 10, false, &scrapes);
    two_rank_round(counted, iterations / 10, false, &scrapes);
    scrapes = 0;
    std::vector<double> a, b, c, ratio;
    size_t unused = 0;
    for (int i = 0; i < rounds; ++i) {
      a.push_back(two_rank_round(plain, iterations, false, &scrapes));
      b.push_back(two_rank_round(counted, iterations, true, &scrapes));
      c.push_back(two_rank_round(counted, iterations, false, &unused));
      ratio.push_back(b.back() / a.back());
    }
    std::printf("two ranks over %s, 8-byte allreduce, %d interleaved rounds of %d calls (us per call)\n",
                weft::to_string(transport), rounds, iterations);
    std::printf("  metrics off                 %7.3f %s\n", median(a), range(a).c_str());
    std::printf("  metrics on, scraped 10/s    %7.3f %s   (%zu scrapes)\n", median(b),
                range(b).c_str(), scrapes);
    std::printf("  metrics on, not scraped     %7.3f %s\n", median(c), range(c).c_str());
    std::printf("  on / off                    %7.3f %s   (target: <= 1.03)\n", median(ratio),
                range(ratio).c_str());
  }
  return 0;
}
