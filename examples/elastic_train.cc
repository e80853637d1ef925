// weft_elastic_demo: data-parallel training that survives a dead rank and takes in a new one.
//
//   weft run -n 4 --respawn 1 build/examples/weft_elastic_demo --kill-rank 2 --kill-step 20
//
// Like weft_train_demo (every rank holds the model, gradients are averaged with one allreduce),
// plus fault tolerance:
//  - at --kill-step, rank --kill-rank starts the gradient allreduce and SIGKILLs itself while the
//    others are in it;
//  - the survivors' allreduce fails naming the dead rank; they shrink() the communicator (new
//    dense ranks), redo that step's allreduce on it (the gradients were reduced out of place, so
//    nothing has to be reloaded) and go on;
//  - `weft run --respawn 1` starts a replacement with WEFT_JOIN=1, whose Communicator::from_env
//    waits in join(); every --grow-every steps rank 0 looks for waiting ranks and, if there are
//    any, all members call grow(), then rank 0 sends the step and the parameters to everyone;
//    --regrow-after steps after a shrink the members grow() by the ranks they lost, waiting for
//    the replacements.
// Each step checks that the averaged gradient is the mean over exactly size() ranks, and the end
// checks that every replica holds the same parameters and that the loss fell.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "mlp.h"
#include "weft/communicator.h"

namespace {

using weft::Communicator;
using weft::DataType;
using weft::ReduceOp;
using weft::examples::Mlp;
using weft::examples::MlpShape;

struct Args {
  MlpShape shape{32, 4096, 32};  // 266K parameters: about 1 MiB of gradients
  int steps = 60;
  size_t batch = 16;
  size_t samples = 512;
  float learning_rate = 0.02f;
  int kill_rank = -1;
  int kill_step = -1;
  int grow_every = 5;
  int regrow_after = 10;
  int print_every = 10;
};

void die(int rank, const std::string& what, const weft::Status& st) {
  std::fprintf(stderr, "weft_elastic_demo: rank %d: %s: %s\n", rank, what.c_str(),
               st.to_string().c_str());
  std::exit(1);
}

void say(const Communicator& comm, const std::string& line, bool every_rank = false) {
  if (!every_rank && comm.rank() != 0) return;
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

std::string str(double v, int precision = 4) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", precision, v);
  return buf;
}

class Trainer {
 public:
  Trainer(const Args& args, std::unique_ptr<Communicator> comm, bool joined)
      : args_(args),
        comm_(std::move(comm)),
        slot_(comm_->rank()),
        model_(args.shape, args.batch, /*seed=*/42),
        local_(model_.gradients().size() + 2),
        reduced_(local_.size()),
        data_(weft::examples::make_dataset(args.shape, args.samples, /*teacher_seed=*/1234,
                                           /*data_seed=*/1000 + static_cast<uint64_t>(slot_))) {
    if (joined) {
      std::printf("joined as rank %d of %d\n", comm_->rank(), comm_->size());
      std::fflush(stdout);
      receive_state();
    } else {
      auto p = model_.parameters();
      check(comm_->broadcast(p.data(), p.size(), DataType::fp32, 0), "broadcast");
      say(*comm_, "weft_elastic_demo: " + std::to_string(comm_->size()) + " ranks, " +
                      std::to_string(p.size()) + " parameters");
    }
  }

