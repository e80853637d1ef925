// codec.h: proto <-> weft values and gRPC <-> weft statuses.
#include "codec.h"

#include <chrono>

#include <fmt/format.h>

namespace weft::ps {

v1::DType to_proto(DataType t) {
  switch (t) {
    case DataType::fp32: return v1::FP32;
    case DataType::fp16: return v1::FP16;
    case DataType::bf16: return v1::BF16;
    default: return v1::DTYPE_UNSPECIFIED;
  }
}

std::optional<DataType> from_proto(v1::DType t) {
  switch (t) {
    case v1::FP32: return DataType::fp32;
    case v1::FP16: return DataType::fp16;
    case v1::BF16: return DataType::bf16;
    default: return std::nullopt;
  }
}

void to_proto(const TensorSpec& spec, v1::InitRequest* out) {
  out->set_name(spec.name);
  out->set_dtype(to_proto(spec.dtype));
  for (uint64_t d : spec.shape) out->add_shape(d);
  out->set_mode(spec.mode == Mode::bsp ? v1::BSP : spec.mode == Mode::async ? v1::ASYNC : v1::SSP);
  out->set_staleness(spec.staleness);
  out->set_aggregate(spec.aggregate == ReduceOp::avg ? v1::AVG
                     : spec.aggregate == ReduceOp::sum ? v1::SUM
                                                       : v1::AGGREGATE_UNSPECIFIED);
  v1::Optimizer* o = out->mutable_optimizer();
  o->set_kind(spec.optimizer.kind == OptimizerKind::sgd        ? v1::Optimizer::SGD
              : spec.optimizer.kind == OptimizerKind::momentum ? v1::Optimizer::MOMENTUM
                                                               : v1::Optimizer::ADAM);
  o->set_lr(spec.optimizer.lr);
  o->set_momentum(spec.optimizer.momentum);
  o->set_beta1(spec.optimizer.beta1);
  o->set_beta2(spec.optimizer.beta2);
  o->set_eps(spec.optimizer.eps);
  out->set_num_workers(spec.num_workers);
}

Result<TensorSpec> from_proto(const v1::InitRequest& in) {
  auto bad = [&](const std::string& what) {
    return Status(ErrorCode::invalid_argument,
                  fmt::format("tensor '{}' partition {}: {}", in.name(), in.part(), what));
  };
  TensorSpec s;
  s.name = in.name();
  std::optional<DataType> dtype = from_proto(in.dtype());
  if (!dtype) return bad(fmt::format("dtype {} (f32, f16 or bf16)", static_cast<int>(in.dtype())));
  s.dtype = *dtype;
  s.shape.assign(in.shape().begin(), in.shape().end());
  switch (in.mode()) {
    case v1::BSP: s.mode = Mode::bsp; break;
    case v1::ASYNC: s.mode = Mode::async; break;
    case v1::SSP: s.mode = Mode::ssp; break;
    default: return bad(fmt::format("mode {} (bsp, async or ssp)", static_cast<int>(in.mode())));
  }
  s.staleness = in.staleness();
  switch (in.aggregate()) {
    case v1::AGGREGATE_UNSPECIFIED:
    case v1::SUM: s.aggregate = ReduceOp::sum; break;
    case v1::AVG: s.aggregate = ReduceOp::avg; break;
    default: return bad(fmt::format("aggregate {}", static_cast<int>(in.aggregate())));
  }
  const v1::Optimizer& o = in.optimizer();
  switch (o.kind()) {
    case v1::Optimizer::KIND_UNSPECIFIED:
    case v1::Optimizer::SGD: s.optimizer.kind = OptimizerKind::sgd; break;
    case v1::Optimizer::MOMENTUM: s.optimizer.kind = OptimizerKind::momentum; break;
    case v1::Optimizer::ADAM: s.optimizer.kind = OptimizerKind::adam; break;
    default: return bad(fmt::format("optimizer {}", static_cast<int>(o.kind())));
  }
  s.optimizer.lr = o.lr();
  s.optimizer.momentum = o.momentum();
  s.optimizer.beta1 = o.beta1();
  s.optimizer.beta2 = o.beta2();
  s.optimizer.eps = o.eps();
  s.num_workers = in.num_workers();
  return s;
}

int64_t system_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

grpc::Status to_grpc(const Status& s) {
  grpc::StatusCode code = grpc::StatusCode::INTERNAL;
  switch (s.code()) {
    case ErrorCode::ok: return grpc::Status::OK;
    case ErrorCode::invalid_argument: code = grpc::StatusCode::INVALID_ARGUMENT; break;
    case ErrorCode::not_found: code = grpc::StatusCode::NOT_FOUND; break;
    case ErrorCode::mismatch: code = grpc::StatusCode::FAILED_PRECONDITION; break;
    case ErrorCode::timeout: code = grpc::StatusCode::DEADLINE_EXCEEDED; break;
    case ErrorCode::aborted: code = grpc::StatusCode::ABORTED; break;
    default: break;
  }
  return grpc::Status(code, s.message());
}

Status from_grpc(const grpc::Status& s, const std::string& shard_label) {
  if (s.ok()) return Status::success();
  ErrorCode code = ErrorCode::protocol;
  const char* name = "error";
  switch (s.error_code()) {
    case grpc::StatusCode::INVALID_ARGUMENT: code = ErrorCode::invalid_argument; name = "INVALID_ARGUMENT"; break;
    case grpc::StatusCode::RESOURCE_EXHAUSTED: code = ErrorCode::invalid_argument; name = "RESOURCE_EXHAUSTED"; break;
    case grpc::StatusCode::NOT_FOUND: code = ErrorCode::not_found; name = "NOT_FOUND"; break;
    case grpc::StatusCode::FAILED_PRECONDITION: code = ErrorCode::mismatch; name = "FAILED_PRECONDITION"; break;
    case grpc::StatusCode::PERMISSION_DENIED: code = ErrorCode::aborted; name = "PERMISSION_DENIED"; break;
    case grpc::StatusCode::ABORTED: code = ErrorCode::aborted; name = "ABORTED"; break;
    case grpc::StatusCode::CANCELLED: code = ErrorCode::aborted; name = "CANCELLED"; break;
    case grpc::StatusCode::DEADLINE_EXCEEDED: code = ErrorCode::timeout; name = "DEADLINE_EXCEEDED"; break;
    case grpc::StatusCode::UNAVAILABLE: code = ErrorCode::peer_lost; name = "UNAVAILABLE"; break;
    case grpc::StatusCode::INTERNAL: code = ErrorCode::internal; name = "INTERNAL"; break;
    default: break;
  }
  return Status(code, fmt::format("{}: {}: {}", shard_label, name, s.error_message()));
}

}  // namespace weft::ps
