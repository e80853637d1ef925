// weft._weft_torch: the c10d ProcessGroup behind torch.distributed's backend "weft".
//
// Every torch call starts the matching asynchronous weft operation on the calling thread (so
// operations start in call order on every rank) and returns a Work. A collective's Work is
// completed by the thread that finishes the collective (weft's executor, or the thread that
// waits on the Work when weft had not started it yet: then no thread hand-off at all); one
// completion thread per process group waits for point-to-point operations in call order.
// Completing copies results into tensors that were not contiguous or came as lists, then
// completes the Work and its Future (DDP waits on the Future). Rendezvous goes through the c10d
// Store torch passes in; no extra port is opened.
//
// All torch-facing code lives in this one translation unit: torch headers are expensive to
// compile (see PLATFORM.md).
#include <ATen/SparseTensorUtils.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/python.h>

#include <pybind11/chrono.h>

#include <condition_variable>
#include <cstdio>
#include <deque>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "weft/weft.h"

namespace py = pybind11;

namespace weft::torch_backend {
namespace {

// ---------------------------------------------------------------------------------------------
// The c10d Store as a weft Store.

class C10dStore final : public Store {
 public:
  explicit C10dStore(c10::intrusive_ptr<c10d::Store> s) : s_(std::move(s)) {}

  Status set(std::string_view key, const Bytes& value) override {
    return guard([&] { s_->set(std::string(key), value); });
  }
  Result<Bytes> get(std::string_view key, std::chrono::milliseconds timeout) override {
    Bytes out;
    Status st = guard([&] {
      std::string k(key);
      s_->wait({k}, timeout);
      out = s_->get(k);
    });
    if (!st.ok()) return st;
    return out;
  }
  Result<int64_t> add(std::string_view key, int64_t delta) override {
    int64_t v = 0;
    Status st = guard([&] { v = s_->add(std::string(key), delta); });
    if (!st.ok()) return st;
    return v;
  }
  Status wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    return guard([&] { s_->wait(keys, timeout); });
  }
  Result<bool> check(const std::vector<std::string>& keys) override {
    bool v = false;
    Status st = guard([&] { v = s_->check(keys); });
    if (!st.ok()) return st;
    return v;
  }
  Status erase(std::string_view key) override {
    return guard([&] { s_->deleteKey(std::string(key)); });
  }

 private:
  // c10d stores throw; weft stores return a Status. A timeout is recognised by its message.
  template <typename F>
  static Status guard(F&& f) {
    try {
      f();
      return Status();
    } catch (const std::exception& e) {
      std::string what = e.what();
      bool timed_out = what.find("imeout") != std::string::npos ||
                       what.find("imed out") != std::string::npos;
      return Status(timed_out ? ErrorCode::timeout : ErrorCode::io,
                    "torch store: " + what.substr(0, what.find('\n')));
    }
  }

  c10::intrusive_ptr<c10d::Store> s_;
};

// ---------------------------------------------------------------------------------------------
// Conversions.

// bool tensors travel as their bytes (0 or 1), as with NCCL; weft_op says how they reduce.
DataType weft_dtype(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kBool:
    case at::kByte: return DataType::uint8;
    case at::kChar: return DataType::int8;
    case at::kInt: return DataType::int32;
    case at::kLong: return DataType::int64;
    case at::kHalf: return DataType::fp16;
    case at::kBFloat16: return DataType::bf16;
    case at::kFloat: return DataType::fp32;
    case at::kDouble: return DataType::fp64;
    default:
      TORCH_CHECK(false, "weft: tensors of type ", t.scalar_type(),
                  " are not supported (bool, int8, uint8, int32, int64, float16, bfloat16, "
                  "float32, float64)");
  }
}

