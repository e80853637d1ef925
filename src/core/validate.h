// Argument checks done before an operation is queued: a bad call fails at once with
// ErrorCode::invalid_argument naming the rank and the operation, and nothing is sent.
#pragma once

#include "collective/context.h"
#include "weft/status.h"

namespace weft {

Status validate_collective(const CollectiveArgs& a, int rank, int size);
Status validate_p2p(OpKind kind, const void* buf, size_t bytes, int peer, int rank, int size);

}  // namespace weft
