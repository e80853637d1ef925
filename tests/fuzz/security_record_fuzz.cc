// libFuzzer target: the record layer, with valid keys so the fuzzer reaches past
// authentication. The input is a program for a sender, a wire and a receiver; the first byte
// picks the suite, the mode and a small rekey interval (so rekeys happen often). Then each
// operation byte (the rest of the input feeds payloads and parameters):
//   0 seal a record of the next 2 bytes' length (mod 4097), the payload cut from the input
//   1 deliver the next record        2 deliver it with a flipped bit      3 replay the last one
//   4 deliver the one after next (reorder)   5 drop one, deliver the next  6 cut the next short
//   7 deliver input bytes as a record
// The oracle: until the first bad record the receiver opens every genuine record in order, in
// place, with the sent payload; every bad record fails with its body zeroed, and after it the
// receiver refuses everything. Any deviation aborts.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <vector>

#include "security/record.h"

namespace {

using namespace weft::security;

void require(bool ok) {
  if (!ok) std::abort();
}

struct Sealed {
  std::vector<uint8_t> payload;
  std::vector<uint8_t> record;
};

class Input {
 public:
  Input(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  bool empty() const { return n_ == 0; }
  uint8_t byte() {
    if (n_ == 0) return 0;
    --n_;
    return *d_++;
  }
  size_t u16() { return byte() | size_t{byte()} << 8; }
  std::vector<uint8_t> take(size_t n) {
    if (n > n_) n = n_;
    std::vector<uint8_t> out(d_, d_ + n);
    d_ += n;
    n_ -= n;
    return out;
  }

 private:
  const uint8_t* d_;
  size_t n_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  Input in(data, size);
  const uint8_t setup = in.byte();
  const CipherSuite suite = (setup & 1) ? CipherSuite::aesgcm : CipherSuite::chachapoly;
  const SecurityMode mode = (setup & 2) ? SecurityMode::auth : SecurityMode::encrypt;
  RecordLimits limits;
  limits.max_record = 4096;
  limits.rekey_interval = 1 + ((setup >> 2) & 3);
  Key key;
  for (size_t i = 0; i < kKeyBytes; ++i) key.data()[i] = static_cast<uint8_t>(i * 11 + setup);
  auto sealer = RecordSealer::create(suite, mode, key, limits, "sender").value();
  auto opener = RecordOpener::create(suite, mode, key, limits, "sender").value();

  std::deque<Sealed> wire;
  std::vector<uint8_t> last_delivered;
  bool broken = false;

  // Delivers `record`; `genuine` says whether it is the next record the sender sealed.
  auto deliver = [&](std::vector<uint8_t> record, const std::vector<uint8_t>* payload) {
    const bool contiguous = record.size() % 2 == 0;  // exercise both forms of open()
    bool ok = false;
    std::span<uint8_t> body;
    if (contiguous) {
      auto r = opener.open(record);
      ok = r.ok();
      if (ok) body = r.value();
    } else if (record.size() >= kRecordOverhead) {
      auto header = std::span<const uint8_t, kRecordHeaderBytes>(record.data(), kRecordHeaderBytes);
      auto n = opener.body_size(header);
      if (n.ok() && n.value() == record.size() - kRecordOverhead) {
        body = std::span<uint8_t>(record.data() + kRecordHeaderBytes, n.value());
        ok = opener.open(header, body, std::span<const uint8_t, kTagBytes>(
                                           record.data() + record.size() - kTagBytes, kTagBytes))
                 .ok();
      } else if (n.ok()) {
        auto b = std::span<uint8_t>(record.data() + kRecordHeaderBytes,
                                    record.size() - kRecordOverhead);
        ok = opener.open(header, b, std::span<const uint8_t, kTagBytes>(
                                        record.data() + record.size() - kTagBytes, kTagBytes))
                 .ok();
        require(!ok);
      }  // else: the header was refused, which closes the opener too
    } else {
      ok = opener.open(record).ok();
    }
    const bool should = !broken && payload != nullptr;
    require(ok == should);
    if (ok) {
      require(std::equal(body.begin(), body.end(), payload->begin(), payload->end()));
    } else {
      broken = true;
    }
  };

  while (!in.empty()) {
    const uint8_t op = in.byte() & 7;
    switch (op) {
      case 0: {
        Sealed s;
        s.payload = in.take(in.u16() % (limits.max_record + 1));
        const auto before = s.payload;
        s.record.resize(sealed_size(s.payload.size()));
        require(sealer.seal(s.payload, s.record).ok());
        require(s.payload == before);
        wire.push_back(std::move(s));
        break;
      }
      case 1:
        if (!wire.empty()) {
          last_delivered = wire.front().record;
          deliver(wire.front().record, &wire.front().payload);
          wire.pop_front();
        }
        break;
      case 2:
        if (!wire.empty()) {
          auto r = wire.front().record;
          const size_t at = in.u16() % r.size();
          r[at] ^= static_cast<uint8_t>(1u << (in.byte() & 7));
          deliver(r, nullptr);
          wire.pop_front();
        }
        break;
      case 3:
        if (!last_delivered.empty()) deliver(last_delivered, nullptr);
        break;
      case 4:
        if (wire.size() >= 2) {
          deliver(wire[1].record, nullptr);
          wire.erase(wire.begin() + 1);
        }
        break;
      case 5:
        if (wire.size() >= 2) {
          wire.pop_front();
          deliver(wire.front().record, nullptr);
          wire.pop_front();
        }
        break;
      case 6:
        if (!wire.empty()) {
          auto r = wire.front().record;
          r.resize(r.size() - 1 - in.byte() % r.size());
          deliver(r, nullptr);
          wire.pop_front();
        }
        break;
      default: {
        auto raw = in.take(in.u16() % 64);
        const bool is_next = !wire.empty() && raw == wire.front().record;
        if (is_next) {
          deliver(raw, &wire.front().payload);
          wire.pop_front();
        } else {
          deliver(raw, nullptr);
        }
        break;
      }
    }
  }
  return 0;
}
