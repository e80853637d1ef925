// weft._weft: the Python module over the C++ API. Buffers are anything that exposes the buffer
// protocol (numpy arrays, bytearray, memoryview, array.array); collectives read and write them in
// place, without copies, with the GIL released. See docs/python.md.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common.h"
#include "weft/weft.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace weft::python {
namespace {

// The job key file for a store: the argument when given (empty: none), else WEFT_AUTH_KEY_FILE
// (the module is an edge, like the command line: it reads the variable).
std::string key_file_or_env(const std::optional<std::string>& given) {
  if (given) return *given;
  const char* env = std::getenv("WEFT_AUTH_KEY_FILE");
  return env != nullptr ? env : "";
}

// The buffer only the root passes (gather's recv, scatter's send), size() times as long as
// `other`: checked at the root, null elsewhere.
void* root_only(const Communicator& c, int root, const py::object& obj, const char* what,
                const Buf& other, const std::optional<std::string>& dtype) {
  if (c.rank() != root) return nullptr;
  if (obj.is_none()) throw py::value_error(std::string("the root needs a ") + what + " buffer");
  Buf b = get_buf(obj, what, std::string_view(what) == "recv", dtype);
  same_dtype(b, other);
  if (b.count != other.count * static_cast<size_t>(c.size())) {
    throw py::value_error(std::string(what) + " must hold size times as many elements as the " +
                          (std::string_view(what) == "recv" ? "send" : "recv") + " buffer");
  }
  return b.ptr();
}

std::vector<size_t> displacements(const std::vector<size_t>& counts) {
  std::vector<size_t> d(counts.size());
  size_t off = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    d[i] = off;
    off += counts[i];
  }
  return d;
}

using Comm = Communicator;
using OptStr = std::optional<std::string>;

Options options_from_kwargs(const py::kwargs& kwargs, Options o) {
  for (auto item : kwargs) {
    std::string key = py::str(item.first);
    py::handle v = item.second;
    std::string value;
    if (py::isinstance<py::bool_>(v)) {
      value = v.cast<bool>() ? "true" : "false";
    } else if (py::hasattr(v, "total_seconds")) {  // datetime.timedelta
      value = std::to_string(static_cast<int64_t>(v.attr("total_seconds")().cast<double>() * 1000)) +
              "ms";
    } else {
      value = py::str(v);
    }
    check(o.apply(key, value));
  }
  return o;
}

