// Mesh set-up: connects every pair of ranks: `sockets_per_peer` TCP connections between ranks on
// different hosts, one between ranks on the same host (extra sockets only cost system calls there).
//
// Each rank listens on one port and publishes one record ("tcp/addr/<rank>": host id, address,
// port, machine id) in the store; rank i connects to every rank j < i and accepts from every j > i, in
// parallel. Peers with the same host id connect over loopback. The first frame on every socket
// is a HELLO carrying the communicator token, so a stray or stale connection is rejected.
//
// With security on (docs/security.md) the record also carries the rank's static X25519 public
// key and AES flag, the HELLO rides encrypted in Noise message 1 (after the clear preamble),
// the acceptor answers message 2, and the connecting side then sends one empty record (the
// confirmation): only once it opens is the socket filed as the claimed rank's, so a replayed
// message 1 or an impostor without the job key never takes a real rank's place.
//
// The acceptor serves every incoming connection at once (poll), each with its own deadline
// (kSetupStrangerTimeout): a silent, slow or hostile connection is dropped, with a warning
// naming its address, and never delays or fails the job.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/fd.h"
#include "security/job_key.h"
#include "security/primitives.h"
#include "security/record.h"
#include "security/suite.h"
#include "weft/status.h"
#include "weft/store.h"

namespace weft::tcp {

struct MeshConfig {
  int rank = 0;
  int size = 1;
  int sockets_per_peer = 1;
  uint64_t token = 0;
  std::string host_id;
  std::string interface;  // Options::interface
  std::chrono::steady_clock::time_point deadline;
  // How long one incoming connection may take to identify itself (HELLO, or the handshake and
  // the confirmation record) before it is dropped as a stranger.
  std::chrono::milliseconds stranger_timeout{5000};
  // Security: mode off (clear HELLO and frames) or auth/encrypt with the job key (required then).
  security::SecurityMode security = security::SecurityMode::off;
  std::shared_ptr<const security::JobKey> job_key;
};

// The record layer of one secured socket (both empty when security is off). The sealer has
// sealed, and the opener opened, the confirmation record: the transport continues the counters.
struct LinkCrypto {
  std::optional<security::RecordSealer> sealer;
  std::optional<security::RecordOpener> opener;
};

// What a rank publishes about its security in its address record (an extra line).
struct StaticKeyRecord {
  security::PublicKey key{};
  bool has_aes = false;
};
// "noise <64 lower-case hex> <0|1>"
std::string encode_static_key_line(const StaticKeyRecord& record);
// The line above, parsed as hostile input (exact length, hex digits, flag 0 or 1).
Result<StaticKeyRecord> parse_static_key_line(std::string_view line, int rank);

// What each rank publishes in the store as "tcp/addr/<rank>": host id, address, port, machine
// id, one per line, and with security a fifth line, the static key ("noise <hex> <0|1>").
struct PeerAddress {
  std::string host_id;
  std::string ip;
  uint16_t port = 0;
  std::string machine;  // default_host_id(): the real machine, whatever host_id says
  std::optional<StaticKeyRecord> static_key;  // published by ranks running with security
};
inline constexpr size_t kMaxAddressField = 255;
inline constexpr size_t kMaxAddressRecord = 4 * (kMaxAddressField + 1) + 128;

// The record's text; refuses empty fields, fields over kMaxAddressField bytes or with newlines.
Result<std::string> encode_address(const PeerAddress& a);
// Another rank's record, read as hostile input: bounded size, exactly 4 or 5 lines, no empty
// field, a decimal port in 1..65535 and nothing after it, a well-formed key line.
Result<PeerAddress> parse_address(std::string_view text, int rank);

struct Mesh {
  std::vector<std::vector<Fd>> sockets;  // sockets[peer][index]; sockets[rank] is empty
  std::vector<std::vector<LinkCrypto>> crypto;  // same shape as sockets when security is on
  int local_ranks = 1;                   // ranks on this host, this one included
};

// The limits of every record of a secured TCP link.
security::RecordLimits tcp_record_limits();

// Connects; every socket is set up with set_stream_options.
Result<Mesh> connect_mesh(Store& store, const MeshConfig& config);

}  // namespace weft::tcp
