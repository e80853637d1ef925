// Options: names, the algorithm x collective table, apply() by env name and JSON key, JSON
// documents and WEFT_CONFIG files, the environment (through options_from_env_map), validate(),
// describe(), and docs/configuration.md checked against the code so the two cannot drift.
#include "weft/options.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "base/options_env.h"

namespace weft {
namespace {

using std::chrono::milliseconds;
using Env = std::map<std::string, std::string>;

// A file under the temp directory, removed when the test ends.
class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    static int counter = 0;
    path_ =
        std::filesystem::temp_directory_path() / ("weft_options_test_" + std::to_string(getpid()) +
                                                  "_" + std::to_string(++counter) + ".json");
    std::ofstream(path_) << text;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

TEST(OptionsNames, AlgorithmsAndTransportsRoundTrip) {
  for (int i = 0; i < kAlgorithmCount; ++i) {
    const auto a = static_cast<Algorithm>(i);
    EXPECT_EQ(parse_algorithm(to_string(a)), a);
  }
  EXPECT_STREQ(to_string(Algorithm::automatic), "auto");
  EXPECT_STREQ(to_string(Algorithm::recursive_doubling), "recursive_doubling");
  EXPECT_EQ(parse_algorithm("automatic"), Algorithm::automatic);
  EXPECT_EQ(parse_algorithm("rings"), std::nullopt);
  EXPECT_STREQ(to_string(TransportKind::automatic), "auto");
  EXPECT_STREQ(to_string(TransportKind::tcp), "tcp");
  EXPECT_STREQ(to_string(TransportKind::shm), "shm");
}

TEST(OptionsSupport, MatchesTheAlgorithmTable) {
  using K = OpKind;
  const std::map<Algorithm, std::set<OpKind>> table = {
      {Algorithm::ring,
       {K::allreduce, K::allgather, K::allgatherv, K::reduce_scatter, K::broadcast, K::reduce}},
      {Algorithm::recursive_doubling, {K::allreduce, K::allgather}},
      {Algorithm::halving_doubling, {K::allreduce, K::reduce_scatter}},
      {Algorithm::binomial, {K::broadcast, K::reduce, K::gather, K::scatter, K::barrier}},
      {Algorithm::pairwise, {K::alltoall, K::alltoallv}},
      {Algorithm::dissemination, {K::barrier}},
      {Algorithm::gather_merge, {K::sparse_allreduce}},
      {Algorithm::dense, {K::sparse_allreduce}},
  };
  for (int k = 0; k < kOpKindCount; ++k) {
    const auto kind = static_cast<OpKind>(k);
    EXPECT_TRUE(algorithm_supports(Algorithm::automatic, kind));
    EXPECT_EQ(algorithm_supports(Algorithm::direct, kind),
              kind != K::send && kind != K::recv && kind != K::sparse_allreduce);
    for (const auto& [a, kinds] : table) {
      EXPECT_EQ(algorithm_supports(a, kind), kinds.count(kind) == 1)
          << to_string(a) << " x " << to_string(kind);
    }
  }
}

TEST(OptionsApply, AcceptsEnvNamesAndJsonKeys) {
  Options o;
  ASSERT_TRUE(o.apply("WEFT_CHUNK_BYTES", "1M").ok());
  EXPECT_EQ(o.chunk_bytes, size_t{1} << 20);
  ASSERT_TRUE(o.apply("chunk_bytes", "64KiB").ok());
  EXPECT_EQ(o.chunk_bytes, size_t{64} << 10);
  ASSERT_TRUE(o.apply("WEFT_RANK", "3").ok());
  ASSERT_TRUE(o.apply("size", "8").ok());
  EXPECT_EQ(o.rank, 3);
  EXPECT_EQ(o.size, 8);
  ASSERT_TRUE(o.apply("WEFT_TRANSPORT", "TCP").ok());
  EXPECT_EQ(o.transport, TransportKind::tcp);
  ASSERT_TRUE(o.apply("WEFT_TRANSPORT", "shm").ok());
  EXPECT_EQ(o.transport, TransportKind::shm);
  ASSERT_TRUE(o.apply("shm_ring_bytes", "256K").ok());
  EXPECT_EQ(o.shm_ring_bytes, size_t{256} << 10);
  ASSERT_TRUE(o.apply("WEFT_SHM_CMA_THRESHOLD", "0").ok());
  EXPECT_EQ(o.shm_cma_threshold, size_t{0});
  ASSERT_TRUE(o.apply("shm_cma_threshold", "1M").ok());
  EXPECT_EQ(o.shm_cma_threshold, size_t{1} << 20);
  ASSERT_TRUE(o.apply("WEFT_TRANSPORT", "TCP").ok());
  ASSERT_TRUE(o.apply("WEFT_IFACE", " eth0 ").ok());
  EXPECT_EQ(o.interface, "eth0");
  ASSERT_TRUE(o.apply("host_id", "node-7").ok());
  EXPECT_EQ(o.host_id, "node-7");
  ASSERT_TRUE(o.apply("WEFT_LOG_LEVEL", "Debug").ok());
  EXPECT_EQ(o.log_level, "debug");
  ASSERT_TRUE(o.apply("WEFT_SOCKETS_PER_PEER", "4").ok());
  ASSERT_TRUE(o.apply("reactor_threads", "2").ok());
  EXPECT_EQ(o.sockets_per_peer, 4);
  EXPECT_EQ(o.reactor_threads, 2);
  ASSERT_TRUE(o.apply("WEFT_ALGO_ALLREDUCE", "ring").ok());
  ASSERT_TRUE(o.apply("algorithms.reduce_scatter", "halving_doubling").ok());
  EXPECT_EQ(o.algorithm(OpKind::allreduce), Algorithm::ring);
  EXPECT_EQ(o.algorithm(OpKind::reduce_scatter), Algorithm::halving_doubling);
}

TEST(OptionsApply, ParsesSizes) {
  const std::pair<const char*, size_t> good[] = {
      {"4096", 4096},          {"8K", 8192},        {"8k", 8192},
      {"8KiB", 8192},          {"3M", 3u << 20},    {"3MiB", 3u << 20},
      {"2G", size_t{2} << 30}, {"1 GiB", 1u << 30}, {" 65536 ", 65536}};
  for (const auto& [text, bytes] : good) {
    Options o;
    ASSERT_TRUE(o.apply("WEFT_EAGER_CREDIT_BYTES", text).ok()) << text;
    EXPECT_EQ(o.eager_credit_bytes, bytes) << text;
  }
  for (const char* bad : {"", "abc", "1.5M", "-4K", "12Q", "4KB", "99999999999999999999"}) {
    Options o;
    Status s = o.apply("WEFT_CHUNK_BYTES", bad);
    EXPECT_EQ(s.code(), ErrorCode::invalid_argument) << bad;
    EXPECT_NE(s.message().find("WEFT_CHUNK_BYTES="), std::string::npos) << s.message();
  }
}

TEST(OptionsApply, ParsesDurations) {
  const std::pair<const char*, milliseconds> good[] = {
      {"30s", milliseconds(30000)}, {"500ms", milliseconds(500)}, {"2m", milliseconds(120000)},
      {"5", milliseconds(5000)},    {"1.5s", milliseconds(1500)}, {"1h", milliseconds(3600000)},
      {"0.25", milliseconds(250)}};
  for (const auto& [text, d] : good) {
    Options o;
    ASSERT_TRUE(o.apply("WEFT_TIMEOUT", text).ok()) << text;
    EXPECT_EQ(o.timeout, d) << text;
    ASSERT_TRUE(o.apply("connect_timeout", text).ok()) << text;
    EXPECT_EQ(o.connect_timeout, d) << text;
    ASSERT_TRUE(o.apply("WEFT_PEER_TIMEOUT", text).ok()) << text;
    EXPECT_EQ(o.peer_timeout, d) << text;
  }
  for (const char* bad : {"", "s", "5x", "-1s", "inf", "ten seconds"}) {
    Options o;
    EXPECT_FALSE(o.apply("WEFT_TIMEOUT", bad).ok()) << bad;
  }
  // Longer than a year means "practically never": clamped, never wrapped (9300000000 s is
  // beyond 2^63 ns and once became a 1 ms timeout).
  for (const char* huge : {"9300000000", "9300000000000s", "1e300h", "8761h"}) {
    Options o;
    ASSERT_TRUE(o.apply("WEFT_CONNECT_TIMEOUT", huge).ok()) << huge;
    EXPECT_EQ(o.connect_timeout, std::chrono::hours(24 * 365)) << huge;
    EXPECT_TRUE(o.validate().ok()) << huge;
  }
}

TEST(OptionsApply, RejectsBadValuesAndUnknownKeysWithSuggestions) {
  Options o;
  EXPECT_FALSE(o.apply("WEFT_TRANSPORT", "udp").ok());
  EXPECT_FALSE(o.apply("WEFT_LOG_LEVEL", "loud").ok());
  EXPECT_FALSE(o.apply("WEFT_RANK", "two").ok());
  EXPECT_FALSE(o.apply("WEFT_ALGO_ALLREDUCE", "fastest").ok());
  Status s = o.apply("WEFT_ALGO_BROADCAST", "pairwise");
  EXPECT_EQ(s.message(),
            "WEFT_ALGO_BROADCAST=pairwise: pairwise does not implement broadcast (choose one of: "
            "ring, binomial, direct, hierarchical, shm_direct)");
  s = o.apply("WEFT_CHUNK_BYTE", "1M");
  EXPECT_EQ(s.code(), ErrorCode::not_found);
  EXPECT_NE(s.message().find("did you mean WEFT_CHUNK_BYTES?"), std::string::npos) << s.message();
  s = o.apply("chunk_byts", "1M");
  EXPECT_NE(s.message().find("did you mean chunk_bytes?"), std::string::npos) << s.message();
  s = o.apply("WEFT_ALGO_SEND", "direct");  // send/recv take no algorithm
  EXPECT_EQ(s.code(), ErrorCode::not_found);
  EXPECT_EQ(o.describe(), Options().describe());  // failed applies changed nothing
}

TEST(OptionsJson, AppliesADocument) {
  Options o;
  ASSERT_TRUE(o.apply_json(R"({"transport": "tcp", "chunk_bytes": 1048576, "timeout": 2.5,
                              "interface": "eth1", "algorithms": {"barrier": "dissemination"}})")
                  .ok());
  EXPECT_EQ(o.transport, TransportKind::tcp);
  EXPECT_EQ(o.chunk_bytes, size_t{1} << 20);
  EXPECT_EQ(o.timeout, milliseconds(2500));
  EXPECT_EQ(o.interface, "eth1");
  EXPECT_EQ(o.algorithm(OpKind::barrier), Algorithm::dissemination);
}

TEST(OptionsValidate, MetricsAddrNeedsMetrics) {
  Options o;
  o.metrics_addr = "127.0.0.1:0";
  EXPECT_TRUE(o.validate().ok());
  o.metrics = false;
  EXPECT_NE(o.validate().message().find("metrics=off"), std::string::npos);
  o.metrics = true;
  o.metrics_addr = ":9100";
  EXPECT_NE(o.validate().message().find("expected HOST:PORT"), std::string::npos);
}

TEST(OptionsJson, ReportsErrorsAndChangesNothing) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"chunk_bytes": )", "bad JSON"},
      {R"([1, 2])", "JSON object"},
      {R"({"chunk_bytes": "1M", "sockets": 4})", "did you mean sockets_per_peer?"},
      {R"({"chunk_bytes": [1]})", "key \"chunk_bytes\": expects a string, a number or a boolean"},
      {R"({"chunk_bytes": true})", "chunk_bytes=true"},
      {R"({"metrics": "maybe"})", "not a switch"},
      {R"({"metrics_addr": "localhost"})", "expected HOST:PORT"},
      {R"({"metrics_addr": "127.0.0.1:70000"})", "expected HOST:PORT"},
      {R"({"timeout": "soon"})", "timeout=soon"},
      {R"({"algorithms": "ring"})", "expects an object"},
      {R"({"algorithms": {"allreduc": "ring"}})", "did you mean algorithms.allreduce?"},
      {R"({"algorithms": {"gather": "ring"}})", "ring does not implement gather"},
  };
  for (const auto& [json, expected] : cases) {
    Options o;
    Status s = o.apply_json(json);
    EXPECT_FALSE(s.ok()) << json;
    EXPECT_NE(s.message().find(expected), std::string::npos) << json << " -> " << s.message();
    EXPECT_EQ(o.describe(), Options().describe()) << json;
  }
}

