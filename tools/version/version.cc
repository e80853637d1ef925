#include "tools/version/version.h"

#include "tools/version/build_config.h"  // generated at configure time
#include "tools/version/git_revision.h"  // generated at build time
#include "weft/version.h"

namespace weft::tools {

std::string version_text() {
  // The first line is "weft VERSION" alone: scripts (and help2man) read the version from it.
  std::string s = std::string("weft ") + WEFT_VERSION_STRING + "\n";
  s += std::string("revision: ") + WEFT_GIT_REVISION + "\n";
  s += std::string("transports: ") + WEFT_BUILD_TRANSPORTS + "\n";
  s += std::string("reduction kernels: ") + WEFT_BUILD_REDUCE_ISAS +
       " (the best the CPU runs is chosen at run time)\n";
  s += std::string("security: Noise handshake, encrypted TCP links, authenticated store (OpenSSL ") +
       WEFT_BUILD_OPENSSL + ")\n";
  s += std::string("python module: ") + WEFT_BUILD_PYTHON + "\n";
  s += std::string("torch backend: ") + WEFT_BUILD_TORCH + "\n";
  s += std::string("parameter server: ") + WEFT_BUILD_PS + "\n";
  s += std::string("build: ") + WEFT_BUILD_TYPE + ", " + WEFT_BUILD_COMPILER;
  return s;
}

}  // namespace weft::tools
