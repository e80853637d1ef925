// sparse_allreduce through the public API over TCP and shared memory: every dtype, row widths,
// world sizes 1-4, both algorithms and the automatic choice on each side of the crossover,
// repeated indices within a rank, ranks with no rows, all ranks on the same rows; results equal a
// reference and are identical bit for bit on every rank. Then bad arguments, ranks that disagree
// about the table, and a peer that sends indices it should not (below the Communicator).
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>

#include "collective/collective.h"
#include "multirank/comm_harness.h"
#include "multirank/data.h"
#include "multirank/harness.h"

namespace weft::testing {
namespace {

using harness::all_dtypes;
using harness::compare;
using harness::make_buffer;
using harness::representable;

// One rank's contribution: `rows` indices (repeats and any order) and their values.
struct Contribution {
  std::vector<int64_t> indices;
  std::vector<std::byte> values;
};

// The shapes the sweep runs, each with its own rows per rank.
enum class Pattern {
  scattered,   // a few rows per rank, some repeated within the rank, some shared across ranks
  same_rows,   // every rank holds the same rows
  some_empty,  // rank 1 (and the last, with 4 ranks) holds nothing
  dense,       // most of the table on every rank: above the crossover with 3 ranks or more
};

std::vector<int64_t> rows_of(Pattern p, int rank, int n, size_t num_rows) {
  std::vector<int64_t> idx;
  switch (p) {
    case Pattern::scattered:
      for (size_t i = 0; i < 5; ++i) idx.push_back(static_cast<int64_t>((rank * 7 + i * 13) % num_rows));
      idx.push_back(idx[1]);  // repeated within the rank
      idx.push_back(idx[0]);
      break;
    case Pattern::same_rows:
      idx = {9, 2, 30, 2};
      break;
    case Pattern::some_empty:
      if (rank != 1 && !(n == 4 && rank == 3)) idx = {static_cast<int64_t>(rank + 1), 40, 3, 40};
      break;
    case Pattern::dense:
      for (size_t i = 0; i < num_rows; ++i) {
        if ((i + static_cast<size_t>(rank)) % 4 != 0) idx.push_back(static_cast<int64_t>(num_rows - 1 - i));
      }
      idx.push_back(idx.front());
      break;
  }
  return idx;
}

// Small integers: every sum is exact in every dtype (int8 included: at most 4 ranks x 3 copies x 9).
double value(int rank, int64_t row, size_t pos, size_t col) {
  return static_cast<double>((static_cast<size_t>(rank) * 3 + static_cast<size_t>(row) + pos + col) % 10);
}

Contribution contribution(Pattern p, int rank, int n, size_t num_rows, size_t width, DataType t) {
  Contribution c;
  c.indices = rows_of(p, rank, n, num_rows);
  c.values = make_buffer(t, c.indices.size() * width, [&](size_t i) {
    return value(rank, c.indices[i / width], i / width, i % width);
  });
  return c;
}

// The expected rows: table row -> sum over ranks and repeats, in doubles.
std::map<int64_t, std::vector<double>> reference(Pattern p, int n, size_t num_rows, size_t width) {
  std::map<int64_t, std::vector<double>> sum;
  for (int r = 0; r < n; ++r) {
    const auto idx = rows_of(p, r, n, num_rows);
    for (size_t i = 0; i < idx.size(); ++i) {
      auto& row = sum[idx[i]];
      row.resize(width, 0.0);
      for (size_t c = 0; c < width; ++c) row[c] += value(r, idx[i], i, c);
    }
  }
  return sum;
}

std::string check(const SparseRows& got, const std::map<int64_t, std::vector<double>>& want,
                  size_t width, DataType t) {
  if (got.nnz != want.size()) return fmt::format("{} rows, want {}", got.nnz, want.size());
  std::vector<double> flat;
  size_t i = 0;
  for (const auto& [row, vals] : want) {
    if (got.indices[i] != row) return fmt::format("row {} is {}, want {}", i, got.indices[i], row);
    for (double v : vals) flat.push_back(representable(t, v));
    ++i;
  }
  return compare(t, got.values.get(), got.nnz * width, [&](size_t k) { return flat[k]; });
}

// Every rank's result, to compare them bit for bit.
class Results {
 public:
  explicit Results(int n) : rows_(static_cast<size_t>(n)) {}
  void put(int rank, SparseRows r) {
    std::lock_guard<std::mutex> lock(mu_);
    rows_[static_cast<size_t>(rank)] = std::move(r);
  }
  const SparseRows& of(int rank) const { return rows_[static_cast<size_t>(rank)]; }
  std::string identical(size_t row_bytes) const {
    const SparseRows& a = rows_[0];
    for (size_t r = 1; r < rows_.size(); ++r) {
      const SparseRows& b = rows_[r];
      if (b.nnz != a.nnz ||
          (a.nnz > 0 && (std::memcmp(a.indices.get(), b.indices.get(), a.nnz * 8) != 0 ||
                         std::memcmp(a.values.get(), b.values.get(), a.nnz * row_bytes) != 0))) {
        return fmt::format("rank {}'s result differs from rank 0's", r);
      }
    }
    return "";
  }

