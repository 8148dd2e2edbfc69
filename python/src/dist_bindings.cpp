// strata._C.dist: the MPI communicator (dist/communicator.h) behind strata.distributed, and
// DataParallel (dist/data_parallel/data_parallel.h) behind strata.nn.parallel.DistributedDataParallel. The
// semantics are the C++ ones; this file only converts arguments.

#include <pybind11/stl.h>

#include <memory>
#include <utility>

#include "bindings.h"
#include "core/factories.h"
#include "dist/communicator.h"
#include "dist/data_parallel/data_parallel.h"
#include "models/module.h"

namespace strata::python {

namespace {

using dist::Communicator;
using dist::DataParallel;

void def_communicator(py::module_& d) {
  d.def("built_with_mpi", &Communicator::built_with_mpi, "True when this build has MPI.");
  d.def(
      "init",
      [] {
        // Creates the world communicator, initializing MPI (MPI_Init_thread) on first use.
        const Communicator& c = Communicator::world();
        return py::make_tuple(c.rank(), c.size(), c.implementation());
      },
      "Initializes MPI through the world communicator; returns (rank, size, implementation).");
  d.def(
      "all_reduce",
      [](const Tensor& t) {
        py::gil_scoped_release release;
        return Communicator::world().allreduce(t);
      },
      py::arg("tensor"),
      "The sum over ranks of `tensor` (same shape and dtype on every rank; f32, f64 or i64), in "
      "Strata's fixed tree order: bitwise the same at any rank count for the same contributions.");
  d.def(
      "barrier",
      [] {
        py::gil_scoped_release release;
        (void)Communicator::world().allreduce(zeros({1}, {DType::i64}));
      },
      "Returns once every rank called it.");
}

void def_data_parallel(py::module_& d) {
  py::class_<DataParallel>(d, "DataParallel", "dist::DataParallel (dist/data_parallel/data_parallel.h).")
      .def(py::init([](std::shared_ptr<nn::Module> module, int64_t chunks, int64_t bucket_bytes, bool broadcast) {
             dist::DataParallelOptions o;
             o.chunks = chunks;
             o.bucket_bytes = bucket_bytes;
             o.broadcast_state = broadcast;
             return std::make_unique<DataParallel>(std::move(module), Communicator::world(), o);
           }),
           py::arg("module"), py::arg("chunks") = 8, py::arg("bucket_bytes") = int64_t{1} << 20,
           py::arg("broadcast_state") = true)
      .def("forward", &DataParallel::forward, py::arg("local_input"),
           "Runs this rank's chunks; returns the global batch's output (rank 0's rows first).")
      .def("gather", &DataParallel::gather, py::arg("local"),
           "Every rank's rows of `local` concatenated in rank order.")
      .def(
          "local_rows",
          [](const DataParallel& dp, int64_t global_batch) {
            const dist::RowRange r = dp.local_rows(global_batch);
            return py::make_tuple(r.begin, r.end);
          },
          py::arg("global_batch"), "(begin, end): this rank's rows of a global batch.")
      .def_property_readonly("chunks", [](const DataParallel& dp) { return dp.options().chunks; })
      .def_property_readonly("buckets", &DataParallel::buckets)
      .def_property_readonly("buckets_reduced", &DataParallel::buckets_reduced);
}

}  // namespace

void init_dist(py::module_& m) {
  py::module_ d = m.def_submodule("dist", "strata::dist: the MPI communicator and DataParallel.");
  def_communicator(d);
  def_data_parallel(d);
}

}  // namespace strata::python
