// Communicator.sparse_allreduce: the sum of the rows every rank holds of a table, returned as
// numpy arrays over weft's result (no copy: the arrays keep the result's memory alive).
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "common.h"

using namespace pybind11::literals;

namespace weft::python {
namespace {

py::array over(const std::shared_ptr<SparseRows>& r, void* data, const py::dtype& dt,
               std::vector<ssize_t> shape) {
  py::capsule owner(new std::shared_ptr<SparseRows>(r),
                    [](void* p) { delete static_cast<std::shared_ptr<SparseRows>*>(p); });
  return py::array(dt, std::move(shape), data, owner);
}

}  // namespace

void bind_sparse(py::class_<Communicator, CommPtr>& comm) {
  comm.def(
      "sparse_allreduce",
      [](Communicator& c, py::object indices, py::object values, size_t num_rows,
         const std::string& op, std::optional<std::string> dtype, bool async_op) -> py::object {
        Buf idx = get_buf(indices, "indices", false, std::nullopt);
        if (idx.dtype != DataType::int64) throw py::type_error("indices must be int64");
        Buf val = get_buf(values, "values", false, dtype);
        const size_t nnz = idx.count;
        if (val.info.ndim == 0 || static_cast<size_t>(val.info.shape[0]) != nnz) {
          throw py::value_error("values must have one row per index (values.shape[0] == "
                                "len(indices))");
        }
        std::vector<ssize_t> row_shape(val.info.shape.begin() + 1, val.info.shape.end());
        size_t row_width = 1;
        for (ssize_t d : row_shape) row_width *= static_cast<size_t>(d);
        const ReduceOp o = get_op(op, val);
        auto out = std::make_shared<SparseRows>();
        const DataType dt = val.dtype;
        auto result = [out, row_shape, vdt = py::dtype(val.info)]() -> py::object {
          const auto rows = static_cast<ssize_t>(out->nnz);
          std::vector<ssize_t> shape{rows};
          shape.insert(shape.end(), row_shape.begin(), row_shape.end());
          return py::make_tuple(over(out, out->indices.get(), py::dtype::of<int64_t>(), {rows}),
                                over(out, out->values.get(), vdt, shape));
        };
        auto start = [&] {
          return c.sparse_allreduce_async(static_cast<const int64_t*>(idx.ptr()), val.ptr(), nnz,
                                          num_rows, row_width, dt, o, out.get());
        };
        if (async_op) {
          auto work = std::make_unique<PyWork>(without_gil(start),
                                               std::vector<py::object>{indices, values});
          work->set_result(result);
          return py::cast(std::move(work));
        }
        check(without_gil([&] {
          return c.sparse_allreduce(static_cast<const int64_t*>(idx.ptr()), val.ptr(), nnz,
                                    num_rows, row_width, dt, o, out.get());
        }));
        return result();
      },
      "indices"_a, "values"_a, "num_rows"_a, "op"_a = "sum", "dtype"_a = py::none(),
      "async_op"_a = false,
      "Sum of the rows every rank holds of a table of num_rows rows: this rank's row i is "
      "values[i] (any shape after the first axis, the same on every rank) at table row "
      "indices[i] (int64, any order, repeats add up). Returns (indices, values): the rows any "
      "rank holds, ascending, each summed over the ranks, identical on every rank. Only "
      "op='sum'. With async_op=True returns a Work whose result() gives the pair.");
}

}  // namespace weft::python