TEST(OptionsValidate, AcceptsDefaultsAndRejectsEachBadValue) {
  EXPECT_TRUE(Options().validate().ok());
  const std::pair<void (*)(Options&), const char*> cases[] = {
      {[](Options& o) { o.rank = 4, o.size = 4; }, "rank=4: must be below size=4"},
      {[](Options& o) { o.size = 0; }, "size=0"},
      {[](Options& o) { o.rank = -2; }, "rank=-2"},
      {[](Options& o) { o.chunk_bytes = 4095; }, "chunk_bytes=4095"},
      {[](Options& o) { o.chunk_bytes = size_t{16} << 30; }, "chunk_bytes=16GiB"},
      {[](Options& o) { o.eager_credit_bytes = size_t{2} << 30; }, "eager_credit_bytes=2GiB"},
      {[](Options& o) { o.timeout = std::chrono::hours(24 * 366); }, "timeout=31622400000 ms"},
      {[](Options& o) { o.peer_timeout = milliseconds::max(); }, "peer_timeout="},
      {[](Options& o) { o.sockets_per_peer = 0; }, "sockets_per_peer=0"},
      {[](Options& o) { o.sockets_per_peer = 17; }, "sockets_per_peer=17"},
      {[](Options& o) { o.reactor_threads = 0; }, "reactor_threads=0"},
      {[](Options& o) { o.reactor_threads = 17; }, "reactor_threads=17"},
      {[](Options& o) { o.timeout = milliseconds(0); }, "timeout"},
      {[](Options& o) { o.connect_timeout = milliseconds(-1); }, "connect_timeout"},
      {[](Options& o) { o.peer_timeout = milliseconds(10); }, "peer_timeout"},
      {[](Options& o) { o.eager_threshold = o.eager_credit_bytes + 1; }, "eager_threshold="},
      {[](Options& o) { o.log_level = "chatty"; }, "log_level=chatty"},
      {[](Options& o) { o.shm_ring_bytes = 32 << 10; }, "shm_ring_bytes=32KiB"},
      {[](Options& o) { o.shm_ring_bytes = (1 << 20) + 100; }, "shm_ring_bytes=1048676"},
      {[](Options& o) { o.set_algorithm(OpKind::broadcast, Algorithm::pairwise); },
       "WEFT_ALGO_BROADCAST=pairwise: pairwise does not implement broadcast (choose one of: ring, "
       "binomial, direct, hierarchical, shm_direct)"},
      {[](Options& o) { o.set_algorithm(OpKind::send, Algorithm::direct); }, "WEFT_ALGO_SEND"},
  };
  for (const auto& [mutate, expected] : cases) {
    Options o;
    mutate(o);
    Status s = o.validate();
    EXPECT_EQ(s.code(), ErrorCode::invalid_argument) << expected;
    EXPECT_NE(s.message().find(expected), std::string::npos) << s.message();
  }
  Options ok;
  ok.rank = 3, ok.size = 4, ok.chunk_bytes = 4096, ok.sockets_per_peer = 16;
  EXPECT_TRUE(ok.validate().ok());
}

