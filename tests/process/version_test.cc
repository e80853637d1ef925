// `weft --version`: the version first (alone on its line, as scripts and help2man read it), then
// the git revision and what the build has in it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "process/tool_process.h"
#include "weft/version.h"

namespace weft::test {
namespace {

TEST(VersionTest, NamesVersionRevisionAndWhatIsBuiltIn) {
  ToolResult r = run_tool({"--version"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> lines = r.out_lines();
  ASSERT_GE(lines.size(), 9u) << r.out;
  EXPECT_EQ(lines[0], std::string("weft ") + WEFT_VERSION_STRING);
  const std::vector<std::string> prefixes = {"revision: ",     "transports: tcp, local, shm, mixed",
                                             "reduction kernels: generic", "security: ",
                                             "python module: ", "torch backend: ",
                                             "parameter server: ", "build: "};
  for (size_t i = 0; i < prefixes.size(); ++i) {
    EXPECT_EQ(lines[i + 1].rfind(prefixes[i], 0), 0u) << "line " << i + 1 << ": " << lines[i + 1];
  }
  EXPECT_GT(lines[1].size(), std::string("revision: ").size()) << "no revision";  // "unknown" outside git
}

}  // namespace
}  // namespace weft::test