void bind_comm(py::module_& m) {
  py::class_<PyWork>(m, "Work", "An asynchronous operation (returned with async_op=True).")
      .def("wait", &PyWork::wait, "timeout"_a = py::none(),
           "Waits for the operation (timeout in seconds; None: the communicator's). Raises "
           "weft.Error if it failed, weft.TimeoutError if it is not done in time.")
      .def("is_completed", &PyWork::is_completed)
      .def("is_success", &PyWork::is_success)
      .def("exception", &PyWork::exception, "The error message of a failed operation, or None.")
      .def("duration", &PyWork::duration, "Seconds from start to end once completed.")
      .def("result", &PyWork::result,
           "Waits for the operation and returns its result: (indices, values) for "
           "sparse_allreduce, None for the others.")
      .def("source", &PyWork::source,
           "The rank a completed receive came from (after one from weft.ANY_SOURCE); -1 "
           "otherwise.");

  auto comm = py::class_<Comm, CommPtr>(m, "Communicator",
                   "A group of ranks. Create with weft.init(); every collective must be called "
                   "by every rank in the same order.")
      .def_property_readonly("rank", &Comm::rank)
      .def_property_readonly("size", &Comm::size)
      .def(
          "allreduce",
          [](Comm& c, py::object send, py::object recv, const std::string& op, OptStr dtype,
             bool async_op) {
            if (recv.is_none()) recv = send;
            Buf s = get_buf(send, "send", false, dtype), r = get_buf(recv, "recv", true, dtype);
            same_dtype(s, r);
            if (s.count != r.count) throw py::value_error("send and recv sizes differ");
            ReduceOp o = get_op(op, s);
            return run(
                async_op, {send, recv},
                [&] { return c.allreduce(s.ptr(), r.ptr(), s.count, s.dtype, o); },
                [&] { return c.allreduce_async(s.ptr(), r.ptr(), s.count, s.dtype, o); });
          },
          "send"_a, "recv"_a = py::none(), "op"_a = "sum", "dtype"_a = py::none(),
          "async_op"_a = false, "Reduces send over all ranks into recv (None: in place).")
      .def(
          "broadcast",
          [](Comm& c, py::object buf, int root, OptStr dtype, bool async_op) {
            Buf b = get_buf(buf, "buf", true, dtype);
            return run(
                async_op, {buf}, [&] { return c.broadcast(b.ptr(), b.count, b.dtype, root); },
                [&] { return c.broadcast_async(b.ptr(), b.count, b.dtype, root); });
          },
          "buf"_a, "root"_a = 0, "dtype"_a = py::none(), "async_op"_a = false)
      .def(
          "reduce",
          [](Comm& c, py::object send, py::object recv, const std::string& op, int root,
             OptStr dtype, bool async_op) {
            if (recv.is_none()) recv = send;
            Buf s = get_buf(send, "send", false, dtype), r = get_buf(recv, "recv", true, dtype);
            same_dtype(s, r);
            if (s.count != r.count) throw py::value_error("send and recv sizes differ");
            ReduceOp o = get_op(op, s);
            return run(
                async_op, {send, recv},
                [&] { return c.reduce(s.ptr(), r.ptr(), s.count, s.dtype, o, root); },
                [&] { return c.reduce_async(s.ptr(), r.ptr(), s.count, s.dtype, o, root); });
          },
          "send"_a, "recv"_a = py::none(), "op"_a = "sum", "root"_a = 0, "dtype"_a = py::none(),
          "async_op"_a = false)
      .def(
          "allgather",
          [](Comm& c, py::object send, py::object recv, OptStr dtype, bool async_op) {
            Buf s = get_buf(send, "send", false, dtype), r = get_buf(recv, "recv", true, dtype);
            same_dtype(s, r);
            if (r.count != s.count * static_cast<size_t>(c.size())) {
              throw py::value_error("recv must hold size * len(send) elements");
            }
            return run(
                async_op, {send, recv},
                [&] { return c.allgather(s.ptr(), r.ptr(), s.count, s.dtype); },
                [&] { return c.allgather_async(s.ptr(), r.ptr(), s.count, s.dtype); });
          },
          "send"_a, "recv"_a, "dtype"_a = py::none(), "async_op"_a = false)
      .def(
          "allgatherv",
          [](Comm& c, py::object send, py::object recv, std::vector<size_t> counts, OptStr dtype,
             bool async_op) {
            Buf s = get_buf(send, "send", false, dtype), r = get_buf(recv, "recv", true, dtype);
            same_dtype(s, r);
            auto displs = std::make_shared<std::vector<size_t>>(displacements(counts));
            auto cnt = std::make_shared<std::vector<size_t>>(std::move(counts));
            size_t total = cnt->empty() ? 0 : displs->back() + cnt->back();
            if (r.count < total) throw py::value_error("recv is smaller than sum(counts)");
            py::object keep_counts = py::capsule(new auto(std::make_pair(cnt, displs)), [](void* p) {
              delete static_cast<std::pair<std::shared_ptr<std::vector<size_t>>,
                                           std::shared_ptr<std::vector<size_t>>>*>(p);
            });
            return run(
                async_op, {send, recv, keep_counts},
                [&] { return c.allgatherv(s.ptr(), s.count, r.ptr(), *cnt, *displs, s.dtype); },
                [&] {
                  return c.allgatherv_async(s.ptr(), s.count, r.ptr(), *cnt, *displs, s.dtype);
                });
          },
          "send"_a, "recv"_a, "counts"_a, "dtype"_a = py::none(), "async_op"_a = false,
          "Gathers counts[i] elements from rank i into recv, rank after rank.")
      .def(
          "reduce_scatter",
          [](Comm& c, py::object send, py::object recv, const std::string& op, OptStr dtype,
             bool async_op) {
            Buf s = get_buf(send, "send", false, dtype), r = get_buf(recv, "recv", true, dtype);
            same_dtype(s, r);
            if (s.count != r.count * static_cast<size_t>(c.size())) {
              throw py::value_error("send must hold size * len(recv) elements");
            }
            ReduceOp o = get_op(op, s);
            return run(
                async_op, {send, recv},
                [&] { return c.reduce_scatter(s.ptr(), r.ptr(), r.count, s.dtype, o); },
                [&] { return c.reduce_scatter_async(s.ptr(), r.ptr(), r.count, s.dtype, o); });
          },
          "send"_a, "recv"_a, "op"_a = "sum", "dtype"_a = py::none(), "async_op"_a = false)
      .def(
          "gather",
          [](Comm& c, py::object send, py::object recv, int root, OptStr dtype, bool async_op) {
            Buf s = get_buf(send, "send", false, dtype);
            void* rp = root_only(c, root, recv, "recv", s, dtype);
            return run(
                async_op, {send, recv},
                [&] { return c.gather(s.ptr(), rp, s.count, s.dtype, root); },
                [&] { return c.gather_async(s.ptr(), rp, s.count, s.dtype, root); });
          },
          "send"_a, "recv"_a = py::none(), "root"_a = 0, "dtype"_a = py::none(),
          "async_op"_a = false)
      .def(
          "scatter",
          [](Comm& c, py::object send, py::object recv, int root, OptStr dtype, bool async_op) {
            Buf r = get_buf(recv, "recv", true, dtype);
            const void* sp = root_only(c, root, send, "send", r, dtype);
            return run(
                async_op, {send, recv},
                [&] { return c.scatter(sp, r.ptr(), r.count, r.dtype, root); },
                [&] { return c.scatter_async(sp, r.ptr(), r.count, r.dtype, root); });
          },
          "send"_a, "recv"_a, "root"_a = 0, "dtype"_a = py::none(), "async_op"_a = false)
      .def(
          "alltoall",
          [](Comm& c, py::object send, py::object recv, OptStr dtype, bool async_op) {
            Buf s = get_buf(send, "send", false, dtype), r = get_buf(recv, "recv", true, dtype);
            same_dtype(s, r);
            auto n = static_cast<size_t>(c.size());
            if (s.count != r.count || s.count % n != 0) {
              throw py::value_error("send and recv must be equal in size and divisible by size");
            }
            return run(
                async_op, {send, recv},
                [&] { return c.alltoall(s.ptr(), r.ptr(), s.count / n, s.dtype); },
                [&] { return c.alltoall_async(s.ptr(), r.ptr(), s.count / n, s.dtype); });
          },
          "send"_a, "recv"_a, "dtype"_a = py::none(), "async_op"_a = false)
      .def(
          "alltoallv",
          [](Comm& c, py::object send, std::vector<size_t> send_counts, py::object recv,
             std::vector<size_t> recv_counts, OptStr dtype, bool async_op) {
            Buf s = get_buf(send, "send", false, dtype), r = get_buf(recv, "recv", true, dtype);
            same_dtype(s, r);
            using V = std::shared_ptr<std::vector<size_t>>;
            auto sc = std::make_shared<std::vector<size_t>>(std::move(send_counts));
            auto rc = std::make_shared<std::vector<size_t>>(std::move(recv_counts));
            auto sd = std::make_shared<std::vector<size_t>>(displacements(*sc));
            auto rd = std::make_shared<std::vector<size_t>>(displacements(*rc));
            if (!sc->empty() && sd->back() + sc->back() > s.count) {
              throw py::value_error("send is smaller than sum(send_counts)");
            }
            if (!rc->empty() && rd->back() + rc->back() > r.count) {
              throw py::value_error("recv is smaller than sum(recv_counts)");
            }
            py::object keep = py::capsule(new std::vector<V>{sc, rc, sd, rd},
                                          [](void* p) { delete static_cast<std::vector<V>*>(p); });
            return run(
                async_op, {send, recv, keep},
                [&] { return c.alltoallv(s.ptr(), *sc, *sd, r.ptr(), *rc, *rd, s.dtype); },
                [&] { return c.alltoallv_async(s.ptr(), *sc, *sd, r.ptr(), *rc, *rd, s.dtype); });
          },
          "send"_a, "send_counts"_a, "recv"_a, "recv_counts"_a, "dtype"_a = py::none(),
          "async_op"_a = false)
      .def(
          "barrier",
          [](Comm& c, bool async_op) {
            return run(async_op, {}, [&] { return c.barrier(); }, [&] { return c.barrier_async(); });
          },
          "async_op"_a = false)
      .def(
          "send",
          [](Comm& c, py::object buf, int peer, uint32_t tag, bool async_op) {
            Buf b = get_buf(buf, "buf", false, std::nullopt);
            size_t bytes = static_cast<size_t>(b.info.size * b.info.itemsize);
            return run(
                async_op, {buf}, [&] { return c.send(b.ptr(), bytes, peer, tag); },
                [&] { return c.send_async(b.ptr(), bytes, peer, tag); });
          },
          "buf"_a, "peer"_a, "tag"_a = 0, "async_op"_a = false,
          "Sends the buffer's bytes to peer; the matching recv names this rank and tag.")
      .def(
          "recv",
          [](Comm& c, py::object buf, int peer, uint32_t tag, bool async_op) -> py::object {
            Buf b = get_buf(buf, "buf", true, std::nullopt);
            size_t bytes = static_cast<size_t>(b.info.size * b.info.itemsize);
            if (async_op) {
              return run(
                  true, {buf}, [] { return Status(); },
                  [&] { return c.recv_async(b.ptr(), bytes, peer, tag); });
            }
            int source = -1;
            check(without_gil([&] { return c.recv(b.ptr(), bytes, peer, tag, &source); }));
            return py::int_(source);
          },
          "buf"_a, "peer"_a = kAnySource, "tag"_a = 0, "async_op"_a = false,
          "Receives exactly len(buf) bytes from peer (default weft.ANY_SOURCE: any rank) into "
          "buf; returns the sender's rank (async: Work.source()).")
      .def(
          "split",
          [](Comm& c, int color, int key) {
            return CommPtr(check(without_gil([&] { return c.split(color, key); })).release());
          },
          "color"_a, "key"_a = 0,
          "Ranks with the same color form a new communicator, ordered by (key, rank). A negative "
          "color returns None.")
      .def(
          "flight_record",
          [](const Comm& c) {
            return py::module_::import("json").attr("loads")(c.flight_record_json());
          },
          "This rank's recent operations (dict with 'entries': op, describe, state, times in "
          "seconds relative to now, error); see docs/diagnostics.md.")
      .def(
          "metrics", [](const Comm& c) { return c.metrics(); },
          "This communicator's counters in the Prometheus text format: collectives by op and "
          "algorithm, bytes, a duration histogram, point-to-point posts, errors by code, lost "
          "peers; see docs/observability.md.")
      .def(
          "abort", [](Comm& c, const std::string& why) { c.abort(why); },
          "reason"_a = "abort() called from Python")
      .def(
          "revoke", [](Comm& c) { c.revoke(); },
          "Invalidates the communicator on every rank: pending and later operations raise "
          "weft.Error with code 'revoked'. Then call shrink().")
      .def(
          "agree",
          [](Comm& c, uint64_t flag) {
            Agreement a = check(without_gil([&] { return c.agree(flag); }));
            return py::make_tuple(a.flag, a.alive, a.failed);
          },
          "flag"_a,
          "Fault-tolerant agreement among the ranks still alive: returns (AND of their flags, "
          "alive ranks, failed ranks), the same on every rank. Works on a broken communicator.")
      .def(
          "shrink",
          [](Comm& c) { return CommPtr(check(without_gil([&] { return c.shrink(); })).release()); },
          "The survivors' communicator (revokes this one; dense new ranks in the old order). "
          "Every surviving rank calls it; see docs/fault-tolerance.md.")
      .def(
          "grow",
          [](Comm& c, int count) {
            return CommPtr(check(without_gil([&] { return c.grow(count); })).release());
          },
          "count"_a,
          "Adds `count` ranks that call weft.join(); members keep their ranks. Every member "
          "calls it.")
      .def(
          "pending_joins", [](const Comm& c) { return check(c.pending_joins()); },
          "How many ranks wait in weft.join() (rank 0 should broadcast it before grow()).")
      .def("shutdown", [](Comm& c) { check(without_gil([&] { return c.shutdown(); })); });
  bind_sparse(comm);
}

