// LinkSecurity: the job key and the security mode a communicator's links are to use, resolved once
// at the edge (Communicator::from_env: Options::security and the key file the launcher named) and
// handed down unchanged to every communicator built from it (split, shrink, grow, join, the
// hierarchy's sub-communicators).
//
// CommunicatorImpl::create (core/communicator_impl.cc) holds it as `link_security_` and copies
// `mode` and `key` into the TransportSetup it gives make_transport: the TCP links run the Noise
// handshake and records with it (the store uses the key too: rendezvous/tcp_store_auth.h). Plain
// value: copy freely; the key is shared read-only and wiped when its last owner goes.
#pragma once

#include <memory>

#include "security/job_key.h"
#include "weft/options.h"
#include "weft/status.h"

namespace weft {

struct LinkSecurity {
  Security mode = Security::off;  // resolved: never automatic
  std::shared_ptr<const security::JobKey> key;  // null exactly when mode is off and none given
};

// automatic -> encrypt with a key, off without; auth/encrypt without a key: invalid_argument.
// Logs one warning line when the job runs without a key (rank 0 only, `log_rank0`).
Result<LinkSecurity> resolve_link_security(Security requested,
                                           std::shared_ptr<const security::JobKey> key,
                                           bool log_rank0);

}  // namespace weft
