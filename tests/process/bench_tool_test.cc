// `weft bench` as a user sees it: the nccl-tests columns, the dtype (-d) and op (-o) options,
// the sizes from -b/-e/-f, the bus-bandwidth factor of each collective, the footer, and the rows
// written with --json, which must agree with the printed table.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "process/tool_process.h"

namespace weft::test {
namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// One printed data row: size count type redop root | time algbw busbw #wrong (out of place)
// | the same in place. A form the collective does not run prints "-" (has[k] false).
struct Row {
  long long bytes = 0, count = 0;
  std::string type, redop;
  int root = 0;
  bool has[2] = {};
  double time[2] = {}, algbw[2] = {}, busbw[2] = {};
  std::string wrong[2];
};

// Rank 0's data rows ("[0]" prefix, not a comment).
std::vector<Row> rows_of(const ToolResult& r) {
  std::vector<Row> rows;
  for (const std::string& line : r.out_lines()) {
    if (line.rfind("[0] ", 0) != 0 || line.find('#') != std::string::npos) continue;
    std::istringstream in(line.substr(4));
    Row row;
    std::string f[2][4];
    if (!(in >> row.bytes >> row.count >> row.type >> row.redop >> row.root >> f[0][0] >> f[0][1] >>
          f[0][2] >> f[0][3] >> f[1][0] >> f[1][1] >> f[1][2] >> f[1][3])) {
      continue;
    }
    for (int k = 0; k < 2; ++k) {
      row.has[k] = f[k][0] != "-";
      if (!row.has[k]) continue;
      row.time[k] = std::stod(f[k][0]);
      row.algbw[k] = std::stod(f[k][1]);
      row.busbw[k] = std::stod(f[k][2]);
      row.wrong[k] = f[k][3];
    }
    rows.push_back(row);
  }
  return rows;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "-" + std::to_string(::getpid()) + ".json"))
      .string();
}

ToolResult bench(int ranks, const std::vector<std::string>& args) {
  std::vector<std::string> all = {"run", "-n", std::to_string(ranks), "--timeout", "120", "--",
                                  WEFT_TOOL_PATH, "bench"};
  all.insert(all.end(), args.begin(), args.end());
  return run_tool(all);
}

TEST(BenchTool, ColumnsDtypeOpSizesFooterAndJson) {
  const std::string json_path = temp_path("weft-bench");
  auto r = bench(3, {"allreduce", "-b", "8", "-e", "4K", "-f", "8", "-n", "3", "-w", "1", "-d",
                     "f64", "-o", "max", "--check", "--json", json_path});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "size        count   type  redop  root       time    algbw    "
                              "busbw #wrong"))
      << r.out;
  EXPECT_TRUE(contains(r.out, "# Wrong elements       : 0 OK")) << r.out;
  EXPECT_TRUE(contains(r.out, "# Avg bus bandwidth    : ")) << r.out;
  const std::vector<Row> rows = rows_of(r);
  // 8, 64, 512 and 4096 bytes of f64: 1, 8, 64 and 512 elements.
  ASSERT_EQ(rows.size(), 4u) << r.out;
  const long long want_bytes[] = {8, 64, 512, 4096};
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& row = rows[i];
    EXPECT_EQ(row.bytes, want_bytes[i]);
    EXPECT_EQ(row.count, want_bytes[i] / 8);
    EXPECT_EQ(row.type, "f64");
    EXPECT_EQ(row.redop, "max");
    ASSERT_TRUE(row.has[0] && row.has[1]) << r.out;
    EXPECT_EQ(row.wrong[0], "0");
    EXPECT_EQ(row.wrong[1], "0");
    for (int k = 0; k < 2; ++k) {
      EXPECT_GT(row.time[k], 0.0);
      // allreduce: busbw = algbw * 2(n-1)/n, n = 3 (both printed with 3 decimals).
      EXPECT_NEAR(row.busbw[k], row.algbw[k] * 4.0 / 3.0, 0.0011 + row.busbw[k] * 1e-3);
    }
  }
  std::ifstream in(json_path);
  ASSERT_TRUE(in.good()) << json_path;
  const auto j = nlohmann::json::parse(in, nullptr, false);
  std::filesystem::remove(json_path);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["world_size"], 3);
  ASSERT_EQ(j["rows"].size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& jr = j["rows"][i];
    EXPECT_EQ(jr["collective"], "allreduce");
    EXPECT_EQ(jr["size_bytes"], rows[i].bytes);
    EXPECT_EQ(jr["count"], rows[i].count);
    EXPECT_EQ(jr["type"], "f64");
    EXPECT_EQ(jr["redop"], "max");
    EXPECT_EQ(jr["out_of_place"]["wrong"], 0);
    EXPECT_NEAR(jr["out_of_place"]["time_us"].get<double>(), rows[i].time[0],
                0.01 + rows[i].time[0] * 1e-3);
    EXPECT_NEAR(jr["in_place"]["busbw_gbps"].get<double>(), rows[i].busbw[1], 0.0011);
  }
}

TEST(BenchTool, BusBandwidthFactorOfEachCollective) {
  // nccl-tests factors with n = 4: allreduce 2(n-1)/n, allgather / reduce_scatter / alltoall
  // (n-1)/n, broadcast / reduce 1. Large enough sizes that algbw has significant digits.
  struct Case {
    const char* collective;
    double factor;
  };
  for (const Case& c : {Case{"allreduce", 1.5}, Case{"allgather", 0.75},
                        Case{"reduce_scatter", 0.75}, Case{"alltoall", 0.75},
                        Case{"broadcast", 1.0}, Case{"reduce", 1.0}}) {
    SCOPED_TRACE(c.collective);
    auto r = bench(4, {c.collective, "-b", "1M", "-e", "1M", "-n", "2", "-w", "1", "-d", "i32",
                       "--check"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const std::vector<Row> rows = rows_of(r);
    ASSERT_EQ(rows.size(), 1u) << r.out;
    EXPECT_EQ(rows[0].type, "i32");
    ASSERT_TRUE(rows[0].has[1]) << r.out;
    for (int k = 0; k < 2; ++k) {
      if (!rows[0].has[k]) continue;
      EXPECT_EQ(rows[0].wrong[k], "0");
      ASSERT_GT(rows[0].algbw[k], 0.0) << r.out;
      // algbw = size / time: check it against the printed time too.
      EXPECT_NEAR(rows[0].algbw[k], 1048576.0 / (rows[0].time[k] * 1e3),
                  0.0011 + rows[0].algbw[k] * 2e-3);
      EXPECT_NEAR(rows[0].busbw[k], rows[0].algbw[k] * c.factor, 0.0011 + rows[0].busbw[k] * 2e-3);
    }
  }
}

TEST(BenchTool, BadOptionsAreErrors) {
  auto dtype = bench(2, {"allreduce", "-d", "f17"});
  EXPECT_NE(dtype.exit_code, 0);
  EXPECT_TRUE(contains(dtype.out + dtype.err, "f17")) << dtype.out << dtype.err;
  auto op = bench(2, {"allreduce", "-o", "median"});
  EXPECT_NE(op.exit_code, 0);
  EXPECT_TRUE(contains(op.out + op.err, "median")) << op.out << op.err;
}

}  // namespace
}  // namespace weft::test
