// Translation between the protobuf messages of proto/weft/ps/v1/ps.proto and weft's types, and
// between gRPC and weft statuses. Shared by the service (shard side) and the client.
#pragma once

#include <optional>
#include <string>

#include "grpc.h"

#include "weft/ps.h"
#include "weft/ps/v1/ps.pb.h"
#include "weft/status.h"

namespace weft::ps {

// Metadata keys every call carries.
inline constexpr const char* kTokenKey = "weft-job-token";
inline constexpr const char* kWorkerKey = "weft-worker";

// Largest message either side accepts: a 4 MiB chunk or partition plus its header.
inline constexpr size_t kMaxMessageBytes = kPartitionBytes + (size_t{64} << 10);

v1::DType to_proto(DataType t);
std::optional<DataType> from_proto(v1::DType t);  // nullopt: not one the server holds

void to_proto(const TensorSpec& spec, v1::InitRequest* out);
// Fills everything but `initial`; an error names the field.
Result<TensorSpec> from_proto(const v1::InitRequest& in);

// The Clock exchange's timestamps: system_clock, nanoseconds since the epoch.
int64_t system_now_ns();

grpc::Status to_grpc(const Status& s);
// "shard 2 (host:port): <what gRPC said>", with a weft code chosen from the gRPC code.
Status from_grpc(const grpc::Status& s, const std::string& shard_label);

}  // namespace weft::ps