TEST(OptionsDescribe, OneLineWithEveryValueThatAppliesBack) {
  Options o;
  ASSERT_TRUE(o.apply_json(R"({"rank": 1, "size": 2, "chunk_bytes": "1M", "timeout": "500ms",
                              "host_id": "h1", "eager_threshold": 1000,
                              "algorithms": {"allreduce": "ring"}})")
                  .ok());
  const std::string line = o.describe();
  EXPECT_EQ(line.find('\n'), std::string::npos);
  for (const char* part :
       {"rank=1", "size=2", "transport=auto", "allreduce:ring", "broadcast:auto",
        "chunk_bytes=1MiB", "sockets_per_peer=2", "eager_threshold=1000", "eager_credit_bytes=4MiB",
        "reactor_threads=1", "interface=\"\"", "host_id=\"h1\"", "timeout=500ms",
        "connect_timeout=60s", "log_level=warn"}) {
    EXPECT_NE(line.find(part), std::string::npos) << part << " in " << line;
  }
  // Every key=value except algorithms= is valid input for apply().
  Options back;
  back.set_algorithm(OpKind::allreduce, Algorithm::ring);
  std::istringstream words(line);
  for (std::string word; words >> word;) {
    const size_t eq = word.find('=');
    std::string value = word.substr(eq + 1);
    if (value.size() >= 2 && value.front() == '"') value = value.substr(1, value.size() - 2);
    if (word.starts_with("algorithms=")) continue;
    ASSERT_TRUE(back.apply(word.substr(0, eq), value).ok()) << word;
  }
  EXPECT_EQ(back.describe(), line);
}

