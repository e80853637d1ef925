// weftUniqueId: the bytes of an id and the store servers this process serves ids from.
//
// Layout (128 bytes, all integers big-endian): "weftid01" (8 bytes), the store's TCP port (2),
// a random job namespace (16), the store's host as text, NUL-terminated (at most 64 with the
// NUL), a flag byte (1: the store and the links use the job key that WEFT_AUTH_KEY_FILE names in
// every rank's environment), zeros (docs/c-api.md). The namespace keeps jobs that reuse one
// store apart and makes the id hard to guess; without a key the id is the job's secret.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "capi.h"

namespace weft::capi {

struct UniqueId {
  std::string host;
  uint16_t port = 0;
  std::string job;  // the namespace, 32 hex digits
  bool keyed = false;  // the store authenticates with the job key
};

Result<UniqueId> parse_unique_id(const weftUniqueId& id);

// Starts a store server here and makes an id naming it; the server is kept for the id.
// `key_file` (WEFT_AUTH_KEY_FILE; empty: none): the server authenticates with that job key.
Result<weftUniqueId> make_unique_id(const std::string& key_file);

// This process's lease on the server behind `id`, or null when another process serves it. A
// communicator made from the id holds the lease; once the first one exists the id no longer
// keeps the server by itself (release_id_hold), so the last communicator stops it.
std::shared_ptr<ServerLease> lease_for(const UniqueId& id);
void release_id_hold(const UniqueId& id);

}  // namespace weft::capi
