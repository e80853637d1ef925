// weft_process_child: a rank program for failure tests under `weft run`.
//
//   weft_process_child VICTIM ITERATIONS [kill|stop|mismatch|abort|revoke|absent|late] [OP]
//
// Joins through Communicator::from_env and runs ITERATIONS small collectives OP (allreduce by
// default; also broadcast, reduce, allgather, allgatherv, reduce_scatter, gather, scatter,
// alltoall, alltoallv, barrier). Rank VICTIM, after half of them, sends itself SIGKILL (dies) or SIGSTOP (hangs),
// calls a broadcast instead (mismatch), calls abort() and exits 9 (abort), calls revoke() and
// prints the status its next collective gets (revoke), or sleeps for a minute instead of calling
// the collective (absent: alive, but never enters it; $CHILD_ABSENT_SECONDS sets how long),
// or sleeps 2 s before its first collective
// (late: the others print how much CPU their process used while blocked in that first one, as
// "rank R: blocked W s, cpu C s"). A barrier follows the loop. The other
// ranks ignore SIGTERM, so the launcher's clean-up cannot hide what the library reports: each prints
// "rank R: failed after S s: <status>" and exits 7 when an operation fails, or exits 0 when all
// succeed. A VICTIM of -1 runs the loop to the end on every rank.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "weft/communicator.h"

namespace {

weft::Status run_op(weft::Communicator& c, const std::string& op, float* in, float* out) {
  using weft::DataType;
  using weft::ReduceOp;
  constexpr size_t kCount = 8;  // per rank: buffers hold 64 floats, enough for 8 ranks
  if (op == "broadcast") return c.broadcast(in, kCount, DataType::fp32, 0);
  if (op == "reduce") return c.reduce(in, out, kCount, DataType::fp32, ReduceOp::sum, 0);
  if (op == "allgather") return c.allgather(in, out, kCount, DataType::fp32);
  if (op == "reduce_scatter") return c.reduce_scatter(in, out, kCount, DataType::fp32, ReduceOp::sum);
  if (op == "gather") return c.gather(in, out, kCount, DataType::fp32, 0);
  if (op == "scatter") return c.scatter(in, out, kCount, DataType::fp32, 0);
  if (op == "alltoall") return c.alltoall(in, out, kCount, DataType::fp32);
  if (op == "barrier") return c.barrier();
  if (op == "allgatherv" || op == "alltoallv") {
    const std::vector<size_t> counts(static_cast<size_t>(c.size()), kCount);
    std::vector<size_t> displs(counts.size());
    for (size_t r = 0; r < displs.size(); ++r) displs[r] = r * kCount;
    if (op == "allgatherv") return c.allgatherv(in, kCount, out, counts, displs, DataType::fp32);
    return c.alltoallv(in, counts, displs, out, counts, displs, DataType::fp32);
  }
  return c.allreduce(in, out, 64, DataType::fp32, ReduceOp::sum);
}

// User plus system CPU time of the whole process (every thread), in seconds.
double process_cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s VICTIM ITERATIONS [kill|stop]\n", argv[0]);
    return 2;
  }
  const int victim = std::atoi(argv[1]);
  const int iterations = std::atoi(argv[2]);
  const char* mode = argc > 3 ? argv[3] : "kill";
  const int fault = std::strcmp(mode, "stop") == 0 ? SIGSTOP : SIGKILL;
  const bool mismatch = std::strcmp(mode, "mismatch") == 0;
  const bool abort_mode = std::strcmp(mode, "abort") == 0;
  const bool revoke_mode = std::strcmp(mode, "revoke") == 0;
  const bool absent_mode = std::strcmp(mode, "absent") == 0;
  const bool late_mode = std::strcmp(mode, "late") == 0;
  const std::string op = argc > 4 ? argv[4] : "allreduce";
  ::signal(SIGTERM, SIG_IGN);

  auto comm = weft::Communicator::from_env();
  if (!comm.ok()) {
    std::fprintf(stderr, "cannot create the communicator: %s\n", comm.status().to_string().c_str());
    return 1;
  }
  const int rank = comm.value()->rank();
  if (rank == 0 && std::getenv("WEFT_STORE_ADDR") != nullptr) {
    std::printf("rank 0: store %s\n", std::getenv("WEFT_STORE_ADDR"));  // for `weft diag`
    std::fflush(stdout);
  }
  float in[512], out[512];
  for (float& v : in) v = static_cast<float>(rank);
  auto start = std::chrono::steady_clock::now();
  // One barrier after the loop: a rank whose part of a rooted collective never needed the
  // victim (a leaf of a broadcast) still has to learn about it before it may finish.
  for (int i = 0; i <= iterations; ++i) {
    const bool turn = rank == victim && i == iterations / 2;
    const std::string this_op = i == iterations ? "barrier" : op;
    if (turn && abort_mode) {
      comm.value()->abort("the test asked rank " + std::to_string(rank) + " to abort");
      std::printf("rank %d: aborted\n", rank);
      std::fflush(stdout);
      std::_Exit(9);
    }
    if (turn && revoke_mode) {
      comm.value()->revoke();
      weft::Status next = comm.value()->barrier();
      std::printf("rank %d: revoked; next operation: %s\n", rank, next.to_string().c_str());
      std::fflush(stdout);
      std::_Exit(0);
    }
    if (turn && absent_mode) {
      const char* secs = std::getenv("CHILD_ABSENT_SECONDS");  // default a minute
      std::this_thread::sleep_for(std::chrono::seconds(secs != nullptr ? std::atoi(secs) : 60));
      std::_Exit(0);
    }
    if (late_mode) {
      if (i == 0 && rank == victim) std::this_thread::sleep_for(std::chrono::seconds(2));
    } else if (turn && !mismatch) {
      ::kill(::getpid(), fault);
    }
    const double cpu0 = process_cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    weft::Status st = turn && mismatch ? comm.value()->broadcast(in, 64, weft::DataType::fp32, 0)
                                       : run_op(*comm.value(), this_op, in, out);
    if (late_mode && i == 0 && rank != victim) {
      const std::chrono::duration<double> blocked = std::chrono::steady_clock::now() - t0;
      std::printf("rank %d: blocked %.3f s, cpu %.3f s\n", rank, blocked.count(),
                  process_cpu_seconds() - cpu0);
      std::fflush(stdout);
    }
    if (!st.ok()) {
      std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
      std::printf("rank %d: failed after %.1f s: %s\n", rank, elapsed.count(),
                  st.to_string().c_str());
      std::fflush(stdout);
      std::_Exit(7);  // skip the destructor: the communicator is broken anyway
    }
  }
  std::printf("rank %d: all %d %ss done\n", rank, iterations, op.c_str());
  return 0;
}
