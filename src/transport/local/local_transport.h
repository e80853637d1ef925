// Local transport: ranks that are threads of one process, for tests and tools.
//
// make_local_transports(n) creates one shared in-memory fabric and returns one Transport per rank;
// each may be used from its rank's thread (and fail() from any thread), and the fabric lives until
// the last of them is destroyed. Matching follows transport.h (through transport/matching.h): by
// (peer, tag), FIFO per key, the payload copied straight into a posted receive. A message that
// arrives before its receive is copied into an owned buffer when it is at most `eager_threshold`
// bytes; a larger one waits in the receiver's queue, still pointing at the sender's buffer, and
// its send completes only when the receive is posted (rendezvous). eager_threshold = 0 makes every
// send a rendezvous, which proves that an algorithm never waits for a send before posting the
// receive that drains it.
//
// Mismatches: a message whose Fingerprint disagrees with the receive, or with the operation the
// receiver announced through begin_operation, ends both sides with ErrorCode::mismatch and marks
// both ranks' operations, so each learns of it itself. A message of an operation the receiver has
// already left (it never received it) fails the receiver's transport with ErrorCode::mismatch, as
// the TCP transport does. fail() ends the rank's own requests with its error and the peers'
// requests that wait on it with ErrorCode::peer_lost (mismatch when their call disagreed with
// the failed rank's); other requests of the peers are not touched.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "transport/transport.h"

namespace weft {

struct LocalTransportOptions {
  size_t eager_threshold = 64 * 1024;
};

std::vector<std::unique_ptr<Transport>> make_local_transports(int n,
                                                               LocalTransportOptions options = {});

}  // namespace weft
