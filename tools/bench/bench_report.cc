#include "tools/bench/bench_report.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace weft::bench {

namespace {

std::string redop_name(const BenchRow& row) {
  return uses_reduce_op(row.kind) ? to_string(row.params.op) : "none";
}

int root_of(const BenchRow& row) { return uses_root(row.kind) ? row.params.root : -1; }

std::string measurement_cells(const std::optional<Measurement>& m, bool time_only) {
  if (!m) return fmt::format(" {:>10} {:>8} {:>8} {:>6}", "-", "-", "-", "-");
  std::string wrong = m->wrong ? std::to_string(*m->wrong) : "N/A";
  if (time_only) return fmt::format(" {:>10.2f} {:>8} {:>8} {:>6}", m->time_us, "-", "-", wrong);
  return fmt::format(" {:>10.2f} {:>8.3f} {:>8.3f} {:>6}", m->time_us, m->algbw, m->busbw, wrong);
}

nlohmann::json measurement_json(const std::optional<Measurement>& m) {
  if (!m) return nullptr;
  nlohmann::json j = {{"time_us", m->time_us}, {"algbw_gbps", m->algbw}, {"busbw_gbps", m->busbw}};
  j["wrong"] = m->wrong ? nlohmann::json(*m->wrong) : nlohmann::json(nullptr);
  return j;
}

}  // namespace

void derive_bandwidth(Measurement& m, size_t bytes, double bus_factor) {
  m.algbw = m.time_us > 0 ? static_cast<double>(bytes) / (m.time_us * 1e3) : 0;  // B/us -> GB/s
  m.busbw = m.algbw * bus_factor;
}

std::string table_header(OpKind kind, const std::string& algorithm) {
  std::string h = fmt::format("#\n# {} (algorithm: {})\n", to_string(kind), algorithm);
  h += fmt::format("# {:>13} {:>12} {:>6} {:>6} {:>5} {:^35} {:^35}\n", "", "", "", "", "",
                   "out-of-place", "in-place");
  h += fmt::format(
      "# {:>13} {:>12} {:>6} {:>6} {:>5} {:>10} {:>8} {:>8} {:>6} {:>10} {:>8} {:>8} {:>6}\n",
      "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
      "busbw", "#wrong");
  h += fmt::format(
      "# {:>13} {:>12} {:>6} {:>6} {:>5} {:>10} {:>8} {:>8} {:>6} {:>10} {:>8} {:>8} {:>6}\n",
      "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
      "");
  return h;
}

std::string table_row(const BenchRow& row) {
  bool barrier = row.kind == OpKind::barrier;
  return fmt::format("  {:>13} {:>12} {:>6} {:>6} {:>5}", row.shape.bytes, row.shape.total_count,
                     barrier ? "none" : to_string(row.params.dtype), redop_name(row),
                     root_of(row)) +
         measurement_cells(row.out_of_place, barrier) + measurement_cells(row.in_place, barrier) +
         "\n";
}

std::string table_footer(const std::vector<BenchRow>& rows) {
  double sum = 0;
  int n = 0;
  bool checked = false;
  size_t wrong = 0;
  for (const auto& row : rows) {
    for (const auto* m : {&row.out_of_place, &row.in_place}) {
      if (!*m) continue;
      sum += (*m)->busbw;
      ++n;
      if ((*m)->wrong) {
        checked = true;
        wrong += *(*m)->wrong;
      }
    }
  }
  std::string f;
  if (checked)
    f += fmt::format("# Wrong elements       : {} {}\n", wrong, wrong == 0 ? "OK" : "FAILED");
  f += fmt::format("# Avg bus bandwidth    : {:.4f}\n", n > 0 ? sum / n : 0.0);
  return f;
}

std::string rows_json(const std::vector<BenchRow>& rows, int world_size,
                      const std::string& options) {
  nlohmann::json out = {{"world_size", world_size}, {"options", options}};
  nlohmann::json list = nlohmann::json::array();
  for (const auto& row : rows) {
    list.push_back({{"collective", to_string(row.kind)},
                    {"size_bytes", row.shape.bytes},
                    {"count", row.shape.total_count},
                    {"type", row.kind == OpKind::barrier ? "none" : to_string(row.params.dtype)},
                    {"redop", redop_name(row)},
                    {"root", root_of(row)},
                    {"async", row.params.async},
                    {"out_of_place", measurement_json(row.out_of_place)},
                    {"in_place", measurement_json(row.in_place)}});
  }
  out["rows"] = std::move(list);
  return out.dump(2) + "\n";
}

}  // namespace weft::bench