TEST(OptionsEnv, PrecedenceIsBaseThenFileThenVariables) {
  TempFile file(R"({"chunk_bytes": "1M", "timeout": "10s", "algorithms": {"allreduce": "ring"}})");
  Options base;
  base.chunk_bytes = 8192;
  base.sockets_per_peer = 3;
  base.timeout = milliseconds(1000);
  auto r = options_from_env_map({{"WEFT_CONFIG", file.path()},
                                 {"WEFT_TIMEOUT", "20s"},
                                 {"WEFT_STORE_ADDR", "10.0.0.1:29500"},
                                 {"WEFT_LOCAL_RANK", "0"},
                                 {"WEFT_LOCAL_SIZE", "1"},
                                 {"WEFT_HOST_STORE", "1"},
                                 {"WEFT_RANK", "0"},
                                 {"WEFT_SIZE", "2"},
                                 {"PATH", "/usr/bin"}},
                                base);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->sockets_per_peer, 3);           // from code
  EXPECT_EQ(r->chunk_bytes, size_t{1} << 20);  // file beats code
  EXPECT_EQ(r->timeout, milliseconds(20000));  // variable beats file
  EXPECT_EQ(r->algorithm(OpKind::allreduce), Algorithm::ring);
  EXPECT_EQ(r->rank, 0);
  EXPECT_EQ(r->size, 2);
}

