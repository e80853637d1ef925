// TCP checks between the hosts of a Network, made by the test process itself: each socket is
// created inside a host's namespace (InNamespace) and keeps that namespace, so no tool has to be
// installed in the namespaces.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include "netns/network.h"

namespace weft::test::netns {

// Whether host `from` opens a TCP connection to a listener of host `to` on `address` (one of
// `to`'s addresses) within `timeout`.
bool reaches(const Network& net, const std::string& from, const std::string& to,
             const std::string& address, std::chrono::milliseconds timeout);

// Sends `bytes` over one TCP connection from host `from` to host `to`'s first address; the
// receiver's goodput in Mbit/s from its first byte to its last, or nullopt when it failed.
std::optional<double> goodput_mbit(const Network& net, const std::string& from,
                                   const std::string& to, size_t bytes);

}  // namespace weft::test::netns
