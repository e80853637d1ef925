// File store internals exposed for tests: how a key becomes a file name.
//
// Every key maps to one file in the store directory. Names are "k_" + the key with every byte
// outside [A-Za-z0-9._-] written as %XX, so no key can name a path outside the directory (no '/',
// never "." or ".."). Keys whose name would exceed kMaxPlainNameBytes become "h_" + a 128-bit hash
// in hex; each file also records its full key, so a hash collision is detected, never served.
// Temporary files start with "t_" and the lock file is "lock": neither can clash with a key.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace weft {

inline constexpr size_t kMaxPlainNameBytes = 200;

std::string file_name_for_key(std::string_view key);

}  // namespace weft
