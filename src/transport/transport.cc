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

}  // namespace weft