 private:
  std::mutex mu_;
  std::vector<SparseRows> rows_;
};

struct SparseCase {
  TransportKind transport;
  Algorithm algorithm;  // automatic, gather_merge or dense
};

class SparseAllreduceSweep : public ::testing::TestWithParam<SparseCase> {};

TEST_P(SparseAllreduceSweep, EveryDtypeWidthAndPattern) {
  const SparseCase sc = GetParam();
  constexpr size_t kRows = 64;
  for (int n : {1, 2, 3, 4}) {
    Options o = test_options();
    o.transport = sc.transport;
    o.set_algorithm(OpKind::sparse_allreduce, sc.algorithm);
    std::vector<std::string> failures;
    std::mutex mu;
    auto fail = [&](std::string s) {
      std::lock_guard<std::mutex> lock(mu);
      failures.push_back(std::move(s));
    };
    // Every combination runs on one communicator per world size: call order is the same on
    // every rank.
    std::vector<std::tuple<Pattern, size_t, DataType>> cases;
    for (Pattern p : {Pattern::scattered, Pattern::same_rows, Pattern::some_empty, Pattern::dense}) {
      for (size_t width : {size_t{1}, size_t{3}, size_t{64}}) {
        for (DataType t : all_dtypes()) cases.emplace_back(p, width, t);
      }
    }
    std::deque<Results> results;
    for (size_t i = 0; i < cases.size(); ++i) results.emplace_back(n);
    run_comm_ranks(n, o, [&](Communicator& c) {
      for (size_t k = 0; k < cases.size(); ++k) {
        const auto [p, width, t] = cases[k];
        const Contribution in = contribution(p, c.rank(), n, kRows, width, t);
        SparseRows out;
        const Status st = c.sparse_allreduce(in.indices.data(), in.values.data(), in.indices.size(),
                                             kRows, width, t, ReduceOp::sum, &out);
        const std::string what = fmt::format("n {} rank {} pattern {} width {} {}", n, c.rank(),
                                             static_cast<int>(p), width, to_string(t));
        if (!st.ok()) return fail(what + ": " + st.to_string());
        const std::string diff = check(out, reference(p, n, kRows, width), width, t);
        if (!diff.empty()) fail(what + ": " + diff);
        results[k].put(c.rank(), std::move(out));
      }
    });
    for (size_t k = 0; k < cases.size(); ++k) {
      const std::string diff = results[k].identical(std::get<1>(cases[k]) * dtype_size(std::get<2>(cases[k])));
      if (!diff.empty()) failures.push_back(fmt::format("n {} case {}: {}", n, k, diff));
    }
    for (const auto& f : failures) ADD_FAILURE() << f;
    if (!failures.empty()) return;
  }
}

std::string case_name(const ::testing::TestParamInfo<SparseCase>& info) {
  return std::string(to_string(info.param.transport)) + "_" + to_string(info.param.algorithm);
}

INSTANTIATE_TEST_SUITE_P(
    SparseAllreduce, SparseAllreduceSweep,
    ::testing::Values(SparseCase{TransportKind::tcp, Algorithm::automatic},
                      SparseCase{TransportKind::tcp, Algorithm::gather_merge},
                      SparseCase{TransportKind::tcp, Algorithm::dense},
                      SparseCase{TransportKind::shm, Algorithm::automatic},
                      SparseCase{TransportKind::shm, Algorithm::gather_merge},
                      SparseCase{TransportKind::shm, Algorithm::dense}),
    case_name);

// Rounded sums (random floats, rows repeated across ranks and within them) come out bit for bit
// the same on every rank, with both algorithms; gather_merge's equal a reference summed in its
// order: each rank's repeats in input order, then the ranks in rank order.
TEST(SparseAllreduce, RoundedSumsAreIdenticalOnEveryRank) {
  constexpr size_t kRows = 1000, kWidth = 8;
  constexpr int kRanks = 3;
  auto input = [](int rank) {
    std::mt19937 gen(static_cast<unsigned>(rank + 1));
    std::uniform_int_distribution<int64_t> row(0, 99);
    std::uniform_real_distribution<float> v(-1.0f, 1.0f);
    std::pair<std::vector<int64_t>, std::vector<float>> in;
    for (int i = 0; i < 300; ++i) {
      in.first.push_back(row(gen));
      for (size_t c = 0; c < kWidth; ++c) in.second.push_back(v(gen) * 1e3f);
    }
    return in;
  };
  // The reference of gather_merge's order.
  std::map<int64_t, std::vector<float>> want;
  for (int r = 0; r < kRanks; ++r) {
    std::map<int64_t, std::vector<float>> local;
    const auto in = input(r);
    for (size_t i = 0; i < in.first.size(); ++i) {
      auto [it, fresh] = local.try_emplace(in.first[i], kWidth, 0.0f);
      for (size_t c = 0; c < kWidth; ++c) {
        const float x = in.second[i * kWidth + c];
        it->second[c] = fresh ? x : it->second[c] + x;
      }
    }
    for (const auto& [row, vals] : local) {
      auto [it, fresh] = want.try_emplace(row, vals);
      if (!fresh) {
        for (size_t c = 0; c < kWidth; ++c) it->second[c] += vals[c];
      }
    }
  }
  for (Algorithm a : {Algorithm::gather_merge, Algorithm::dense}) {
    Options o = test_options();
    o.transport = TransportKind::shm;
    o.set_algorithm(OpKind::sparse_allreduce, a);
    Results results(kRanks);
    run_comm_ranks(kRanks, o, [&](Communicator& c) {
      const auto in = input(c.rank());
      SparseRows out;
      ASSERT_TRUE(c.sparse_allreduce(in.first.data(), in.second.data(), in.first.size(), kRows,
                                     kWidth, DataType::fp32, ReduceOp::sum, &out)
                      .ok());
      results.put(c.rank(), std::move(out));
    });
    EXPECT_EQ(results.identical(kWidth * 4), "") << to_string(a);
    if (a != Algorithm::gather_merge) continue;
    const SparseRows& out = results.of(0);
    ASSERT_EQ(out.nnz, want.size());
    size_t i = 0;
    for (const auto& [row, vals] : want) {
      EXPECT_EQ(out.indices[i], row);
      EXPECT_EQ(std::memcmp(out.values.get() + i * kWidth * 4, vals.data(), kWidth * 4), 0)
          << "row " << row;
      ++i;
    }
  }
}

// The automatic choice switches at the crossover, both ways, and forcing wins.
TEST(SparseAllreduce, DensityChoosesTheAlgorithm) {
  Options o;
  for (int n : {3, 4, 8}) {
    EXPECT_EQ(sparse_algorithm(0, 1000, n, o), Algorithm::gather_merge);
    EXPECT_EQ(sparse_algorithm(1499, 1000, n, o), Algorithm::gather_merge);
    EXPECT_EQ(sparse_algorithm(1500, 1000, n, o), Algorithm::dense);
    EXPECT_EQ(sparse_algorithm(4000, 1000, n, o), Algorithm::dense);
    EXPECT_EQ(sparse_algorithm(UINT64_MAX, size_t{1} << 62, n, o), Algorithm::dense);
    EXPECT_EQ(sparse_algorithm(0, 0, n, o), Algorithm::gather_merge);
  }
  // Two ranks: gather_merge was never slower, up to both ranks holding every row.
  EXPECT_EQ(sparse_algorithm(2000, 1000, 2, o), Algorithm::gather_merge);
  EXPECT_EQ(sparse_algorithm(1000, 1000, 1, o), Algorithm::gather_merge);
  o.set_algorithm(OpKind::sparse_allreduce, Algorithm::dense);
  EXPECT_EQ(sparse_algorithm(1, 1000, 2, o), Algorithm::dense);
  o.set_algorithm(OpKind::sparse_allreduce, Algorithm::gather_merge);
  EXPECT_EQ(sparse_algorithm(4000, 1000, 4, o), Algorithm::gather_merge);
}

TEST(SparseAllreduce, AsyncFormAndOnlyAlgorithmsOfItsOwn) {
  Options o = test_options();
  EXPECT_FALSE(Options(o).apply("WEFT_ALGO_SPARSE_ALLREDUCE", "ring").ok());
  EXPECT_TRUE(Options(o).apply("WEFT_ALGO_SPARSE_ALLREDUCE", "dense").ok());
  EXPECT_FALSE(Options(o).apply("WEFT_ALGO_ALLREDUCE", "gather_merge").ok());
  run_comm_ranks(2, o, [&](Communicator& c) {
    const int64_t idx[2] = {3, c.rank()};
    const double val[2] = {1.5, 2.0};
    SparseRows out;
    WorkPtr w = c.sparse_allreduce_async(idx, val, 2, 10, 1, DataType::fp64, ReduceOp::sum, &out);
    ASSERT_TRUE(w->wait().ok());
    ASSERT_EQ(out.nnz, 3u);
    EXPECT_EQ(out.indices[0], 0);
    EXPECT_EQ(out.indices[1], 1);
    EXPECT_EQ(out.indices[2], 3);
    const auto* v = reinterpret_cast<const double*>(out.values.get());
    EXPECT_EQ(v[0], 2.0);
    EXPECT_EQ(v[1], 2.0);
    EXPECT_EQ(v[2], 3.0);
  });
}

TEST(SparseAllreduce, BadArgumentsFailBeforeAnythingIsSent) {
  Options o = test_options();
  run_comm_ranks(1, o, [&](Communicator& c) {
    const int64_t idx[2] = {3, 10};
    const float val[2] = {1, 2};
    SparseRows out;
    Status st = c.sparse_allreduce(idx, val, 2, 10, 1, DataType::fp32, ReduceOp::sum, &out);
    EXPECT_EQ(st.code(), ErrorCode::invalid_argument);
    EXPECT_NE(st.message().find("indices[1] = 10 is outside the table's 10 rows"),
              std::string::npos)
        << st.message();
    st = c.sparse_allreduce(idx, val, 1, 10, 1, DataType::fp32, ReduceOp::max, &out);
    EXPECT_EQ(st.code(), ErrorCode::invalid_argument);
    EXPECT_NE(st.message().find("only sum is supported, not max"), std::string::npos);
    const int64_t negative = -1;
    st = c.sparse_allreduce(&negative, val, 1, 10, 1, DataType::fp32, ReduceOp::sum, &out);
    EXPECT_EQ(st.code(), ErrorCode::invalid_argument);
    st = c.sparse_allreduce(idx, val, 1, 10, 1, DataType::fp32, ReduceOp::sum, nullptr);
    EXPECT_EQ(st.code(), ErrorCode::invalid_argument);
    st = c.sparse_allreduce(idx, val, 1, size_t{1} << 62, 64, DataType::fp32, ReduceOp::sum, &out);
    EXPECT_EQ(st.code(), ErrorCode::invalid_argument);
    // Nothing was sent: the communicator still works.
    EXPECT_TRUE(c.sparse_allreduce(idx, val, 1, 10, 1, DataType::fp32, ReduceOp::sum, &out).ok());
    EXPECT_EQ(out.nnz, 1u);
  });
}

// 10 rows x 4 against 20 rows x 2: the same element count, so only the row counts tell.
TEST(SparseAllreduce, RanksThatDisagreeAboutTheTableFailWithMismatch) {
  Options o = test_options();
  o.timeout = std::chrono::seconds(30);
  run_comm_ranks(2, o, [&](Communicator& c) {
    const int64_t idx[1] = {1};
    const float val[4] = {1, 2, 3, 4};
    SparseRows out;
    const bool first = c.rank() == 0;
    const Status st = c.sparse_allreduce(idx, val, 1, first ? 10 : 20, first ? 4 : 2,
                                         DataType::fp32, ReduceOp::sum, &out);
    EXPECT_EQ(st.code(), ErrorCode::mismatch) << st.to_string();
    EXPECT_NE(st.message().find("passes a table of"), std::string::npos) << st.message();
  });
}

}  // namespace
}  // namespace weft::testing