TEST(OptionsEnv, ErrorsNameTheFileTheKeyAndTheVariable) {
  TempFile bad_json(R"({"chunk_bytes": 1M})");
  TempFile bad_key(R"({"chunk_bytes": "1M", "tmeout": "5s"})");
  TempFile bad_value(R"({"sockets_per_peer": "many"})");
  const std::pair<Env, std::string> cases[] = {
      {{{"WEFT_CONFIG", "/nonexistent/weft.json"}}, "WEFT_CONFIG=/nonexistent/weft.json: cannot"},
      {{{"WEFT_CONFIG", bad_json.path()}}, "WEFT_CONFIG=" + bad_json.path() + ": bad JSON"},
      {{{"WEFT_CONFIG", bad_key.path()}}, bad_key.path() + ": unknown key \"tmeout\""},
      {{{"WEFT_CONFIG", bad_value.path()}}, bad_value.path() + ": sockets_per_peer=many"},
      {{{"WEFT_CHUNK_BYTE", "1M"}}, "did you mean WEFT_CHUNK_BYTES?"},
      {{{"WEFT_STORE_ADR", "x:1"}}, "did you mean WEFT_STORE_ADDR?"},
      {{{"WEFT_ALGO_BROADCAST", "pairwise"}}, "pairwise does not implement broadcast"},
      {{{"WEFT_RANK", "5"}, {"WEFT_SIZE", "4"}}, "rank=5: must be below size=4"},
  };
  for (const auto& [env, expected] : cases) {
    auto r = options_from_env_map(env, Options());
    ASSERT_FALSE(r.ok()) << expected;
    EXPECT_NE(r.status().message().find(expected), std::string::npos) << r.status().message();
  }
}

