// The shared-memory transport: ranks of one host exchange messages through rings in shared memory.
//
// Each rank creates one POSIX shared-memory segment holding an inbound ring per peer (single
// producer, single consumer, Options::shm_ring_bytes each) and maps every peer's segment. A
// message is copied into the receiver's ring by the sender and out of it, straight into the
// posted receive buffer, by the receiver: two copies of cache-resident chunks, which on the
// machines weft runs on is faster than one Cross-Memory-Attach copy (docs/algorithms.md,
// "Measured facts the code is built on"). Small messages go eagerly within per-peer credits; large ones
// wait for the receive (RTS, CTS, then DATA chunks), so unexpected memory stays bounded. With
// Options::shm_cma_threshold set, the RTS of a large message carries the sender's buffer address
// and the receiver reads it in place (process_vm_readv) and acknowledges it, falling back to the
// CTS path where the kernel refuses. The record layout is in docs/wire-format.md ("Shared-memory
// records").
//
// Waiting polls the rings briefly, then sleeps on a futex in the rank's own segment that senders
// ring, so ranks that outnumber cores still progress. A rank's exit is seen through a pidfd: a
// peer that leaves without closing (killed, crashed) fails every pending operation with
// ErrorCode::peer_lost naming it. Segment names are unlinked as soon as every rank has mapped
// them, so nothing is left in /dev/shm once the processes are gone; names a killed job left
// behind during set-up are removed by the next job on the host.
#pragma once

#include <sched.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "transport/transport.h"
#include "weft/options.h"
#include "weft/store.h"

namespace weft {

class BufferPool;

struct ShmTransportConfig {
  int rank = 0;
  int size = 1;
  uint64_t token = 0;  // unique per communicator (all ranks agree through the store)
  Options options;
  // Ranks of the whole job on this machine (0: just this transport's): when they outnumber the
  // usable CPUs, waiting ranks yield and sleep soon instead of polling.
  int machine_ranks = 0;
  // The rank each index is called in messages and requests (Request::peer) when this transport
  // serves part of a larger communicator (mixed transport): members[rank] is this rank. Empty:
  // the identity. Store keys stay by index.
  std::vector<int> members;
  // True: collectives are progressed by the thread that waits for them (wait() polls the rings,
  // then sleeps on this rank's doorbell), the fastest way when this transport carries everything.
  // False: the progress thread serves operations too (its completions wake the waiter through
  // the Completion, wherever it sleeps) and wait() polls the rings for at most a few
  // microseconds (not at all when the host's ranks outnumber its CPUs), then returns false, so a
  // waiter can sleep in another transport's wait meanwhile.
  bool caller_progress = true;
};

// What two ranks must share to use shared memory: the host identity (equal in containers that
// copy the hostname: it holds the boot id too), the PID namespace (pids are used to watch peers),
// the file system behind /dev/shm (a container usually mounts its own: its ranks cannot open the
// host's segments) and the effective user (segments are 0600). Ranks whose keys differ count as
// different hosts and talk over TCP.
std::string shm_host_key(const std::string& host_id);

// Publishes this rank's host key under "shm/host/<rank>" and returns every rank's, in rank order.
Result<std::vector<std::string>> exchange_host_keys(Store& store, int rank, int size,
                                                    const std::string& key,
                                                    std::chrono::milliseconds timeout);

// Where ranks that outnumber the CPUs spread out. The kernel moves a queued task to another CPU
// mostly when that CPU goes idle, and a rank waiting by yielding never lets its CPU go idle: a
// layout such as three ranks on one CPU and one on the other stays for whole runs and makes small
// calls more than twice as slow (docs/algorithms.md, "Progress rules"). So every waiting rank
// publishes its CPU now and then, and the highest rank on a CPU that holds more than
// ceil(ranks/cpus) of them moves to the allowed CPU holding the fewest, if that holds fewer than
// floor(ranks/cpus). Returns that CPU for rank `rank` given every rank's CPU (`cpu_of_rank`, -1:
// not known yet, then nobody moves), or -1 to stay.
int spread_target(int rank, std::span<const int> cpu_of_rank, const cpu_set_t& allowed);

// Unlinks the segments of the given processes, which must have exited (a launcher's ranks once
// the job is over: one killed during set-up leaves its segment behind). Returns how many.
int remove_shm_segments_of(std::span<const pid_t> exited);

// Creates this rank's segment, maps every peer's (keys "shm/seg/<rank>", "shm/ready/<rank>") and
// starts the transport. `pool` must outlive it.
Result<std::unique_ptr<Transport>> make_shm_transport(const ShmTransportConfig& config, Store& store,
                                                      BufferPool& pool);

}  // namespace weft