namespace weft::harness {
namespace {

// Runs sparse_allreduce on two ranks below the Communicator, so that rank 1 can pass what
// validation would refuse; returns each rank's status and result.
struct HostileRun {
  std::vector<Status> status{2};
  std::vector<SparseRows> out{2};
};

HostileRun run_hostile(Algorithm algo, std::vector<int64_t> rank1_indices, size_t num_rows) {
  RankGroup g(transport_factory("local"), 2);
  Options options = harness_options();
  options.set_algorithm(OpKind::sparse_allreduce, algo);
  HostileRun h;
  g.run([&](int rank) {
    const std::vector<int64_t> idx = rank == 0 ? std::vector<int64_t>{2} : rank1_indices;
    CollectiveArgs a;
    a.kind = OpKind::sparse_allreduce;
    a.dtype = DataType::fp32;
    a.count = idx.size();
    a.indices = idx.data();
    a.num_rows = num_rows;
    a.row_width = 0;  // rows without values: rank 1's own dense table has nothing to write
    a.sparse_out = &h.out[static_cast<size_t>(rank)];
    h.status[static_cast<size_t>(rank)] = g.collective(rank, a, options);
  });
  return h;
}

TEST(SparseAllreduceHostilePeer, RowsOutsideTheTableAreRefused) {
  HostileRun h = run_hostile(Algorithm::gather_merge, {12, 1000}, 10);
  EXPECT_EQ(h.status[0].code(), ErrorCode::protocol) << h.status[0].to_string();
  EXPECT_NE(h.status[0].message().find("rank 1 sent row index 12 at position 0 of 2"),
            std::string::npos)
      << h.status[0].message();
}

TEST(SparseAllreduceHostilePeer, MoreRowsThanTheTableHoldsAreRefused) {
  std::vector<int64_t> idx(11);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
  HostileRun h = run_hostile(Algorithm::gather_merge, idx, 10);
  EXPECT_EQ(h.status[0].code(), ErrorCode::protocol) << h.status[0].to_string();
  EXPECT_NE(h.status[0].message().find("rank 1 announces 11 distinct rows of a table of 10"),
            std::string::npos)
      << h.status[0].message();
}

// In the dense bitmap a peer can set bits past the table's last row: they name no row.
TEST(SparseAllreduceHostilePeer, BitsPastTheTableAreIgnored) {
  HostileRun h = run_hostile(Algorithm::dense, {12}, 10);
  ASSERT_TRUE(h.status[0].ok()) << h.status[0].to_string();
  ASSERT_EQ(h.out[0].nnz, 1u);
  EXPECT_EQ(h.out[0].indices[0], 2);
}

}  // namespace
}  // namespace weft::harness
