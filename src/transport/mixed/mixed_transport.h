// The mixed transport: shared memory to the peers on this host, TCP to the others, per peer.
//
// transport=auto builds it for a rank whose host holds several ranks of a job that spans hosts
// (one host: the shm transport alone; a rank alone on its host: TCP alone). Collective messages
// to a peer on this host go through the shm transport of this host's ranks, every other message
// through a TCP transport over all ranks. Point-to-point messages (send/recv) always go over TCP,
// also between ranks of one host: a receive from any rank (kAnyPeer) must see every sender's
// messages in one place, in order. The waiting thread reads the TCP sockets itself, as with TCP
// alone; the shm part is progressed by its own thread (ShmTransportConfig::caller_progress off),
// whose completions wake the waiter wherever it sleeps. A failure of either part fails the
// other, so peers on both sides learn of it.
#pragma once

#include <memory>
#include <vector>

#include "transport/transport.h"

namespace weft {

// `local[r]`: rank r is on this host (local[rank] too). `shm` serves those ranks (its requests
// carry communicator ranks, ShmTransportConfig::members), `tcp` all ranks.
std::unique_ptr<Transport> make_mixed_transport(int rank, int size, std::vector<bool> local,
                                                std::unique_ptr<Transport> shm,
                                                std::unique_ptr<Transport> tcp);

}  // namespace weft