// The reduction of tensors of t's type. bool as NCCL does it: SUM and MAX are a logical or (max
// of the 0/1 bytes), PRODUCT and MIN a logical and (min); BAND, BOR and BXOR act on the bytes as
// they are; AVG has no bool meaning.
ReduceOp weft_op(const c10d::ReduceOp& op, const at::Tensor& t) {
  if (t.scalar_type() == at::kBool) {
    switch (op.op_) {
      case c10d::ReduceOp::SUM:
      case c10d::ReduceOp::MAX: return ReduceOp::max;
      case c10d::ReduceOp::PRODUCT:
      case c10d::ReduceOp::MIN: return ReduceOp::min;
      case c10d::ReduceOp::AVG:
        TORCH_CHECK(false, "weft: ReduceOp.AVG is not supported for bool tensors");
      default: break;
    }
  }
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return ReduceOp::sum;
    case c10d::ReduceOp::PRODUCT: return ReduceOp::prod;
    case c10d::ReduceOp::MIN: return ReduceOp::min;
    case c10d::ReduceOp::MAX: return ReduceOp::max;
    case c10d::ReduceOp::AVG: return ReduceOp::avg;
    case c10d::ReduceOp::BAND: return ReduceOp::band;
    case c10d::ReduceOp::BOR: return ReduceOp::bor;
    case c10d::ReduceOp::BXOR: return ReduceOp::bxor;
    default:
      TORCH_CHECK(false, "weft: reduce op ", static_cast<int>(op.op_),
                  " is not supported (SUM, PRODUCT, MIN, MAX, AVG, BAND, BOR, BXOR)");
  }
}

void check_cpu(const at::Tensor& t) {
  TORCH_CHECK(t.device().is_cpu(), "weft: only CPU tensors are supported, got one on ",
              t.device());
  TORCH_CHECK(t.layout() == at::kStrided, "weft: ", t.layout(), " tensors are supported only "
              "by all_reduce (sparse COO, ReduceOp.SUM)");
  (void)weft_dtype(t);
}

void check_one(const std::vector<at::Tensor>& tensors, const char* op) {
  TORCH_CHECK(tensors.size() == 1, "weft: ", op, " takes exactly one tensor per rank, got ",
              tensors.size());
  check_cpu(tensors[0]);
}

void check_same(const at::Tensor& a, const at::Tensor& b, const char* op) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "weft: ", op, ": tensors differ in type (",
              a.scalar_type(), " vs ", b.scalar_type(), ")");
}