void bind_store(py::module_& m) {
  py::class_<Store, std::shared_ptr<Store>>(m, "Store", "Key-value store used for rendezvous.")
      .def(
          "set",
          [](Store& s, const std::string& key, py::bytes value) {
            std::string v = value;
            check(s.set(key, std::string_view(v)));
          },
          "key"_a, "value"_a)
      .def(
          "get",
          [](Store& s, const std::string& key, double timeout_s) {
            const std::chrono::milliseconds timeout(static_cast<int64_t>(timeout_s * 1000));
            return py::bytes(check(without_gil([&] { return s.get_string(key, timeout); })));
          },
          "key"_a, "timeout"_a = 60.0)
      .def(
          "add", [](Store& s, const std::string& key, int64_t d) { return check(s.add(key, d)); },
          "key"_a, "delta"_a = 1);
  m.def("MemoryStore", &make_memory_store, "An in-process store (for threads of one process).");
  m.def(
      "FileStore",
      [](const std::string& dir) { return check(make_file_store(dir)); }, "directory"_a,
      "A store in a directory every rank can see.");
  m.def(
      "TCPStore",
      [](const std::string& host, uint16_t port, double timeout_s,
         std::optional<std::string> auth_key_file) {
        const std::chrono::milliseconds timeout(static_cast<int64_t>(timeout_s * 1000));
        const std::string key_file = key_file_or_env(auth_key_file);
        return check(
            without_gil([&] { return connect_tcp_store(host, port, timeout, key_file); }));
      },
      "host"_a, "port"_a, "timeout"_a = 60.0, "auth_key_file"_a = py::none(),
      "A client of a TCP store server (weft store). auth_key_file: the job key file (default "
      "$WEFT_AUTH_KEY_FILE; empty: none).");
  py::class_<TcpStoreServer>(m, "TCPStoreServer", "A TCP store server running in this process.")
      .def(py::init([](const std::string& host, uint16_t port,
                       std::optional<std::string> auth_key_file) {
             TcpStoreConfig config;
             config.auth_key_file = key_file_or_env(auth_key_file);
             return check(TcpStoreServer::start(host, port, config));
           }),
           "host"_a = "127.0.0.1", "port"_a = 0, "auth_key_file"_a = py::none())
      .def_property_readonly("port", &TcpStoreServer::port);
}

}  // namespace

