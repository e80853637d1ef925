// gRPC's headers for the parameter server's sources. absl (under gRPC) defines unprefixed
// thread-safety macros (GUARDED_BY, ...) that base/thread_annotations.h defines too: they are
// set aside around gRPC's headers so that weft's definitions hold in either include order.
#pragma once

#pragma push_macro("GUARDED_BY")
#pragma push_macro("PT_GUARDED_BY")
#pragma push_macro("ACQUIRED_BEFORE")
#pragma push_macro("ACQUIRED_AFTER")
#pragma push_macro("NO_THREAD_SAFETY_ANALYSIS")
#undef GUARDED_BY
#undef PT_GUARDED_BY
#undef ACQUIRED_BEFORE
#undef ACQUIRED_AFTER
#undef NO_THREAD_SAFETY_ANALYSIS

#include <grpcpp/grpcpp.h>

#include "weft/ps/v1/ps.grpc.pb.h"

#undef GUARDED_BY
#undef PT_GUARDED_BY
#undef ACQUIRED_BEFORE
#undef ACQUIRED_AFTER
#undef NO_THREAD_SAFETY_ANALYSIS
#pragma pop_macro("GUARDED_BY")
#pragma pop_macro("PT_GUARDED_BY")
#pragma pop_macro("ACQUIRED_BEFORE")
#pragma pop_macro("ACQUIRED_AFTER")
#pragma pop_macro("NO_THREAD_SAFETY_ANALYSIS")
