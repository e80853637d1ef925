// Results, messages and the C enums (capi.h).
#include <string>

#include "capi.h"
#include "weft/version.h"

namespace weft::capi {
namespace {

// The last failure of this thread: one string per thread, so the pointer weftGetLastError
// returns stays valid whatever other threads do.
thread_local std::string last_error;

static_assert(static_cast<int>(kMaxErrorCode) + 1 == weftNumResults,
              "weftResult_t must map weft::ErrorCode one to one");
static_assert(kDataTypeCount + 1 == weftNumTypes, "weftDataType_t: weft's types plus weftBool");
static_assert(kReduceOpCount == weftNumOps, "weftRedOp_t must map weft::ReduceOp one to one");

}  // namespace

weftResult_t fail(const Status& status) {
  if (status.ok()) return weftSuccess;
  last_error = status.message();
  return static_cast<weftResult_t>(status.code());
}

weftResult_t invalid(int rank, const char* op, const std::string& what) {
  const std::string who = rank >= 0 ? "rank " + std::to_string(rank) : std::string("weft");
  return fail(Status(ErrorCode::invalid_argument, who + ": " + op + ": " + what));
}

std::optional<DataType> typed(int rank, OpKind kind, weftDataType_t dtype) {
  const int v = static_cast<int>(dtype);
  if (v == weftBool) return DataType::uint8;
  if (v < 0 || v >= kDataTypeCount) {
    invalid(rank, to_string(kind), "datatype " + std::to_string(v) + " is not a weftDataType_t");
    return std::nullopt;
  }
  return static_cast<DataType>(v);
}

std::optional<TypedOp> typed(int rank, OpKind kind, weftDataType_t dtype, weftRedOp_t op) {
  std::optional<DataType> t = typed(rank, kind, dtype);
  if (!t) return std::nullopt;
  const int v = static_cast<int>(op);
  if (v < 0 || v >= kReduceOpCount) {
    invalid(rank, to_string(kind), "op " + std::to_string(v) + " is not a weftRedOp_t");
    return std::nullopt;
  }
  ReduceOp r = static_cast<ReduceOp>(v);
  if (dtype == weftBool) {
    // 0/1 bytes: logical or is max, logical and is min (as NCCL's bool).
    switch (r) {
      case ReduceOp::sum:
      case ReduceOp::max:
      case ReduceOp::bor: r = ReduceOp::max; break;
      case ReduceOp::prod:
      case ReduceOp::min:
      case ReduceOp::band: r = ReduceOp::min; break;
      case ReduceOp::bxor: break;
      case ReduceOp::avg:
        invalid(rank, to_string(kind), "avg is not defined for weftBool");
        return std::nullopt;
    }
  }
  return TypedOp{*t, r};
}

}  // namespace weft::capi

extern "C" {

weftResult_t weftGetVersion(int* version) {
  if (version == nullptr) return weft::capi::invalid(-1, "weftGetVersion", "version is NULL");
  *version = WEFT_VERSION_MAJOR * 10000 + WEFT_VERSION_MINOR * 100 + WEFT_VERSION_PATCH;
  return weftSuccess;
}

const char* weftGetErrorString(weftResult_t result) {
  const int v = static_cast<int>(result);
  if (v < 0 || v >= weftNumResults) return "unknown weftResult_t";
  return weft::to_string(static_cast<weft::ErrorCode>(v));
}

const char* weftGetLastError(weftComm_t /*comm: the record is per thread*/) {
  return weft::capi::last_error.c_str();
}

}  // extern "C"
