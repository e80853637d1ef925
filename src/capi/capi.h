// What the C API's files share: the structs behind weftComm_t and weftWork_t, turning a Status
// into a weftResult_t (and the thread's last-error message), and checking the C enums.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "weft/communicator.h"
#include "weft/store.h"
#include "weft/weft_c.h"
#include "weft/work.h"

namespace weft::capi {

// A job's store server, shared by the communicators of this process made from one unique id
// (and their splits): the last of them to go stops it (unique_id.cc).
struct ServerLease;

}  // namespace weft::capi

struct weftComm {
  // Declared first so it goes last: the store outlives the communicator's shutdown.
  std::shared_ptr<weft::capi::ServerLease> server;  // null unless made from this process's id
  std::unique_ptr<weft::Communicator> comm;
};

struct weftWork {
  weft::WorkPtr work;
  int rank;
  weft::OpKind kind;
};

namespace weft::capi {

// Records status as the calling thread's last error (when not ok) and returns its code.
weftResult_t fail(const Status& status);
// invalid_argument "rank R: <op>: <what>" (rank -1: "weft: <op>: <what>"), recorded.
weftResult_t invalid(int rank, const char* op, const std::string& what);

// weft's type and op for a C pair: weftBool runs as uint8 with or/and as max/min. nullopt (and
// the error recorded) for a value outside the enums or a pair weft refuses for bool.
struct TypedOp {
  DataType dtype;
  ReduceOp op;
};
std::optional<TypedOp> typed(int rank, OpKind kind, weftDataType_t dtype, weftRedOp_t op);
std::optional<DataType> typed(int rank, OpKind kind, weftDataType_t dtype);

}  // namespace weft::capi