  int run() {
    const int tail = std::min(args_.steps, 5);
    float tail_loss = 0;
    for (; step_ < args_.steps; ++step_) {
      const size_t first =
          (static_cast<size_t>(step_) * args_.batch) % (args_.samples - args_.batch + 1);
      const float local_loss = model_.forward_backward(
          data_.x.data() + first * args_.shape.inputs,
          data_.target.data() + first * args_.shape.outputs, args_.batch);
      const float loss = reduce_step(local_loss);
      model_.sgd_step(args_.learning_rate);
      if (step_ == 0) first_loss_ = loss;
      if (step_ >= args_.steps - tail) tail_loss += loss / static_cast<float>(tail);
      if (step_ % args_.print_every == 0 || step_ == args_.steps - 1) {
        say(*comm_, "step " + std::to_string(step_) + "  loss " + str(loss) + "  ranks " +
                        std::to_string(comm_->size()));
      }
      if (lost_ > 0 && step_ == regrow_at_) {
        grow(lost_);  // the replacements (weft run --respawn) are waited for
      } else if (lost_ == 0 && args_.grow_every > 0 && (step_ + 1) % args_.grow_every == 0) {
        maybe_grow();
      }
    }
    const size_t divergent = count_divergent();
    const bool fell = tail_loss < 0.8f * first_loss_;
    say(*comm_, "done: " + std::to_string(comm_->size()) + " ranks, loss " + str(first_loss_) +
                    " -> " + str(tail_loss) + ", shrinks " + std::to_string(shrinks_) +
                    ", grows " + std::to_string(grows_) + ", parameters " +
                    (divergent == 0 ? "identical on every rank" : "DIFFER between ranks"));
    check(comm_->shutdown(), "shutdown");
    return divergent == 0 && fell ? 0 : 1;
  }

 private:
  void check(const weft::Status& st, const std::string& what) {
    if (!st.ok()) die(comm_->rank(), what, st);
  }

  // One allreduce per step (sum) of [gradients..., loss, 1]: the last element counts the ranks
  // that contributed, so a step averaged over the wrong number of ranks cannot go unnoticed. Out
  // of place: the local values survive a failed allreduce and are sent again after the shrink.
  float reduce_step(float local_loss) {
    auto grads = model_.gradients();
    const size_t n = grads.size();
    std::copy(grads.begin(), grads.end(), local_.begin());
    local_[n] = local_loss;
    local_[n + 1] = 1.0f;
    const bool victim = slot_ == args_.kill_rank && step_ == args_.kill_step && !replaced_;
    if (victim) {
      std::printf("rank %d: killing myself in the gradient allreduce of step %d\n", comm_->rank(),
                  step_);
      std::fflush(stdout);
      // From another thread, while this one is inside the allreduce below.
      static std::atomic<bool> armed{false};
      std::thread([] {
        armed = true;
        std::this_thread::sleep_for(std::chrono::microseconds(20));
        ::kill(::getpid(), SIGKILL);
      }).detach();
      while (!armed) std::this_thread::yield();
    }
    while (true) {
      weft::Status st = comm_->allreduce(local_.data(), reduced_.data(), local_.size(),
                                         DataType::fp32, ReduceOp::sum);
      while (victim) ::pause();  // the allreduce may end before the signal lands
      if (st.ok()) break;
      say(*comm_, "step " + std::to_string(step_) + ": allreduce failed: " + st.to_string(), true);
      auto smaller = comm_->shrink();
      if (!smaller.ok()) die(comm_->rank(), "shrink", smaller.status());
      lost_ += comm_->size() - smaller.value()->size();
      comm_ = std::move(smaller.value());
      ++shrinks_;
      regrow_at_ = args_.regrow_after >= 0 ? step_ + args_.regrow_after : -1;
      say(*comm_, "shrunk to " + std::to_string(comm_->size()) + " ranks; redoing step " +
                      std::to_string(step_));
    }
    const float ranks = reduced_[n + 1];
    if (ranks != static_cast<float>(comm_->size())) {
      std::fprintf(stderr,
                   "weft_elastic_demo: rank %d: step %d: %g ranks contributed to the average, "
                   "expected %d\n",
                   comm_->rank(), step_, static_cast<double>(ranks), comm_->size());
      std::exit(1);
    }
    for (size_t i = 0; i < n; ++i) grads[i] = reduced_[i] / ranks;
    return reduced_[n] / ranks;
  }

  void maybe_grow() {
    int waiting = 0;
    if (comm_->rank() == 0) {
      auto n = comm_->pending_joins();
      if (!n.ok()) die(0, "pending_joins", n.status());
      waiting = n.value();
    }
    check(comm_->broadcast(&waiting, 1, DataType::int32, 0), "broadcast");
    if (waiting > 0) grow(waiting);
  }

