// SecretBytes<N>: N bytes of key material that are wiped (OPENSSL_cleanse) when the object dies
// or is overwritten, so a key does not outlive its owner in freed memory. Copies are allowed
// (each copy wipes itself); moving is copying. Not thread-safe: one owner at a time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace weft::security {

// Wipes `n` bytes at `p` in a way the compiler may not elide (OPENSSL_cleanse).
void wipe(void* p, size_t n);

template <size_t N>
class SecretBytes {
 public:
  SecretBytes() { bytes_.fill(0); }
  explicit SecretBytes(std::span<const uint8_t, N> from) { assign(from); }
  SecretBytes(const SecretBytes& o) : bytes_(o.bytes_) {}
  SecretBytes& operator=(const SecretBytes& o) {
    bytes_ = o.bytes_;
    return *this;
  }
  ~SecretBytes() { wipe(bytes_.data(), N); }

  void assign(std::span<const uint8_t, N> from) {
    for (size_t i = 0; i < N; ++i) bytes_[i] = from[i];
  }
  void clear() { wipe(bytes_.data(), N); }

  uint8_t* data() { return bytes_.data(); }
  const uint8_t* data() const { return bytes_.data(); }
  static constexpr size_t size() { return N; }
  std::span<const uint8_t, N> span() const { return std::span<const uint8_t, N>(bytes_); }
  std::span<uint8_t, N> mutable_span() { return std::span<uint8_t, N>(bytes_); }

 private:
  std::array<uint8_t, N> bytes_;
};

}  // namespace weft::security
