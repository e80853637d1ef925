// An allreduce with only the installed public headers and libweft.so. Under a launcher (`weft run
// -n N consumer`: WEFT_SIZE is set) every rank adds rank + 1; otherwise 2 ranks as threads of this
// process over a memory store.
#include <weft/weft.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

namespace {

int launched() {
  auto comm = weft::Communicator::from_env();
  if (!comm.ok()) {
    std::fprintf(stderr, "%s\n", comm.status().to_string().c_str());
    return 1;
  }
  const int rank = comm.value()->rank(), n = comm.value()->size();
  int v = rank + 1, sum = 0;
  weft::Status st = comm.value()->allreduce(&v, &sum, 1, weft::DataType::int32,
                                            weft::ReduceOp::sum);
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.to_string().c_str());
    return 1;
  }
  std::printf("weft %s consumer: rank %d of %d: %d\n", WEFT_VERSION_STRING, rank, n, sum);
  return sum == n * (n + 1) / 2 ? 0 : 1;
}

int threads() {
  auto store = weft::make_memory_store();
  int result[2] = {0, 0};
  bool ok[2] = {false, false};
  auto rank_main = [&](int rank) {
    weft::Options o;
    o.rank = rank;
    o.size = 2;
    auto comm = weft::Communicator::create(o, store);
    if (!comm.ok()) {
      std::fprintf(stderr, "rank %d: %s\n", rank, comm.status().to_string().c_str());
      return;
    }
    int v = rank + 1;
    ok[rank] = comm.value()->allreduce(&v, &result[rank], 1, weft::DataType::int32,
                                       weft::ReduceOp::sum).ok();
  };
  std::thread t0(rank_main, 0), t1(rank_main, 1);
  t0.join();
  t1.join();
  std::printf("weft %s consumer: %d %d\n", WEFT_VERSION_STRING, result[0], result[1]);
  return ok[0] && ok[1] && result[0] == 3 && result[1] == 3 ? 0 : 1;
}

}  // namespace

int main() { return std::getenv("WEFT_SIZE") != nullptr ? launched() : threads(); }
