#include "core/link_security.h"

#include <fmt/format.h>

#include "base/log.h"

namespace weft {

Result<LinkSecurity> resolve_link_security(Security requested,
                                           std::shared_ptr<const security::JobKey> key,
                                           bool log_rank0) {
  LinkSecurity s;
  s.key = std::move(key);
  if (requested == Security::automatic) {
    s.mode = s.key ? Security::encrypt : Security::off;
  } else {
    s.mode = requested;
  }
  if (s.mode != Security::off && !s.key) {
    return Status(ErrorCode::invalid_argument,
                  fmt::format("security={} needs a job key: set WEFT_AUTH_KEY_FILE to a file of 64 "
                              "hex characters (mode 0600), or launch with weft run",
                              to_string(s.mode)));
  }
  if (!s.key && log_rank0) {
    log::warn(
        "running WITHOUT a job key (WEFT_AUTH_KEY_FILE is not set): the store and the links are "
        "unauthenticated, anyone who can reach them can read or join this job");
  }
  return s;
}

}  // namespace weft
