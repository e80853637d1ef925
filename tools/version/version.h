// What `weft --version` prints: the version, the git revision it was built from, and what this
// build has in it (transports, reduction kernels, security, Python module, torch backend).
#pragma once

#include <string>

namespace weft::tools {

std::string version_text();

}  // namespace weft::tools