// A flat tensor holding the given tensors one after another.
at::Tensor flatten(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> flat;
  flat.reserve(tensors.size());
  for (const auto& t : tensors) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

// Copies consecutive pieces of flat (from element `offset`) into the tensors.
int64_t unflatten(const at::Tensor& flat, int64_t offset, const std::vector<at::Tensor>& tensors) {
  for (const auto& t : tensors) {
    int64_t n = t.numel();
    const_cast<at::Tensor&>(t).copy_(flat.narrow(0, offset, n).view(t.sizes()));
    offset += n;
  }
  return offset;
}

// ---------------------------------------------------------------------------------------------
// Sparse COO tensors: weft's sparse_allreduce sees a table of rows (the sparse dimensions,
// flattened row-major) of row_width elements (the dense dimensions).

struct SparseShape {
  int64_t num_rows = 1;
  int64_t row_width = 1;
};

SparseShape sparse_shape(const at::Tensor& t) {
  SparseShape s;
  const auto sizes = t.sizes();
  for (int64_t d = 0; d < static_cast<int64_t>(sizes.size()); ++d) {
    int64_t& n = d < t.sparse_dim() ? s.num_rows : s.row_width;
    TORCH_CHECK(!__builtin_mul_overflow(n, sizes[d], &n), "weft: all_reduce: the sparse "
                "tensor's size ", sizes, " overflows 64 bits");
  }
  return s;
}

// The row of each of t's entries: its sparse indices, flattened row-major (nnz int64s).
at::Tensor linear_rows(const at::Tensor& t) {
  const at::Tensor idx = t._indices();
  if (t.sparse_dim() == 1) return idx.select(0, 0).contiguous();
  at::Tensor rows = at::zeros({idx.size(1)}, idx.options());
  for (int64_t d = 0; d < t.sparse_dim(); ++d) rows = rows * t.size(d) + idx.select(0, d);
  return rows.contiguous();
}

// The inverse of linear_rows: sparse_dim x nnz indices.
at::Tensor sparse_indices(const at::Tensor& rows, const at::Tensor& t) {
  if (t.sparse_dim() == 1) return rows.view({1, rows.numel()});
  std::vector<at::Tensor> dims(static_cast<size_t>(t.sparse_dim()));
  at::Tensor rest = rows;
  for (int64_t d = t.sparse_dim() - 1; d >= 0; --d) {
    dims[static_cast<size_t>(d)] = rest.remainder(t.size(d));
    rest = rest.div(t.size(d), "floor");
  }
  return at::stack(dims);
}

// Puts weft's result into t in place (as gloo does): t's indices and values become tensors over
// the result's memory, which they keep alive.
void adopt_sparse_result(const at::Tensor& t, const std::shared_ptr<SparseRows>& r) {
  const auto nnz = static_cast<int64_t>(r->nnz);
  auto keep = [r](void*) {};
  at::Tensor rows = at::from_blob(r->indices.get(), {nnz}, keep, t._indices().options());
  std::vector<int64_t> value_sizes{nnz};
  for (int64_t d = t.sparse_dim(); d < t.dim(); ++d) value_sizes.push_back(t.size(d));
  at::Tensor values = at::from_blob(r->values.get(), value_sizes, keep, t._values().options());
  at::sparse::alias_into_sparse(t, sparse_indices(rows, t), values);
  at::sparse::get_sparse_impl(t)->set_coalesced(true);
}

std::string error_text(const Status& st) {
  // torch's timeout checks (regex " (Timed out|closed|timeout) ") and code written for gloo's
  // messages look for " Timed out ": weft's operations say it ("rank 0: barrier #1 Timed out
  // after 5 s waiting for rank 1"); other timeouts (the store's) get it added.
  if (st.code() != ErrorCode::timeout) return st.to_string();
  if (st.message().find(" Timed out ") != std::string::npos) return st.message();
  return "weft: an operation Timed out (" + st.message() + ")";
}

// ---------------------------------------------------------------------------------------------
// Work.

class WeftWork final : public c10d::Work {
 public:
  WeftWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
      : c10d::Work(rank, type), outputs_(std::move(outputs)) {
    future_ = c10::make_intrusive<c10::ivalue::Future>(
        c10::ListType::create(c10::TensorType::get()));
  }

  std::vector<at::Tensor> result() override { return outputs_; }

  // Waiting without a timeout on a collective weft has not started yet runs it on this thread
  // (Work::wait), sparing the hand-offs to weft's executor and back.
  bool wait(std::chrono::milliseconds timeout) override {
    if (timeout == kNoTimeout && op_) (void)op_->wait();
    return c10d::Work::wait(timeout);
  }
  // The collective behind this Work (it completes this Work when it finishes).
  void set_op(WorkPtr op) { op_ = std::move(op); }
  int sourceRank() const override { return source_; }  // the sender of a receive
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  // The Future first: whoever returns from wait() may read it at once.
  void complete(const Status& st, int source) {
    source_ = source;
    if (st.ok()) {
      future_->markCompleted(c10::IValue(outputs_));
      finish();
    } else {
      auto exc = std::make_exception_ptr(std::runtime_error(error_text(st)));
      future_->setError(exc);
      finish(exc);
    }
  }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  int source_ = -1;
  WorkPtr op_;
};

// ---------------------------------------------------------------------------------------------
// The process group.

class ProcessGroupWeft final : public c10d::ProcessGroup {
 public:
  ProcessGroupWeft(std::unique_ptr<Communicator> comm, int rank, int size)
      : c10d::ProcessGroup(rank, size), comm_(std::move(comm)) {
    init();
    completer_ = std::thread([this] { complete_loop(); });
  }

  // The communicator's metrics (Communicator::metrics): Prometheus text.
  std::string metrics() const { return comm_->metrics(); }

  ~ProcessGroupWeft() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    completer_.join();  // every started operation ends (or times out) first
  }

  const std::string getBackendName() const override { return "weft"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override {
    check_one(tensors, "broadcast");
    at::Tensor t = tensors[0], buf = t.contiguous();
    int root = static_cast<int>(opts.rootRank);
    return start(c10d::OpType::BROADCAST, tensors, {buf}, copy_back(t, buf), [=, this] {
      return comm_->broadcast_async(buf.data_ptr(), buf.numel(), weft_dtype(buf), root);
    });
  }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    if (tensors.size() == 1 && tensors[0].is_sparse()) return sparse_allreduce(tensors, opts);
    check_one(tensors, "allreduce");
    at::Tensor t = tensors[0], buf = t.contiguous();
    ReduceOp op = weft_op(opts.reduceOp, t);
    return start(c10d::OpType::ALLREDUCE, tensors, {buf}, copy_back(t, buf), [=, this] {
      return comm_->allreduce_async(buf.data_ptr(), buf.data_ptr(), buf.numel(),
                                    weft_dtype(buf), op);
    });
  }

  // A sparse COO tensor (an nn.Embedding(sparse=True) gradient, which DDP all-reduces): the
  // coalesced sum, in place, as with gloo.
  c10::intrusive_ptr<c10d::Work> sparse_allreduce(std::vector<at::Tensor>& tensors,
                                                  const c10d::AllreduceOptions& opts) {
    at::Tensor t = tensors[0];
    TORCH_CHECK(opts.reduceOp.op_ == c10d::ReduceOp::SUM, "weft: all_reduce of sparse tensors "
                "supports only ReduceOp.SUM");
    TORCH_CHECK(t.device().is_cpu(), "weft: only CPU tensors are supported, got one on ",
                t.device());
    TORCH_CHECK(t.scalar_type() != at::kBool, "weft: all_reduce of sparse bool tensors is not "
                "supported");
    const DataType dt = weft_dtype(t);
    const SparseShape shape = sparse_shape(t);
    at::Tensor rows = linear_rows(t), values = t._values().contiguous();
    auto result = std::make_shared<SparseRows>();
    return start(
        c10d::OpType::ALLREDUCE, tensors, {rows, values},
        [t, result] { adopt_sparse_result(t, result); },
        [=, this] {
          return comm_->sparse_allreduce_async(
              rows.data_ptr<int64_t>(), values.data_ptr(), static_cast<size_t>(rows.numel()),
              static_cast<size_t>(shape.num_rows), static_cast<size_t>(shape.row_width), dt,
              ReduceOp::sum, result.get());
        });
  }

  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override {
    TORCH_CHECK(!tensors.empty(), "weft: allreduce_coalesced needs at least one tensor");
    for (const auto& t : tensors) {
      check_cpu(t);
      check_same(t, tensors[0], "allreduce_coalesced");
    }
    at::Tensor flat = flatten(tensors);
    ReduceOp op = weft_op(opts.reduceOp, flat);
    std::vector<at::Tensor> outs = tensors;
    return start(
        c10d::OpType::ALLREDUCE_COALESCED, tensors, {flat}, [flat, outs] { unflatten(flat, 0, outs); },
        [=, this] {
          return comm_->allreduce_async(flat.data_ptr(), flat.data_ptr(), flat.numel(),
                                        weft_dtype(flat), op);
        });
  }

  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override {
    check_one(tensors, "reduce");
    at::Tensor t = tensors[0], buf = t.contiguous();
    ReduceOp op = weft_op(opts.reduceOp, t);
    int root = static_cast<int>(opts.rootRank);
    return start(c10d::OpType::REDUCE, tensors, {buf}, copy_back(t, buf), [=, this] {
      return comm_->reduce_async(buf.data_ptr(), buf.data_ptr(), buf.numel(), weft_dtype(buf), op,
                                 root);
    });
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions&) override {
    check_one(inputs, "allgather");
    TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(size_),
                "weft: allgather needs one output list of ", size_, " tensors");
    at::Tensor in = inputs[0].contiguous();
    for (const auto& o : outputs[0]) {
      check_same(o, in, "allgather");
      TORCH_CHECK(o.numel() == in.numel(), "weft: allgather: output tensors must have the "
                  "input's number of elements (", in.numel(), "), got ", o.numel());
    }
    at::Tensor flat = at::empty({in.numel() * size_}, in.options());
    std::vector<at::Tensor> outs = outputs[0];
    return start(
        c10d::OpType::ALLGATHER, outs, {in, flat}, [flat, outs] { unflatten(flat, 0, outs); },
        [=, this] {
          return comm_->allgather_async(in.data_ptr(), flat.data_ptr(), in.numel(),
                                        weft_dtype(in));
        });
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions&) override {
    check_cpu(input);
    check_same(output, input, "_allgather_base");
    TORCH_CHECK(output.numel() == input.numel() * size_, "weft: _allgather_base: output must "
                "have world_size * input.numel() elements");
    at::Tensor in = input.contiguous(), out = output.contiguous();
    return start(c10d::OpType::_ALLGATHER_BASE, {output}, {in, out}, copy_back(output, out),
                 [=, this] {
                   return comm_->allgather_async(in.data_ptr(), out.data_ptr(), in.numel(),
                                                 weft_dtype(in));
                 });
  }

  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions&) override {
    TORCH_CHECK(!inputs.empty(), "weft: allgather_coalesced needs at least one tensor");
    TORCH_CHECK(outputs.size() == static_cast<size_t>(size_),
                "weft: allgather_coalesced needs ", size_, " output lists");
    for (const auto& t : inputs) {
      check_cpu(t);
      check_same(t, inputs[0], "allgather_coalesced");
    }
    at::Tensor flat_in = flatten(inputs);
    for (const auto& list : outputs) {
      TORCH_CHECK(list.size() == inputs.size(), "weft: allgather_coalesced: every output list "
                  "must match the inputs");
      int64_t n = 0;
      for (const auto& o : list) n += o.numel();
      TORCH_CHECK(n == flat_in.numel(), "weft: allgather_coalesced: output sizes differ from "
                  "the inputs'");
    }
    at::Tensor flat_out = at::empty({flat_in.numel() * size_}, flat_in.options());
    std::vector<at::Tensor> all;
    for (const auto& list : outputs) all.insert(all.end(), list.begin(), list.end());
    return start(
        c10d::OpType::ALLGATHER_COALESCED, all, {flat_in, flat_out},
        [flat_out, all] { unflatten(flat_out, 0, all); },
        [=, this] {
          return comm_->allgather_async(flat_in.data_ptr(), flat_out.data_ptr(), flat_in.numel(),
                                        weft_dtype(flat_in));
        });
  }

  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override {
    check_one(inputs, "gather");
    int root = static_cast<int>(opts.rootRank);
    at::Tensor in = inputs[0].contiguous();
    at::Tensor flat;
    std::vector<at::Tensor> outs;
    if (rank_ == root) {
      TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(size_),
                  "weft: gather: the root needs one output list of ", size_, " tensors");
      for (const auto& o : outputs[0]) {
        check_same(o, in, "gather");
        TORCH_CHECK(o.numel() == in.numel(), "weft: gather: output sizes differ from the input's");
      }
      outs = outputs[0];
      flat = at::empty({in.numel() * size_}, in.options());
    } else {
      TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                  "weft: gather: only the root takes output tensors");
    }
    return start(
        c10d::OpType::GATHER, outs, {in, flat},
        [flat, outs] {
          if (!outs.empty()) unflatten(flat, 0, outs);
        },
        [=, this] {
          return comm_->gather_async(in.data_ptr(), flat.defined() ? flat.data_ptr() : nullptr,
                                     in.numel(), weft_dtype(in), root);
        });
  }

  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override {
    check_one(outputs, "scatter");
    int root = static_cast<int>(opts.rootRank);
    at::Tensor out = outputs[0], buf = out.contiguous();
    at::Tensor flat;
    if (rank_ == root) {
      TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(size_),
                  "weft: scatter: the root needs one input list of ", size_, " tensors");
      for (const auto& t : inputs[0]) {
        check_same(t, out, "scatter");
        TORCH_CHECK(t.numel() == out.numel(), "weft: scatter: input sizes differ from the "
                    "output's");
      }
      flat = flatten(inputs[0]);
    } else {
      TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                  "weft: scatter: only the root takes input tensors");
    }
    return start(c10d::OpType::SCATTER, outputs, {buf, flat}, copy_back(out, buf), [=, this] {
      return comm_->scatter_async(flat.defined() ? flat.data_ptr() : nullptr, buf.data_ptr(),
                                  buf.numel(), weft_dtype(buf), root);
    });
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override {
    check_one(outputs, "reduce_scatter");
    TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(size_),
                "weft: reduce_scatter needs one input list of ", size_, " tensors");
    at::Tensor out = outputs[0], buf = out.contiguous();
    for (const auto& t : inputs[0]) {
      check_same(t, out, "reduce_scatter");
      TORCH_CHECK(t.numel() == out.numel(), "weft: reduce_scatter: input sizes differ from the "
                  "output's");
    }
    at::Tensor flat = flatten(inputs[0]);
    ReduceOp op = weft_op(opts.reduceOp, out);
    return start(c10d::OpType::REDUCE_SCATTER, outputs, {buf, flat}, copy_back(out, buf),
                 [=, this] {
                   return comm_->reduce_scatter_async(flat.data_ptr(), buf.data_ptr(),
                                                      buf.numel(), weft_dtype(buf), op);
                 });
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override {
    check_cpu(input);
    check_same(output, input, "_reduce_scatter_base");
    TORCH_CHECK(input.numel() == output.numel() * size_, "weft: _reduce_scatter_base: input "
                "must have world_size * output.numel() elements");
    at::Tensor in = input.contiguous(), out = output.contiguous();
    ReduceOp op = weft_op(opts.reduceOp, out);
    return start(c10d::OpType::_REDUCE_SCATTER_BASE, {output}, {in, out}, copy_back(output, out),
                 [=, this] {
                   return comm_->reduce_scatter_async(in.data_ptr(), out.data_ptr(), out.numel(),
                                                      weft_dtype(out), op);
                 });
  }

  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions&) override {
    check_cpu(input);
    check_same(output, input, "alltoall_base");
    at::Tensor in = input.contiguous(), out = output.contiguous();
    DataType dt = weft_dtype(in);
    if (output_splits.empty() && input_splits.empty()) {
      TORCH_CHECK(in.numel() == out.numel() && in.numel() % size_ == 0,
                  "weft: alltoall_base: input and output must be equal in size and divisible "
                  "by the world size");
      return start(c10d::OpType::ALLTOALL_BASE, {output}, {in, out}, copy_back(output, out),
                   [=, this] {
                     return comm_->alltoall_async(in.data_ptr(), out.data_ptr(),
                                                  in.numel() / size_, dt);
                   });
    }
    auto counts = std::make_shared<Counts>();
    counts->send = split_counts(in, input_splits, "input");
    counts->recv = split_counts(out, output_splits, "output");
    counts->fill_displs();
    return start(c10d::OpType::ALLTOALL_BASE, {output}, {in, out}, copy_back(output, out),
                 [=, this] {
                   return comm_->alltoallv_async(in.data_ptr(), counts->send, counts->send_displs,
                                                 out.data_ptr(), counts->recv,
                                                 counts->recv_displs, dt);
                 });
  }

  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions&) override {
    TORCH_CHECK(outputs.size() == static_cast<size_t>(size_) &&
                    inputs.size() == static_cast<size_t>(size_),
                "weft: alltoall needs ", size_, " input and ", size_, " output tensors");
    for (const auto& t : inputs) {
      check_cpu(t);
      check_same(t, inputs[0], "alltoall");
    }
    for (const auto& t : outputs) check_same(t, inputs[0], "alltoall");
    at::Tensor flat_in = flatten(inputs);
    auto counts = std::make_shared<Counts>();
    int64_t total_out = 0;
    for (int i = 0; i < size_; ++i) {
      counts->send.push_back(static_cast<size_t>(inputs[i].numel()));
      counts->recv.push_back(static_cast<size_t>(outputs[i].numel()));
      total_out += outputs[i].numel();
    }
    counts->fill_displs();
    at::Tensor flat_out = at::empty({total_out}, flat_in.options());
    std::vector<at::Tensor> outs = outputs;
    return start(
        c10d::OpType::ALLTOALL, outs, {flat_in, flat_out},
        [flat_out, outs] { unflatten(flat_out, 0, outs); },
        [=, this] {
          return comm_->alltoallv_async(flat_in.data_ptr(), counts->send, counts->send_displs,
                                        flat_out.data_ptr(), counts->recv, counts->recv_displs,
                                        weft_dtype(flat_in));
        });
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions&) override {
    return start(c10d::OpType::BARRIER, {}, {}, nullptr, [this] { return comm_->barrier_async(); });
  }

  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst,
                                      int tag) override {
    check_one(tensors, "send");
    at::Tensor buf = tensors[0].contiguous();
    size_t bytes = buf.numel() * buf.element_size();
    return start(c10d::OpType::SEND, tensors, {buf}, nullptr, [=, this] {
      return comm_->send_async(buf.data_ptr(), bytes, dst, static_cast<uint32_t>(tag));
    });
  }

  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src,
                                      int tag) override {
    check_one(tensors, "recv");
    at::Tensor t = tensors[0], buf = t.contiguous();
    size_t bytes = buf.numel() * buf.element_size();
    return start(c10d::OpType::RECV, tensors, {buf}, copy_back(t, buf), [=, this] {
      return comm_->recv_async(buf.data_ptr(), bytes, src, static_cast<uint32_t>(tag));
    });
  }

  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                               int tag) override {
    check_one(tensors, "recv");
    at::Tensor t = tensors[0], buf = t.contiguous();
    size_t bytes = buf.numel() * buf.element_size();
    return start(c10d::OpType::RECVANYSOURCE, tensors, {buf}, copy_back(t, buf), [=, this] {
      return comm_->recv_async(buf.data_ptr(), bytes, kAnySource, static_cast<uint32_t>(tag));
    });
  }

 private:
  struct Counts {
    std::vector<size_t> send, recv, send_displs, recv_displs;
    void fill_displs() {
      send_displs = prefix(send);
      recv_displs = prefix(recv);
    }
    static std::vector<size_t> prefix(const std::vector<size_t>& c) {
      std::vector<size_t> d(c.size());
      size_t off = 0;
      for (size_t i = 0; i < c.size(); ++i) {
        d[i] = off;
        off += c[i];
      }
      return d;
    }
  };

  struct Pending {
    WorkPtr op;
    c10::intrusive_ptr<WeftWork> work;
    std::function<void()> after;     // copies results into place (completion thread)
    std::vector<at::Tensor> keep;    // buffers the operation reads or writes
  };

  // Element counts per rank from split sizes along dimension 0 (empty: equal split).
  std::vector<size_t> split_counts(const at::Tensor& t, const std::vector<int64_t>& splits,
                                   const char* what) {
    int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    int64_t row = rows == 0 ? 0 : t.numel() / rows;
    std::vector<size_t> c(size_);
    if (splits.empty()) {
      TORCH_CHECK(rows % size_ == 0, "weft: alltoall_base: ", what, " rows (", rows,
                  ") not divisible by the world size");
      for (auto& x : c) x = static_cast<size_t>(rows / size_ * row);
      return c;
    }
    TORCH_CHECK(splits.size() == static_cast<size_t>(size_), "weft: alltoall_base: ", what,
                "_split_sizes must have ", size_, " entries");
    int64_t sum = 0;
    for (int i = 0; i < size_; ++i) {
      TORCH_CHECK(splits[i] >= 0, "weft: alltoall_base: negative split size");
      sum += splits[i];
      c[i] = static_cast<size_t>(splits[i] * row);
    }
    TORCH_CHECK(sum == rows, "weft: alltoall_base: ", what, " split sizes add up to ", sum,
                " but the tensor has ", rows, " rows");
    return c;
  }

  static std::function<void()> copy_back(const at::Tensor& original, const at::Tensor& buf) {
    if (original.is_same(buf)) return nullptr;
    return [original, buf] { const_cast<at::Tensor&>(original).copy_(buf); };
  }

  template <typename Start>
  c10::intrusive_ptr<c10d::Work> start(c10d::OpType type, std::vector<at::Tensor> outputs,
                                       std::vector<at::Tensor> keep, std::function<void()> after,
                                       Start&& start_op) {
    auto work = c10::make_intrusive<WeftWork>(rank_, type, std::move(outputs));
    WorkPtr op = start_op();
    // A collective completes the Work from the thread that finishes it (weft's executor, or a
    // thread that waits for it); a point-to-point operation from the completion thread.
    auto p = std::make_shared<Pending>(Pending{op, work, std::move(after), std::move(keep)});
    if (op->on_done([p](const Status& st) { finish(*p, st); })) {
      work->set_op(std::move(op));
      return work;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      // Point-to-point from here. One that is done already (a post weft ran on the calling
      // thread, a failed start) finishes here, sparing the hand-off to the completion thread
      // (what is queued must finish first, in order).
      if (!queue_.empty() || !op->test()) {
        queue_.push_back(std::move(*p));
        cv_.notify_one();
        return work;
      }
    }
    finish(*p, op->wait());
    return work;
  }

  // Copies the result into place and completes the Work. Runs on weft's threads too, so nothing
  // escapes it (the Future's callbacks run inside complete()).
  static void finish(const Pending& p, Status st) {
    if (st.ok() && p.after) {
      try {
        p.after();
      } catch (const std::exception& e) {
        st = Status(ErrorCode::internal, std::string("copying the result: ") + e.what());
      }
    }
    try {
      p.work->complete(st, p.op->source());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "weft: completing a torch Work: %s\n", e.what());
    } catch (...) {
      std::fprintf(stderr, "weft: completing a torch Work: unknown exception\n");
    }
  }

  void complete_loop() {
    while (true) {
      Pending p;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        p = std::move(queue_.front());
        queue_.pop_front();
      }
      finish(p, p.op->wait());
    }
  }

  std::unique_ptr<Communicator> comm_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;  // guarded by mu_
  bool stopping_ = false;      // guarded by mu_
  std::thread completer_;
};

