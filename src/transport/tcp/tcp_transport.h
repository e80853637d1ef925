// The TCP transport: one per communicator, connections to every peer over an epoll reactor.
//
// Small messages go eagerly within per-peer credits (Options::eager_credit_bytes bounds what a
// peer may park here unexpected); larger ones use rendezvous (RTS, then CTS once the receive is
// posted, then DATA written straight from the send buffer into the receive buffer, striped over
// Options::sockets_per_peer sockets). The header grammar is in docs/wire-format.md.
//
// Security (docs/security.md): with `security` auth or encrypt every socket starts with a Noise
// handshake keyed by `job_key` and every frame then travels as records; every rank of a job
// must use the same mode and key. `off` (the default) is the clear protocol, unchanged.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "security/job_key.h"
#include "security/suite.h"
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
  security::SecurityMode security = security::SecurityMode::off;
  std::shared_ptr<const security::JobKey> job_key;  // required unless security is off
  // How long an incoming connection may take to identify itself during set-up before it is
  // dropped as a stranger (the job never waits for it).
  std::chrono::milliseconds stranger_timeout{5000};
};

// Connects to every peer through `store` (keys "tcp/..."); blocks until connected or
// options.connect_timeout passes. `pool` must outlive the transport.
Result<std::unique_ptr<Transport>> make_tcp_transport(const TcpTransportConfig& config, Store& store,
                                                      BufferPool& pool);

// Clean shutdown of a TCP transport: tells every peer, waits (up to `timeout`) until each peer
// has said the same, then closes. Pending requests end with ErrorCode::aborted.
void close_tcp_transport(Transport& transport, std::chrono::milliseconds timeout);

}  // namespace weft
