// What the Python module's files share: weft's errors as Python exceptions, buffers with their
// weft dtype, the Work handed out by async calls, and the communicator's holder. Everything here
// runs with the GIL held unless it says otherwise.
#pragma once

#include <pybind11/pybind11.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "weft/weft.h"

namespace weft::python {

namespace py = pybind11;

// Python exceptions: weft.Error (a RuntimeError) and weft.TimeoutError (also the builtin
// TimeoutError), carrying the C++ message and the error code name.
inline PyObject* g_error = nullptr;    // set once when the module loads
inline PyObject* g_timeout = nullptr;

[[noreturn]] inline void raise(const Status& st) {
  PyObject* type = st.code() == ErrorCode::timeout ? g_timeout : g_error;
  py::object exc = py::reinterpret_borrow<py::object>(type)(st.to_string());
  std::string code = to_string(st.code());  // "invalid argument" -> "invalid_argument"
  for (char& ch : code) {
    if (ch == ' ') ch = '_';
  }
  exc.attr("code") = code;
  PyErr_SetObject(type, exc.ptr());
  throw py::error_already_set();
}

inline void check(const Status& st) {
  if (!st.ok()) raise(st);
}

template <typename T>
T check(Result<T> r) {
  if (!r.ok()) raise(r.status());
  return std::move(r).value();
}

// Runs f with the GIL released (it may wait for peers, a store or a lock another Python thread
// holds) and returns what it returns; results are converted once the GIL is back.
template <typename F>
auto without_gil(F&& f) {
  py::gil_scoped_release nogil;
  return f();
}

// A contiguous buffer with its weft dtype and element count. Booleans (numpy's bool_, format
// '?') travel as their bytes (uint8 0 or 1) and reduce as logical operations (get_op).
struct Buf {
  py::buffer_info info;
  DataType dtype = DataType::fp32;
  size_t count = 0;
  bool boolean = false;
  void* ptr() const { return info.ptr; }
  size_t bytes() const { return count * dtype_size(dtype); }
};

inline bool is_bool_format(std::string_view fmt) {
  while (!fmt.empty() && std::strchr("@=<>!", fmt[0]) != nullptr) fmt.remove_prefix(1);
  return fmt == "?";
}

inline std::optional<DataType> dtype_of_format(std::string fmt, ssize_t itemsize) {
  while (!fmt.empty() && std::strchr("@=<>!", fmt[0]) != nullptr) fmt.erase(0, 1);
  if (fmt.size() != 1) return std::nullopt;
  switch (fmt[0]) {
    case 'b': return DataType::int8;
    case 'B': return DataType::uint8;
    case 'e': return DataType::fp16;
    case 'f': return DataType::fp32;
    case 'd': return DataType::fp64;
    case 'i':
    case 'l':
    case 'q':
      if (itemsize == 4) return DataType::int32;
      if (itemsize == 8) return DataType::int64;
      return std::nullopt;
    default: return std::nullopt;
  }
}

// `what` names the argument in errors; `dtype` (e.g. "bf16") overrides the buffer's own format,
// for element types Python has no format for: the item size must match.
inline Buf get_buf(const py::handle& obj, const char* what, bool writable,
            const std::optional<std::string>& dtype) {
  if (!py::isinstance<py::buffer>(obj)) {
    throw py::type_error(std::string(what) + " must support the buffer protocol (numpy array, "
                         "bytearray, memoryview, ...), got " +
                         std::string(py::str(py::type::of(obj).attr("__name__"))));
  }
  Buf b{py::reinterpret_borrow<py::buffer>(obj).request(writable)};
  ssize_t expect = b.info.itemsize;
  for (ssize_t i = b.info.ndim - 1; i >= 0; --i) {
    if (b.info.shape[i] > 1 && b.info.strides[i] != expect) {
      throw py::value_error(std::string(what) + " must be C-contiguous");
    }
    expect *= b.info.shape[i];
  }
  std::optional<DataType> t;
  if (dtype ? *dtype == "bool" : is_bool_format(b.info.format)) {
    if (b.info.itemsize != 1) {
      throw py::value_error(std::string(what) + ": dtype bool has 1-byte elements, the buffer "
                            "has " + std::to_string(b.info.itemsize));
    }
    b.boolean = true;
    t = DataType::uint8;
  } else if (dtype) {
    t = parse_dtype(*dtype);
    if (!t) throw py::value_error("unknown dtype '" + *dtype + "'");
    if (static_cast<ssize_t>(dtype_size(*t)) != b.info.itemsize) {
      throw py::value_error(std::string(what) + ": dtype " + *dtype + " has " +
                            std::to_string(dtype_size(*t)) + "-byte elements, the buffer has " +
                            std::to_string(b.info.itemsize));
    }
  } else {
    t = dtype_of_format(b.info.format, b.info.itemsize);
    if (!t) {
      throw py::type_error(std::string(what) + ": element format '" + b.info.format +
                           "' is not a weft dtype (bool, int8, uint8, int32, int64, float16, "
                           "float32, float64; pass dtype='bf16' for bfloat16 bits)");
    }
  }
  b.dtype = *t;
  b.count = static_cast<size_t>(b.info.size);
  return b;
}

// The reduction `s` names, for buffers like `b`. On booleans as NCCL does it: sum and max are a
// logical or (max of the 0/1 bytes), prod and min a logical and (min); band, bor and bxor act on
// the bytes as they are; avg has no boolean meaning.
inline ReduceOp get_op(const std::string& s, const Buf& b) {
  auto op = parse_reduce_op(s);
  if (!op) {
    throw py::value_error("unknown reduce op '" + s +
                          "' (sum, prod, min, max, avg; band, bor, bxor for integers and bool)");
  }
  if (!b.boolean) return *op;
  switch (*op) {
    case ReduceOp::sum:
    case ReduceOp::max: return ReduceOp::max;
    case ReduceOp::prod:
    case ReduceOp::min: return ReduceOp::min;
    case ReduceOp::avg: throw py::value_error("reduce op 'avg' is not supported for bool buffers");
    default: return *op;
  }
}

inline const char* dtype_name(const Buf& b) { return b.boolean ? "bool" : to_string(b.dtype); }

inline void same_dtype(const Buf& a, const Buf& b) {
  if (a.dtype != b.dtype || a.boolean != b.boolean) {
    throw py::type_error(std::string("send and recv buffers differ in dtype (") + dtype_name(a) +
                         " vs " + dtype_name(b) + ")");
  }
}

// An asynchronous operation: keeps its buffers alive until it is waited for or collected.
class PyWork {
 public:
  PyWork(WorkPtr w, std::vector<py::object> keep) : work_(std::move(w)), keep_(std::move(keep)) {}
  ~PyWork() {
    // The buffers must outlive the operation: finish it before letting them go.
    if (work_ && !work_->test()) {
      py::gil_scoped_release nogil;
      (void)work_->wait();
    }
  }
  void wait(std::optional<double> timeout_s) {
    check(without_gil([&] {
      return timeout_s ? work_->wait(std::chrono::milliseconds(
                             static_cast<int64_t>(*timeout_s * 1000.0)))
                       : work_->wait();
    }));
  }
  bool is_completed() const { return work_->test(); }
  bool is_success() const { return work_->test() && work_->status().ok(); }
  std::optional<std::string> exception() const {
    if (!work_->test() || work_->status().ok()) return std::nullopt;
    return work_->status().to_string();
  }
  int source() const { return work_->source(); }
  // What result() returns once the operation has succeeded (sparse_allreduce's arrays).
  void set_result(std::function<py::object()> f) { result_ = std::move(f); }
  py::object result() {
    wait(std::nullopt);
    return result_ ? result_() : py::none();
  }
  double duration() const {
    if (!work_->test()) return 0.0;
    return std::chrono::duration<double>(work_->end_time() - work_->start_time()).count();
  }

 private:
  WorkPtr work_;
  std::vector<py::object> keep_;
  std::function<py::object()> result_;
};

// Runs a blocking or an asynchronous form of one operation.
template <typename Sync, typename Async>
py::object run(bool async_op, std::vector<py::object> keep, Sync&& sync, Async&& async) {
  if (async_op) {
    WorkPtr w = without_gil(async);
    return py::cast(std::make_unique<PyWork>(std::move(w), std::move(keep)));
  }
  check(without_gil(sync));
  return py::none();
}

// Destroying a communicator closes it gracefully: it waits (up to its timeout) for the peers'
// goodbyes. That must not hold the GIL, or ranks that are Python threads of one process would
// wait for each other's destructors behind it.
struct ReleaseGilDelete {
  void operator()(Communicator* c) const {
    if (c == nullptr) return;
    if (Py_IsInitialized() && PyGILState_Check()) {
      py::gil_scoped_release nogil;
      delete c;
    } else {
      delete c;
    }
  }
};
using CommPtr = std::unique_ptr<Communicator, ReleaseGilDelete>;

// Adds Communicator.sparse_allreduce (sparse.cc).
void bind_sparse(py::class_<Communicator, CommPtr>& comm);

}  // namespace weft::python
