// WEFT_TEST_SECURITY=auth|encrypt runs the TCP transports of the multi-rank tests over secured
// links (ctest's "secured." copies of the TCP suites), with one job key for the process: the
// sweeps' own transports (harness.h) and, through the factory's testing hook, every
// communicator's.
#pragma once

#include <cstdlib>
#include <memory>

#include "security/job_key.h"
#include "security/suite.h"
#include "transport/factory.h"

namespace weft::testing {

struct TestSecurity {
  security::SecurityMode mode = security::SecurityMode::off;
  std::shared_ptr<const security::JobKey> job_key;
};

inline const TestSecurity& test_security() {
  static const TestSecurity s = [] {
    TestSecurity t;
    const char* mode = std::getenv("WEFT_TEST_SECURITY");
    if (mode == nullptr || *mode == '\0') return t;
    auto parsed = security::parse_security_mode(mode);
    auto key = security::JobKey::generate();
    if (!parsed || !key.ok()) std::abort();
    t.mode = *parsed;
    t.job_key = std::make_shared<const security::JobKey>(std::move(key.value()));
    set_tcp_security_for_testing(t.mode, t.job_key);
    return t;
  }();
  return s;
}

}  // namespace weft::testing
