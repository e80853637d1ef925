// weft_train_demo: data-parallel training of a small MLP with weft, the way DDP does it.
//
//   weft run -n 4 build/examples/weft_train_demo [--steps 60] [--hidden 8192] ...
//
// Every rank holds a full copy of the model and its own shard of synthetic data (seeded by rank).
// Each step computes gradients locally, averages them across ranks with one allreduce (avg, fp32,
// one flat buffer) and applies SGD, so the copies stay identical. Rank 0 prints the loss
// (averaged over ranks), the step time, and the time and bus bandwidth of the gradient allreduce.
// At the end the ranks verify that they hold identical parameters (allreduce max and min agree)
// and that the loss fell; the exit code is non-zero otherwise.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "mlp.h"
#include "weft/communicator.h"

namespace {

using Clock = std::chrono::steady_clock;
using weft::Communicator;
using weft::DataType;
using weft::ReduceOp;
using weft::examples::Mlp;
using weft::examples::MlpShape;

struct DemoArgs {
  MlpShape shape;
  int steps = 60;
  size_t batch = 16;
  size_t samples = 1024;  // per rank
  float learning_rate = 0.1f;
  int print_every = 10;
};

std::string fmt_float(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
  return buf;
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Exits with a message naming the rank when a collective fails.
void check(const weft::Status& st, int rank, const char* what) {
  if (st.ok()) return;
  std::fprintf(stderr, "weft_train_demo: rank %d: %s failed: %s\n", rank, what,
               st.to_string().c_str());
  std::exit(1);
}

// Elements whose value differs between ranks (their max and min across ranks differ).
size_t count_divergent(Communicator& comm, std::span<float> params) {
  std::vector<float> hi(params.size()), lo(params.size());
  check(comm.allreduce(params.data(), hi.data(), params.size(), DataType::fp32, ReduceOp::max),
        comm.rank(), "allreduce(max) of the parameters");
  check(comm.allreduce(params.data(), lo.data(), params.size(), DataType::fp32, ReduceOp::min),
        comm.rank(), "allreduce(min) of the parameters");
  size_t divergent = 0;
  for (size_t i = 0; i < params.size(); ++i) divergent += hi[i] != lo[i];  // NaN counts too
  return divergent;
}

int train(const DemoArgs& args) {
  auto created = Communicator::from_env();
  if (!created.ok()) {
    std::fprintf(stderr,
                 "weft_train_demo: cannot join the job (run it under `weft run -n N`): "
                 "%s\n",
                 created.status().to_string().c_str());
    return 1;
  }
  Communicator& comm = *created.value();
  const int rank = comm.rank(), n = comm.size();
  auto say = [rank](const std::string& line) {
    if (rank != 0) return;
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  };

  Mlp model(args.shape, args.batch, /*seed=*/42);
  auto params = model.parameters();
  auto grads = model.gradients();
  // Like DDP: start every replica from rank 0's parameters.
  check(comm.broadcast(params.data(), params.size(), DataType::fp32, 0), rank, "broadcast");
  auto data = weft::examples::make_dataset(args.shape, args.samples, /*teacher_seed=*/1234,
                                           /*data_seed=*/1000 + static_cast<uint64_t>(rank));
  const double grad_bytes = static_cast<double>(grads.size_bytes());
  say("weft_train_demo: " + std::to_string(n) + " ranks, " + std::to_string(params.size()) +
      " parameters (" + std::to_string(grads.size_bytes() >> 20) + " MiB of gradients), batch " +
      std::to_string(args.batch) + " per rank, lr " + fmt_float(args.learning_rate));

  // The loss must fall: compare the first step with the mean of the last few (one step is noisy).
  const int tail = std::min(args.steps, 5);
  float first_loss = 0, tail_loss = 0;
  double total_allreduce_ms = 0;
  for (int step = 0; step < args.steps; ++step) {
    auto step_start = Clock::now();
    size_t first = (static_cast<size_t>(step) * args.batch) % (args.samples - args.batch + 1);
    float local_loss =
        model.forward_backward(data.x.data() + first * args.shape.inputs,
                               data.target.data() + first * args.shape.outputs, args.batch);
    auto reduce_start = Clock::now();
    check(comm.allreduce(grads.data(), grads.data(), grads.size(), DataType::fp32, ReduceOp::avg),
          rank, "gradient allreduce");
    double allreduce_ms = ms_since(reduce_start);
    total_allreduce_ms += allreduce_ms;
    model.sgd_step(args.learning_rate);
    float loss = 0;
    check(comm.allreduce(&local_loss, &loss, 1, DataType::fp32, ReduceOp::avg), rank,
          "loss allreduce");
    double step_ms = ms_since(step_start);
    if (step == 0) first_loss = loss;
    if (step >= args.steps - tail) tail_loss += loss / static_cast<float>(tail);
    if (step % args.print_every == 0 || step == args.steps - 1) {
      double busbw = grad_bytes * 2.0 * (n - 1) / n / (allreduce_ms * 1e6);  // GB/s
      char line[160];
      std::snprintf(line, sizeof line,
                    "step %4d  loss %.4f  step %7.1f ms  allreduce %7.1f ms  busbw %6.2f GB/s",
                    step, loss, step_ms, allreduce_ms, busbw);
      say(line);
    }
  }

  size_t divergent = count_divergent(comm, params);
  bool loss_fell = tail_loss < 0.8f * first_loss;
  char summary[200];
  std::snprintf(summary, sizeof summary,
                "done: loss %.4f -> %.4f (mean of the last %d steps), mean allreduce %.1f ms, "
                "parameters %s",
                first_loss, tail_loss, tail, total_allreduce_ms / args.steps,
                divergent == 0 ? "identical on every rank" : "DIFFER between ranks");
  say(summary);
  if (divergent != 0) {
    std::fprintf(stderr, "weft_train_demo: rank %d: %zu parameters differ between ranks\n", rank,
                 divergent);
  }
  if (!loss_fell && rank == 0) {
    std::fprintf(stderr, "weft_train_demo: the loss did not fall by 20%% (%.4f -> %.4f)\n",
                 first_loss, tail_loss);
  }
  check(comm.shutdown(), rank, "shutdown");
  return divergent == 0 && loss_fell ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Data-parallel MLP training over weft (run under `weft run -n N`)"};
  DemoArgs args;
  app.add_option("--steps", args.steps, "Training steps")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--batch", args.batch, "Samples per rank per step")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--samples", args.samples, "Samples in each rank's shard")->capture_default_str();
  app.add_option("--inputs", args.shape.inputs, "Input features")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--hidden", args.shape.hidden,
                 "Hidden units (parameters: about hidden x (inputs + outputs))")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--outputs", args.shape.outputs, "Outputs")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--lr", args.learning_rate, "SGD learning rate")->capture_default_str();
  app.add_option("--print-every", args.print_every, "Print every K steps")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (args.samples < args.batch) {
    std::fprintf(stderr, "weft_train_demo: --samples must be at least --batch\n");
    return 2;
  }
  return train(args);
}
