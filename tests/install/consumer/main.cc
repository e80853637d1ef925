// Allreduce over 2 ranks (threads) with only the installed public headers and libweft.so.
#include <weft/weft.h>

#include <cstdio>
#include <thread>

int main() {
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