TEST(OptionsEnv, FromEnvReadsTheProcessEnvironment) {
  ASSERT_EQ(setenv("WEFT_EAGER_THRESHOLD", "16K", 1), 0);
  auto r = Options::from_env();
  unsetenv("WEFT_EAGER_THRESHOLD");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->eager_threshold, size_t{16} << 10);
}

// ---- docs/configuration.md must describe exactly what apply() accepts -------------------------

std::string read_doc() {
  const auto path = std::filesystem::path(__FILE__).parent_path() / "../../docs/configuration.md";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct DocRow {
  std::string env, json, default_value, last;
};

// Table rows whose second cell is a WEFT_* variable; backticks removed, "(empty)" is "".
std::vector<DocRow> doc_rows(const std::string& doc) {
  std::vector<DocRow> rows;
  std::istringstream lines(doc);
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> cells;
    std::istringstream parts(line);
    for (std::string cell; std::getline(parts, cell, '|');) {
      cell.erase(std::remove(cell.begin(), cell.end(), '`'), cell.end());
      cell = std::regex_replace(cell, std::regex("^\\s+|\\s+$"), "");
      cells.push_back(cell);
    }
    if (cells.size() < 6 || !cells[2].starts_with("WEFT_")) continue;
    rows.push_back({cells[2], cells[3], cells[4] == "(empty)" ? "" : cells[4], cells[5]});
  }
  return rows;
}

TEST(OptionsDoc, EveryDocumentedVariableIsAcceptedWithItsDocumentedDefault) {
  const std::string doc = read_doc();
  ASSERT_FALSE(doc.empty()) << "docs/configuration.md not found";
  const auto rows = doc_rows(doc);
  std::set<std::string> documented;
  for (const DocRow& row : rows) {
    documented.insert(row.env);
    Options by_env, by_json;
    EXPECT_TRUE(by_env.apply(row.env, row.default_value).ok()) << row.env;
    EXPECT_TRUE(by_json.apply(row.json, row.default_value).ok()) << row.json;
    EXPECT_EQ(by_env.describe(), Options().describe())
        << row.env << ": default is not " << row.default_value;
    EXPECT_EQ(by_json.describe(), Options().describe()) << row.json;
  }
  for (const std::string& name : option_env_names()) {
    EXPECT_EQ(documented.count(name), 1u) << name << " is not documented";
  }
  // Any WEFT_* name anywhere in the page is an option or a launcher variable.
  const std::regex token("WEFT_[A-Z0-9_]*[A-Z0-9]");
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), token); it != std::sregex_iterator();
       ++it) {
    const std::string name = it->str();
    Options o;
    const bool accepted = o.apply(name, "auto").code() != ErrorCode::not_found;
    EXPECT_TRUE(accepted || is_launcher_variable(name)) << name;
  }
}

TEST(OptionsDoc, AlgorithmColumnListsExactlyTheSupportedAlgorithms) {
  for (const DocRow& row : doc_rows(read_doc())) {
    if (!row.env.starts_with("WEFT_ALGO_")) continue;
    const auto kind = parse_op_kind(row.json.substr(std::string("algorithms.").size()));
    ASSERT_TRUE(kind.has_value()) << row.json;
    std::string want;
    for (int i = 1; i < kAlgorithmCount; ++i) {
      const auto a = static_cast<Algorithm>(i);
      if (algorithm_supports(a, *kind))
        want += (want.empty() ? "" : ", ") + std::string(to_string(a));
    }
    EXPECT_EQ(row.last, want) << row.env;
  }
}

TEST(OptionsDoc, ExampleConfigFileIsValid) {
  const std::string doc = read_doc();
  const size_t start = doc.find("```json\n");
  ASSERT_NE(start, std::string::npos);
  const size_t end = doc.find("```", start + 8);
  TempFile file(doc.substr(start + 8, end - start - 8));
  auto r = options_from_env_map({{"WEFT_CONFIG", file.path()}}, Options());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->algorithm(OpKind::broadcast), Algorithm::binomial);
}

}  // namespace
}  // namespace weft