PYBIND11_MODULE(_weft, m) {
  m.doc() = "weft: collective communication for distributed training (C++ core)";
  py::object runtime_error = py::module_::import("builtins").attr("RuntimeError");
  py::object builtin_timeout = py::module_::import("builtins").attr("TimeoutError");
  static py::exception<std::runtime_error> error(m, "Error", runtime_error.ptr());
  g_error = error.ptr();
  error.attr("__module__") = "weft";
  py::object timeout_type = py::reinterpret_steal<py::object>(PyErr_NewException(
      "weft.TimeoutError", py::make_tuple(error, builtin_timeout).ptr(), nullptr));
  m.attr("TimeoutError") = timeout_type;
  g_timeout = timeout_type.release().ptr();  // lives as long as the interpreter

  bind_store(m);
  bind_comm(m);
  m.def(
      "init",
      [](std::optional<int> rank, std::optional<int> size, std::shared_ptr<Store> store,
         const py::kwargs& kwargs) {
        // Code-level settings first; the environment (WEFT_*, WEFT_CONFIG) overrides them, as
        // everywhere in weft.
        Options o = options_from_kwargs(kwargs, Options());
        auto comm = check(without_gil([&]() -> Result<std::unique_ptr<Communicator>> {
          if (!store) return Communicator::from_env(o);
          auto merged = Options::from_env(o);
          if (!merged.ok()) return merged.status();
          Options m = merged.value();
          m.rank = rank.value_or(-1);  // the caller's, not a launcher's
          m.size = size.value_or(-1);
          return Communicator::create(m, store);
        }));
        return CommPtr(comm.release());
      },
      "rank"_a = py::none(), "size"_a = py::none(), "store"_a = nullptr,
      "Creates a communicator: from the launcher's environment (weft run, torchrun, mpirun, "
      "srun), or from rank, size and store. Keyword arguments set options by name "
      "(timeout=datetime.timedelta(seconds=10), chunk_bytes='1M', algo_allreduce='ring', ...).");
  m.def(
      "join",
      [](std::shared_ptr<Store> store, const py::kwargs& kwargs) {
        Options o = options_from_kwargs(kwargs, Options());
        auto comm = check(without_gil([&]() -> Result<std::unique_ptr<Communicator>> {
          auto merged = Options::from_env(o);
          if (!merged.ok()) return merged.status();
          return Communicator::join(merged.value(), store);
        }));
        return CommPtr(comm.release());
      },
      "store"_a,
      "Joins a running job through its store: waits until its ranks call grow(), then returns "
      "the grown communicator (this rank gets one of the new ranks). Keyword arguments set "
      "options as in init().");
  m.attr("__version__") = WEFT_VERSION_STRING;
  m.attr("ANY_SOURCE") = kAnySource;
}

}  // namespace weft::python