  void grow(int count) {
    say(*comm_, "after step " + std::to_string(step_) + ": growing by " + std::to_string(count) +
                    " rank(s)");
    auto grown = comm_->grow(count);
    if (!grown.ok()) die(comm_->rank(), "grow", grown.status());
    comm_ = std::move(grown.value());
    ++grows_;
    lost_ = std::max(0, lost_ - count);
    say(*comm_, "grew to " + std::to_string(comm_->size()) + " ranks after step " +
                    std::to_string(step_));
    send_state();
  }

  // Rank 0's step and parameters reach every rank (the joiners call receive_state()).
  void send_state() {
    double state[2] = {static_cast<double>(step_ + 1), first_loss_};
    check(comm_->broadcast(state, 2, DataType::fp64, 0), "broadcast step");
    auto p = model_.parameters();
    check(comm_->broadcast(p.data(), p.size(), DataType::fp32, 0), "broadcast parameters");
  }
  void receive_state() {
    double state[2] = {0, 0};
    check(comm_->broadcast(state, 2, DataType::fp64, 0), "broadcast step");
    auto p = model_.parameters();
    check(comm_->broadcast(p.data(), p.size(), DataType::fp32, 0), "broadcast parameters");
    step_ = static_cast<int>(state[0]);
    replaced_ = true;
    first_loss_ = static_cast<float>(state[1]);
  }

  size_t count_divergent() {
    auto p = model_.parameters();
    std::vector<float> hi(p.size()), lo(p.size());
    check(comm_->allreduce(p.data(), hi.data(), p.size(), DataType::fp32, ReduceOp::max), "max");
    check(comm_->allreduce(p.data(), lo.data(), p.size(), DataType::fp32, ReduceOp::min), "min");
    size_t n = 0;
    for (size_t i = 0; i < p.size(); ++i) n += hi[i] != lo[i];
    return n;
  }

  const Args& args_;
  std::unique_ptr<Communicator> comm_;
  const int slot_;  // rank at start, fixes the data shard and the victim
  Mlp model_;
  std::vector<float> local_;    // this rank's gradients, loss and 1
  std::vector<float> reduced_;  // their sums over the ranks
  weft::examples::Dataset data_;
  int step_ = 0;
  int shrinks_ = 0;
  int grows_ = 0;
  int lost_ = 0;         // ranks lost and not yet replaced
  int regrow_at_ = -1;   // the step after which grow(lost_) waits for replacements
  bool replaced_ = false;
  float first_loss_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Fault-tolerant data-parallel training over weft (run under `weft run --respawn`)"};
  Args args;
  app.add_option("--steps", args.steps, "Training steps")->capture_default_str();
  app.add_option("--hidden", args.shape.hidden, "Hidden units")->capture_default_str();
  app.add_option("--kill-rank", args.kill_rank, "Rank that SIGKILLs itself (-1: none)")
      ->capture_default_str();
  app.add_option("--kill-step", args.kill_step, "Step in whose allreduce it does")
      ->capture_default_str();
  app.add_option("--grow-every", args.grow_every, "Look for joining ranks every K steps (0: never)")
      ->capture_default_str();
  app.add_option("--regrow-after", args.regrow_after,
                 "Steps after a shrink at which the members grow() back to full size, waiting for "
                 "the replacements (-1: only when --grow-every finds joiners)")
      ->capture_default_str();
  app.add_option("--print-every", args.print_every, "Print every K steps")->capture_default_str();
  app.add_option("--lr", args.learning_rate, "SGD learning rate")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const char* join = std::getenv("WEFT_JOIN");
  const bool joining = join != nullptr && std::string(join) == "1";
  auto comm = Communicator::from_env();
  if (!comm.ok()) {
    std::fprintf(stderr, "weft_elastic_demo: cannot %s the job: %s\n", joining ? "join" : "start",
                 comm.status().to_string().c_str());
    return 1;
  }
  Trainer trainer(args, std::move(comm.value()), joining);
  return trainer.run();
}
