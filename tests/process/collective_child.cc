// weft_process_child: a rank program for failure tests under `weft run`.
//
//   weft_process_child VICTIM ITERATIONS [kill|stop|mismatch|abort]
//
// Joins through Communicator::from_env and runs ITERATIONS small allreduces. Rank VICTIM, after
// half of them, sends itself SIGKILL (dies) or SIGSTOP (hangs), calls a broadcast instead of the
// allreduce (mismatch), or calls abort() and exits 9 (abort). The other ranks ignore SIGTERM,
// so the launcher's clean-up cannot hide what the library reports: each prints
// "rank R: failed after S s: <status>" and exits 7 when an operation fails, or exits 0 when all
// succeed. A VICTIM of -1 runs the loop to the end on every rank.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "weft/communicator.h"

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
  ::signal(SIGTERM, SIG_IGN);

  auto comm = weft::Communicator::from_env();
  if (!comm.ok()) {
    std::fprintf(stderr, "cannot create the communicator: %s\n", comm.status().to_string().c_str());
    return 1;
  }
  const int rank = comm.value()->rank();
  float in[64], out[64];
  for (float& v : in) v = static_cast<float>(rank);
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) {
    const bool turn = rank == victim && i == iterations / 2;
    if (turn && abort_mode) {
      comm.value()->abort("the test asked rank " + std::to_string(rank) + " to abort");
      std::printf("rank %d: aborted\n", rank);
      std::fflush(stdout);
      std::_Exit(9);
    }
    if (turn && !mismatch) ::kill(::getpid(), fault);
    weft::Status st =
        turn ? comm.value()->broadcast(in, 64, weft::DataType::fp32, 0)
             : comm.value()->allreduce(in, out, 64, weft::DataType::fp32, weft::ReduceOp::sum);
    if (!st.ok()) {
      std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
      std::printf("rank %d: failed after %.1f s: %s\n", rank, elapsed.count(),
                  st.to_string().c_str());
      std::fflush(stdout);
      std::_Exit(7);  // skip the destructor: the communicator is broken anyway
    }
  }
  std::printf("rank %d: all %d allreduces done\n", rank, iterations);
  return 0;
}
