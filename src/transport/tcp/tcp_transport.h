// The TCP transport: one per communicator, connections to every peer over an epoll reactor.
//
// Small messages go eagerly within per-peer credits (Options::eager_credit_bytes bounds what a
// peer may park here unexpected); larger ones use rendezvous (RTS, then CTS once the receive is
// posted, then DATA written straight from the send buffer into the receive buffer, striped over
// Options::sockets_per_peer sockets). The header grammar is in docs/wire-format.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "transport/transport.h"
#include "weft/options.h"
#include "weft/store.h"

namespace weft {

class BufferPool;

struct TcpTransportConfig {
  int rank = 0;
  int size = 1;
  uint64_t token = 0;    // unique per communicator (all ranks agree through the store)
  std::string host_id;   // resolved host identity of this rank
  Options options;
};

// Connects to every peer through `store` (keys "tcp/..."); blocks until connected or
// options.connect_timeout passes. `pool` must outlive the transport.
Result<std::unique_ptr<Transport>> make_tcp_transport(const TcpTransportConfig& config, Store& store,
                                                      BufferPool& pool);

// Clean shutdown of a TCP transport: tells every peer, waits (up to `timeout`) until each peer
// has said the same, then closes. Pending requests end with ErrorCode::aborted.
void close_tcp_transport(Transport& transport, std::chrono::milliseconds timeout);

}  // namespace weft
