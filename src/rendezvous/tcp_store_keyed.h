// The key-taking forms of TcpStoreServer::start and connect_tcp_store (weft/store.h), for
// callers that already hold the job key: the bootstrap, `weft run`, `weft diag`. The protocol
// and the authentication itself are private to rendezvous/ (tcp_store_auth.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "security/job_key.h"
#include "weft/status.h"
#include "weft/store.h"

namespace weft {

// The key-taking forms of TcpStoreServer::start and connect_tcp_store, for callers that already
// read the job key; `key` null: no authentication. config.auth_key_file is ignored.
Result<std::unique_ptr<TcpStoreServer>> start_tcp_store_server(
    const std::string& host, uint16_t port, const TcpStoreConfig& config,
    std::shared_ptr<const security::JobKey> key);
Result<std::shared_ptr<Store>> connect_tcp_store_with_key(
    const std::string& host, uint16_t port, std::chrono::milliseconds timeout,
    std::shared_ptr<const security::JobKey> key);

}  // namespace weft
