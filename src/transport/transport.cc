#include "transport/transport.h"

#include <fmt/format.h>

namespace weft {

std::string Fingerprint::describe() const {
  if (kind == OpKind::send || kind == OpKind::recv) {
    return fmt::format("{} ({} bytes)", to_string(kind), count);
  }
  std::string s = fmt::format("{} #{} ({} x {}", to_string(kind), seq, to_string(dtype), count);
  switch (kind) {
    case OpKind::allreduce:
    case OpKind::reduce_scatter:
      s += fmt::format(", {}", to_string(op));
      break;
    case OpKind::reduce:
      s += fmt::format(", {}, root {}", to_string(op), root);
      break;
    case OpKind::broadcast:
    case OpKind::gather:
    case OpKind::scatter:
      s += fmt::format(", root {}", root);
      break;
    default:
      break;
  }
  return s + ")";
}

bool fingerprints_compatible(const Fingerprint& sender, const Fingerprint& receiver) {
  if (sender.kind == OpKind::send || receiver.kind == OpKind::recv) {
    return sender.kind == OpKind::send && receiver.kind == OpKind::recv &&
           sender.count == receiver.count;
  }
  // v-collectives legitimately differ in per-rank counts; their count field carries 0.
  return sender == receiver;
}

Status collective_mismatch(int rank, const Fingerprint& current, int peer, const Fingerprint& remote) {
  if (remote.seq == current.seq && !fingerprints_compatible(remote, current)) {
    return Status(ErrorCode::mismatch, fmt::format("rank {} called {} but rank {} called {}", rank,
                                                   current.describe(), peer, remote.describe()));
  }
  if (remote.seq < current.seq) {
    return Status(ErrorCode::mismatch,
                  fmt::format("rank {} sent a message of {} that rank {} (now in {}) never received: "
                              "the ranks called different collectives",
                              peer, remote.describe(), rank, current.describe()));
  }
  return Status();
}

Status receive_mismatch(int rank, const Request& r, int peer, uint64_t bytes,
                        const Fingerprint& remote) {
  if (!fingerprints_compatible(remote, r.fp) || bytes != r.bytes) {
    return Status(ErrorCode::mismatch,
                  fmt::format("rank {} posted {} expecting {} bytes from rank {}, which sent {} of "
                              "{} bytes",
                              rank, r.fp.describe(), r.bytes, peer, remote.describe(), bytes));
  }
  return Status();
}

}  // namespace weft
