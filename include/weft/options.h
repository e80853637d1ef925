// Options: every setting of a communicator, filled once at the edge and validated.
//
// Precedence, lowest to highest: the values set in code, a JSON file named by WEFT_CONFIG, then
// WEFT_* environment variables. Nothing inside weft reads the environment; Options::from_env is
// the only place that does. docs/configuration.md lists every field, its variable and JSON key.
// An Options value is plain data: copy it freely, it is not shared with the communicator.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "weft/export.h"
#include "weft/status.h"
#include "weft/types.h"

namespace weft {

// automatic: shared memory when every rank is on one host (same host id and process namespace),
// else TCP.
enum class TransportKind : uint8_t { automatic = 0, tcp, shm };

// How links and the store are protected with the job key (docs/security.md). automatic: encrypt
// when a job key is given (WEFT_AUTH_KEY_FILE, or `weft run`'s own key), else off with one warning
// line. auth: authenticated frames in clear; encrypt: authenticated and encrypted. auth and encrypt
// without a key are an error. The store authenticates every request whenever a key is given.
enum class Security : uint8_t { automatic = 0, off, auth, encrypt };

// Algorithms a collective may be forced to use. `automatic` lets the selector choose per call by
// message size and world size. Not every algorithm implements every collective; forcing one that
// does not is rejected by Options::validate.
enum class Algorithm : uint8_t {
  automatic = 0,
  ring,                // chunked, pipelined ring (allreduce, allgather(v), reduce_scatter, broadcast, reduce)
  recursive_doubling,  // allreduce, allgather
  halving_doubling,    // Rabenseifner: reduce-scatter by halving + allgather by doubling (allreduce)
  binomial,            // binomial tree (broadcast, reduce, gather, scatter)
  direct,              // every rank talks to the root or to every peer directly
  pairwise,            // pairwise exchange (alltoall(v))
  dissemination,       // barrier
  // Across hosts: inside each host over shared memory, between hosts over TCP (allreduce,
  // allgather, reduce_scatter, broadcast). Runs flat (automatic) when every rank is on one host.
  hierarchical,
  // One host, shared memory: every rank publishes its input in a buffer of its own that all
  // ranks map and reads the peers' in place (every collective but alltoallv, while the call's
  // payload fits the buffer: 16 KiB less a header). Elsewhere the selector's choice runs.
  shm_direct,
  // sparse_allreduce: every rank's rows to every rank (allgatherv of indices and values), then a
  // local merge; or the rows scattered into a dense table that is allreduced. Left automatic,
  // the choice follows the rows' density (docs/algorithms.md, "Sparse allreduce").
  gather_merge,
  dense,
};
inline constexpr int kAlgorithmCount = 12;

WEFT_API const char* to_string(Algorithm a);
WEFT_API std::optional<Algorithm> parse_algorithm(std::string_view s);
WEFT_API const char* to_string(TransportKind t);
WEFT_API const char* to_string(Security s);
// True when `a` has an implementation for `kind`.
WEFT_API bool algorithm_supports(Algorithm a, OpKind kind);

struct WEFT_API Options {
  // Identity. -1 means "take it from the launcher environment" (Communicator::from_env).
  int rank = -1;
  int size = -1;

  // Protocol stack.
  TransportKind transport = TransportKind::automatic;
  std::array<Algorithm, kOpKindCount> algorithms{};  // indexed by OpKind; all automatic
  size_t chunk_bytes = 512 * 1024;        // pipelining unit of ring algorithms
  int sockets_per_peer = 2;               // TCP connections per peer; large messages are striped
  size_t eager_threshold = 64 * 1024;     // messages up to this size are sent eagerly
  size_t eager_credit_bytes = 4 << 20;    // most unexpected eager bytes one peer may hold here
  int reactor_threads = 1;                // epoll threads per communicator
  size_t shm_ring_bytes = 1 << 20;        // shared-memory ring per ordered pair of ranks
  // Shared-memory messages at least this large are read by the receiver straight from the
  // sender's buffer (process_vm_readv: one copy instead of two through the ring), falling back to
  // the ring where the kernel refuses it; 0: never.
  size_t shm_cma_threshold = 0;

  // Networking.
  std::string interface;  // NIC name ("eth0") or IPv4 CIDR ("10.1.0.0/16"); empty = automatic
  std::string host_id;    // overrides the host identity used to tell local from remote peers
  Security security = Security::automatic;  // see Security; the key comes from the launcher

  // Time limits.
  std::chrono::milliseconds timeout{30000};          // per operation
  std::chrono::milliseconds connect_timeout{60000};  // rendezvous and connection set-up
  // Failure detection: a peer from which nothing (data or heartbeat) arrived for this long is
  // declared failed (dead, frozen or cut off), and every operation with it ends with
  // ErrorCode::peer_lost naming it. Heartbeats go every peer_timeout/5 when a link is idle. 0: off.
  std::chrono::milliseconds peer_timeout{10000};

  std::string log_level = "warn";  // trace, debug, info, warn, error, off

  // Diagnosis.
  size_t flight_recorder = 1024;  // recent operations kept per communicator (0: off)
  std::string diag_dir;           // where a failed operation's flight record is written (JSON)

  // Observability (docs/observability.md). `metrics`: count operations, bytes, durations and
  // errors per communicator (Communicator::metrics; a few nanoseconds per operation). With
  // `metrics_addr` ("HOST:PORT", port 0: the kernel picks) the process serves them to Prometheus
  // at http://HOST:PORT/metrics and each rank publishes the address in the job's store.
  bool metrics = true;
  std::string metrics_addr;  // empty: no HTTP endpoint

  Algorithm algorithm(OpKind k) const { return algorithms[static_cast<size_t>(k)]; }
  void set_algorithm(OpKind k, Algorithm a) { algorithms[static_cast<size_t>(k)] = a; }

  // Applies WEFT_CONFIG (a JSON file) and then WEFT_* variables on top of `base`, and validates.
  static Result<Options> from_env(const Options& base);
  static Result<Options> from_env() { return from_env(Options()); }
  // Applies one JSON document (the format of WEFT_CONFIG) on top of this.
  Status apply_json(std::string_view json_text);
  // Applies one setting by its environment name ("WEFT_CHUNK_BYTES") or JSON key ("chunk_bytes").
  Status apply(std::string_view key, std::string_view value);
  Status validate() const;
  // One line with every value in effect, for the log.
  std::string describe() const;
};

}  // namespace weft
