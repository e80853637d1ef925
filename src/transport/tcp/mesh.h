// Mesh set-up: connects every pair of ranks: `sockets_per_peer` TCP connections between ranks on
// different hosts, one between ranks on the same host (extra sockets only cost system calls there).
//
// Each rank listens on one port and publishes one record ("tcp/addr/<rank>": host id, address,
// port, machine id) in the store; rank i connects to every rank j < i and accepts from every j > i, in
// parallel. Peers with the same host id connect over loopback. The first frame on every socket
// is a HELLO carrying the communicator token, so a stray or stale connection is rejected.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "base/fd.h"
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
};

struct Mesh {
  std::vector<std::vector<Fd>> sockets;  // sockets[peer][index]; sockets[rank] is empty
  int local_ranks = 1;                   // ranks on this host, this one included
};

// Connects; every socket is set up with set_stream_options.
Result<Mesh> connect_mesh(Store& store, const MeshConfig& config);

}  // namespace weft::tcp
