// Gloo baseline for bench/compare.sh: gloo::allreduce (ring algorithm, f32 sum) over Gloo's TCP
// transport on 127.0.0.1, printing the columns of `weft bench` (out of place: separate input and
// output buffers; in place: output only). Time is the max over ranks of the per-iteration mean.
//
// Rank and size come from the launcher's WEFT_RANK / WEFT_SIZE; the ranks meet through a Gloo
// FileStore in a directory they share (fresh per run):
//   weft run -n 4 gloo_allreduce --store /tmp/x -b 8 -e 64M -f 4 -n 20 -w 5
#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

struct Args {
  std::string store_dir;
  size_t min_bytes = 8, max_bytes = 64 << 20, factor = 4;
  int iters = 20, warmup = 5;
};

size_t parse_size(const char* s) {
  char* end = nullptr;
  size_t v = std::strtoull(s, &end, 10);
  switch (*end) {
    case 'k':
    case 'K':
      return v << 10;
    case 'm':
    case 'M':
      return v << 20;
    case 'g':
    case 'G':
      return v << 30;
    default:
      return v;
  }
}

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v) {
    std::fprintf(stderr, "gloo_allreduce: %s is not set (run under `weft run -n N`)\n", name);
    std::exit(2);
  }
  return std::atoi(v);
}

float input(int rank, size_t i) { return static_cast<float>((rank * 5 + i) % 9 + 1); }

class Bench {
 public:
  Bench(std::shared_ptr<gloo::Context> ctx, const Args& args) : ctx_(std::move(ctx)), args_(args) {
    size_t max_count = args.max_bytes / sizeof(float);
    send_.assign(max_count, 0.0f);  // touched now, not while timing
    recv_.assign(max_count, 0.0f);
  }

  void allreduce(size_t count, bool in_place) {
    gloo::AllreduceOptions opts(ctx_);
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    if (!in_place) opts.setInput(send_.data(), count);
    opts.setOutput(recv_.data(), count);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    opts.setTag(tag_++);
    gloo::allreduce(opts);
  }

  double max_over_ranks(double local) {
    double v = local;
    gloo::AllreduceOptions opts(ctx_);
    opts.setOutput(&v, 1);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::max<double>));
    opts.setTag(tag_++);
    gloo::allreduce(opts);
    return v;
  }

  // Mean microseconds per call (max over ranks) and wrong elements on this rank.
  void measure(size_t count, bool in_place, double& time_us, long& wrong) {
    float* data = in_place ? recv_.data() : send_.data();
    for (size_t i = 0; i < count; ++i) data[i] = input(ctx_->rank, i);
    for (int i = 0; i < args_.warmup; ++i) allreduce(count, in_place);
    max_over_ranks(0);  // a barrier
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < args_.iters; ++i) allreduce(count, in_place);
    std::chrono::duration<double, std::micro> elapsed = std::chrono::steady_clock::now() - start;
    time_us = max_over_ranks(elapsed.count() / args_.iters);
    for (size_t i = 0; i < count; ++i) data[i] = input(ctx_->rank, i);
    allreduce(count, in_place);
    wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      float expected = 0;
      for (int r = 0; r < ctx_->size; ++r) expected += input(r, i);
      if (recv_[i] != expected) ++wrong;
    }
  }

 private:
  std::shared_ptr<gloo::Context> ctx_;
  const Args& args_;
  std::vector<float> send_, recv_;
  uint32_t tag_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  Args args;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--store")
      args.store_dir = argv[i + 1];
    else if (flag == "-b")
      args.min_bytes = parse_size(argv[i + 1]);
    else if (flag == "-e")
      args.max_bytes = parse_size(argv[i + 1]);
    else if (flag == "-f")
      args.factor = parse_size(argv[i + 1]);
    else if (flag == "-n")
      args.iters = std::atoi(argv[i + 1]);
    else if (flag == "-w")
      args.warmup = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "gloo_allreduce: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (args.store_dir.empty() || args.min_bytes < 4 || args.factor < 2 || args.iters < 1) {
    std::fprintf(stderr, "gloo_allreduce: need --store DIR, -b >= 4, -f >= 2, -n >= 1\n");
    return 2;
  }
  const int rank = env_int("WEFT_RANK"), size = env_int("WEFT_SIZE");

  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  attr.ai_family = AF_INET;
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore file_store(args.store_dir);
  gloo::rendezvous::PrefixStore store("gloo_allreduce", file_store);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  ctx->setTimeout(std::chrono::seconds(120));
  ctx->connectFullMesh(store, device);

  Bench bench(ctx, args);
  if (rank == 0) {
    std::printf("# gloo_allreduce (ring): world size %d, %d iterations after %d warm-up\n", size,
                args.iters, args.warmup);
    std::printf("# %13s %12s %6s %6s %5s %10s %8s %8s %6s %10s %8s %8s %6s\n", "size", "count",
                "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
                "busbw", "#wrong");
  }
  const double bus_factor = 2.0 * (size - 1) / size;
  for (size_t bytes = args.min_bytes; bytes <= args.max_bytes; bytes *= args.factor) {
    size_t count = bytes / sizeof(float);
    double t[2];
    long wrong[2];
    for (int in_place = 0; in_place < 2; ++in_place) {
      bench.measure(count, in_place != 0, t[in_place], wrong[in_place]);
    }
    if (rank == 0) {
      size_t b = count * sizeof(float);
      std::printf("  %13zu %12zu %6s %6s %5d", b, count, "f32", "sum", -1);
      for (int k = 0; k < 2; ++k) {
        double algbw = static_cast<double>(b) / (t[k] * 1e3);
        std::printf(" %10.2f %8.3f %8.3f %6ld", t[k], algbw, algbw * bus_factor, wrong[k]);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
    if (bytes > args.max_bytes / args.factor) break;
  }
  return 0;
}