c10::intrusive_ptr<c10d::ProcessGroup> create(const c10::intrusive_ptr<c10d::Store>& store,
                                              int rank, int size,
                                              std::chrono::milliseconds timeout) {
  Options base;
  base.timeout = timeout;
  Result<Options> merged = Options::from_env(base);  // WEFT_* settings apply here too
  TORCH_CHECK(merged.ok(), "weft: ", merged.status().to_string());
  Options o = merged.value();
  o.rank = rank;  // the group's, not the launcher's
  o.size = size;
  std::unique_ptr<Communicator> comm;
  Status st;
  {
    py::gil_scoped_release nogil;
    auto r = Communicator::create(o, std::make_shared<C10dStore>(store));
    if (r.ok()) {
      comm = std::move(r).value();
    } else {
      st = r.status();
    }
  }
  TORCH_CHECK(st.ok(), "weft: creating the process group failed: ", error_text(st));
  return c10::make_intrusive<ProcessGroupWeft>(std::move(comm), rank, size);
}

}  // namespace
}  // namespace weft::torch_backend

PYBIND11_MODULE(_weft_torch, m) {
  using weft::torch_backend::ProcessGroupWeft;
  m.doc() = "weft's c10d process group (use `import weft.torch`)";
  py::module_::import("torch.distributed");  // registers c10d::ProcessGroup with pybind11
  py::class_<ProcessGroupWeft, c10d::ProcessGroup, c10::intrusive_ptr<ProcessGroupWeft>>(
      m, "ProcessGroupWeft")
      .def("metrics", &ProcessGroupWeft::metrics,
           "This group's communicator's metrics in the Prometheus text format "
           "(docs/observability.md).");
  m.def("create_process_group", &weft::torch_backend::create, py::arg("store"), py::arg("rank"),
        py::arg("size"), py::arg("timeout"),
        "Creates weft's process group; torch.distributed calls this through the registered "
        "backend.");
}
