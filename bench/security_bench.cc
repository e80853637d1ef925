// The security module's costs (docs/security.md, issue 21): raw OpenSSL AEAD speed on one core
// against the record layer's seal and open for 64 KiB .. 4 MiB records, the same records through
// a loopback TCP connection (sender and receiver threads), and handshake times: weft's Noise
// IKpsk2 against an OpenSSL TLS 1.3 handshake with mutual certificate authentication, both in
// memory. Prints one table per part; CPU-seconds per GB are CPU time (all threads) per 10^9
// payload bytes.
//
// Usage: weft_security_bench [MiB per measurement, default 512]
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/socket.h"
#include "security/noise.h"
#include "security/record.h"

namespace {

using namespace weft;
using namespace weft::security;

double now_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double process_cpu_s() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  return s(ru.ru_utime) + s(ru.ru_stime);
}

Key bench_key(uint8_t seed) {
  Key k;
  for (size_t i = 0; i < kKeyBytes; ++i) k.data()[i] = static_cast<uint8_t>(seed + i);
  return k;
}

struct Rate {
  double gbps;         // 10^9 bytes per second of CPU time on one core
  double cpu_s_per_gb;
};

// Runs `op` (one record of `size` bytes) until `total` bytes were processed; single thread.
template <typename Op>
Rate measure(size_t size, size_t total, Op op) {
  const size_t iters = std::max<size_t>(4, total / size);
  for (size_t i = 0; i < 2; ++i) op();  // warm up
  const double c0 = thread_cpu_s();
  for (size_t i = 0; i < iters; ++i) op();
  const double cpu = thread_cpu_s() - c0;
  const double gb = static_cast<double>(iters * size) / 1e9;
  return {gb / cpu, cpu / gb};
}

const char* suite_name(CipherSuite s) {
  return s == CipherSuite::aesgcm ? "AES-256-GCM" : "ChaCha20-Poly1305";
}

// Raw OpenSSL: one reused context, a new nonce per message, as fast as the EVP API goes.
struct RawAead {
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  bool enc;
  RawAead(CipherSuite s, bool encrypt) : enc(encrypt) {
    EVP_CIPHER* c = EVP_CIPHER_fetch(nullptr, s == CipherSuite::aesgcm ? "AES-256-GCM"
                                                                       : "ChaCha20-Poly1305",
                                     nullptr);
    Key k = bench_key(9);
    EVP_CipherInit_ex2(ctx, c, k.data(), nullptr, enc ? 1 : 0, nullptr);
    EVP_CIPHER_free(c);
  }
  ~RawAead() { EVP_CIPHER_CTX_free(ctx); }
  void run(uint64_t n, const uint8_t* in, uint8_t* out, size_t len, uint8_t* tag) {
    uint8_t iv[12] = {};
    std::memcpy(iv + 4, &n, 8);
    int l = 0;
    EVP_CipherInit_ex2(ctx, nullptr, nullptr, iv, enc ? 1 : 0, nullptr);
    EVP_CipherUpdate(ctx, out, &l, in, static_cast<int>(len));
    if (enc) {
      EVP_CipherFinal_ex(ctx, out + len, &l);
      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, 16, tag);
    } else {
      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, 16, tag);
      EVP_CipherFinal_ex(ctx, out + len, &l);  // fails (wrong tag): the work is done anyway
    }
  }
};

constexpr size_t kSizes[] = {size_t{64} << 10, size_t{256} << 10, size_t{1} << 20,
                             size_t{4} << 20};

struct Raw {
  double enc[2][4];
};

Raw in_memory(size_t total) {
  Raw raw{};
  std::printf("== in memory, one core: GB/s (CPU-seconds per GB)\n");
  std::printf("%-18s %8s %16s %16s %16s %16s %7s %7s %16s %16s\n", "cipher", "record",
              "raw encrypt", "raw decrypt", "seal", "open (in place)", "seal%", "open%",
              "auth seal", "auth open");
  for (int si = 0; si < 2; ++si) {
    const CipherSuite suite = si == 0 ? CipherSuite::chachapoly : CipherSuite::aesgcm;
    for (int zi = 0; zi < 4; ++zi) {
      const size_t size = kSizes[zi];
      std::vector<uint8_t> payload(size, 0x5a), out(sealed_size(size)), buf(size);
      uint8_t tag[16] = {};
      RawAead renc(suite, true), rdec(suite, false);
      uint64_t n = 0;
      const Rate re = measure(size, total, [&] { renc.run(n++, payload.data(), out.data(), size, tag); });
      renc.run(0, payload.data(), out.data(), size, tag);  // decrypt this one: the tag verifies
      const Rate rd = measure(size, total, [&] { rdec.run(0, out.data(), buf.data(), size, tag); });
      raw.enc[si][zi] = re.gbps;

      RecordLimits limits;
      Rate seal_rate{}, open_rate{}, aseal{}, aopen{};
      for (SecurityMode mode : {SecurityMode::encrypt, SecurityMode::auth}) {
        auto sealer = RecordSealer::create(suite, mode, bench_key(1), limits, "bench").value();
        const Rate s = measure(size, total, [&] {
          if (!sealer.seal(payload, out).ok()) std::abort();
        });
        // Open needs each record in order: seal one, then time only its opening.
        std::vector<uint8_t> rec(sealed_size(size));
        auto sealer2 = RecordSealer::create(suite, mode, bench_key(2), limits, "bench").value();
        auto opener2 = RecordOpener::create(suite, mode, bench_key(2), limits, "bench").value();
        const size_t iters = std::max<size_t>(4, total / size);
        double open_cpu = 0;
        for (size_t i = 0; i < iters; ++i) {
          if (!sealer2.seal(payload, rec).ok()) std::abort();
          const double c0 = thread_cpu_s();
          if (!opener2.open(rec).ok()) std::abort();
          open_cpu += thread_cpu_s() - c0;
        }
        const double gb = static_cast<double>(iters * size) / 1e9;
        const Rate o{gb / open_cpu, open_cpu / gb};
        if (mode == SecurityMode::encrypt) {
          seal_rate = s;
          open_rate = o;
        } else {
          aseal = s;
          aopen = o;
        }
      }
      auto cell = [](const Rate& r) {
        static char b[8][32];
        static int i = 0;
        char* p = b[i++ % 8];
        std::snprintf(p, 32, "%5.2f (%5.3f)", r.gbps, r.cpu_s_per_gb);
        return p;
      };
      std::printf("%-18s %6zuKi %16s %16s %16s %16s %6.0f%% %6.0f%% %16s %16s\n",
                  suite_name(suite), size >> 10, cell(re), cell(rd), cell(seal_rate),
                  cell(open_rate), 100 * seal_rate.gbps / re.gbps, 100 * open_rate.gbps / rd.gbps,
                  cell(aseal), cell(aopen));
    }
  }
  return raw;
}

// Loopback: a sender thread seals (or, for "none", frames) records and writes them to a TCP
// connection over 127.0.0.1; the receiver reads each header, the body into its posted buffer
// and the tag, then opens in place.
void loopback(size_t total, const Raw& raw) {
  std::printf("\n== loopback TCP, sender and receiver threads: GB/s of payload, CPU-s per GB "
              "(both threads), %% of the raw one-core encrypt speed above\n");
  std::printf("%-18s %8s %8s %10s %10s %8s\n", "cipher", "record", "mode", "GB/s", "CPU-s/GB",
              "of raw");
  for (int si = 0; si < 2; ++si) {
    const CipherSuite suite = si == 0 ? CipherSuite::chachapoly : CipherSuite::aesgcm;
    for (int zi = 0; zi < 4; ++zi) {
      const size_t size = kSizes[zi];
      for (SecurityMode mode : {SecurityMode::off, SecurityMode::encrypt, SecurityMode::auth}) {
        if (si == 1 && mode == SecurityMode::off) continue;  // the same as the first suite's
        auto listener = listen_tcp("127.0.0.1", 0).value();
        const uint16_t port = local_port(listener.get()).value();
        const auto deadline = Clock::now() + std::chrono::seconds(60);
        const size_t count = std::max<size_t>(4, total / size);
        const double c0 = process_cpu_s(), t0 = now_s();
        std::thread sender([&] {
          Fd fd = connect_tcp("127.0.0.1", port, deadline).value();
          std::vector<uint8_t> payload(size, 0x33), staging(sealed_size(size));
          RecordLimits limits;
          std::optional<RecordSealer> sealer;
          if (mode != SecurityMode::off) {
            sealer.emplace(RecordSealer::create(suite, mode, bench_key(3), limits, "r").value());
          }
          for (size_t i = 0; i < count; ++i) {
            if (mode == SecurityMode::encrypt) {
              if (!sealer->seal(payload, staging).ok()) std::abort();
              if (!send_all(fd.get(), staging.data(), staging.size(), deadline).ok()) std::abort();
            } else {
              // off and auth: header, then the caller's payload as is, then the tag.
              uint8_t head[kRecordHeaderBytes] = {}, tag[kTagBytes] = {};
              if (mode == SecurityMode::auth && !sealer->seal(payload, head, {}, tag).ok()) std::abort();
              if (mode == SecurityMode::off) std::memcpy(head, &size, 4);
              if (!send_all(fd.get(), head, sizeof(head), deadline).ok() ||
                  !send_all(fd.get(), payload.data(), size, deadline).ok() ||
                  (mode == SecurityMode::auth && !send_all(fd.get(), tag, sizeof(tag), deadline).ok())) {
                std::abort();
              }
            }
          }
        });
        Fd conn = accept_tcp(listener.get(), deadline).value();
        std::vector<uint8_t> posted(size);
        std::optional<RecordOpener> opener;
        if (mode != SecurityMode::off) {
          opener.emplace(RecordOpener::create(suite, mode, bench_key(3), {}, "r").value());
        }
        for (size_t i = 0; i < count; ++i) {
          uint8_t head[kRecordHeaderBytes], tag[kTagBytes];
          if (!recv_all(conn.get(), head, sizeof(head), deadline).ok()) std::abort();
          size_t n = size;
          if (opener) n = opener->body_size(head).value();
          if (!recv_all(conn.get(), posted.data(), n, deadline).ok()) std::abort();
          if (opener) {
            if (!recv_all(conn.get(), tag, sizeof(tag), deadline).ok()) std::abort();
            if (!opener->open(head, posted, tag).ok()) std::abort();
          }
        }
        sender.join();
        const double wall = now_s() - t0, cpu = process_cpu_s() - c0;
        const double gb = static_cast<double>(count * size) / 1e9;
        const double of_raw = 100 * (gb / wall) / raw.enc[si][zi];
        std::printf("%-18s %6zuKi %8s %10.2f %10.3f %7.0f%%\n",
                    mode == SecurityMode::off ? "(no security)" : suite_name(suite), size >> 10,
                    to_string(mode), gb / wall, cpu / gb, mode == SecurityMode::off ? 0.0 : of_raw);
      }
    }
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A small message on a secured TCP link: its 72-byte frame header and 8-byte payload as two
// records (how every frame went before payloads of up to 4 KiB rode inline) against one record of
// 80 bytes (how they go now). CPU time of seal + open, one thread, per message.
void small_messages() {
  std::printf("\n== an 8-byte message, seal + open, one core: ns per message (median of 5 x 100000)\n");
  std::printf("%-18s %8s %22s %22s\n", "cipher", "mode", "two records (72 + 8)",
              "one record (80)");
  const std::vector<uint8_t> header(72, 0x11), payload(8, 0x22), both(80, 0x33);
  for (CipherSuite suite : {CipherSuite::chachapoly, CipherSuite::aesgcm}) {
    for (SecurityMode mode : {SecurityMode::encrypt, SecurityMode::auth}) {
      RecordLimits limits;
      auto sealer = RecordSealer::create(suite, mode, bench_key(3), limits, "bench").value();
      auto opener = RecordOpener::create(suite, mode, bench_key(3), limits, "bench").value();
      std::vector<uint8_t> r1(sealed_size(72)), r2(sealed_size(8)), r3(sealed_size(80));
      auto per_message = [&](bool one) {
        std::vector<double> runs;
        for (int run = 0; run < 5; ++run) {
          constexpr int kIters = 100000;
          const double c0 = thread_cpu_s();
          for (int i = 0; i < kIters; ++i) {
            bool ok;
            if (one) {
              ok = sealer.seal(both, r3).ok() && opener.open(r3).ok();
            } else {
              ok = sealer.seal(header, r1).ok() && sealer.seal(payload, r2).ok() &&
                   opener.open(r1).ok() && opener.open(r2).ok();
            }
            if (!ok) std::abort();
          }
          runs.push_back((thread_cpu_s() - c0) / kIters * 1e9);
        }
        return median(runs);
      };
      const double two = per_message(false), one = per_message(true);
      std::printf("%-18s %8s %22.0f %22.0f\n", suite_name(suite),
                  mode == SecurityMode::encrypt ? "encrypt" : "auth", two, one);
    }
  }
}


void noise_handshakes() {
  std::printf("\n== handshakes in memory, both ends in one thread (median of 200)\n");
  const auto is = X25519Keypair::generate().value();
  const auto rs = X25519Keypair::generate().value();
  const Key psk = bench_key(7);
  const std::vector<uint8_t> prologue =
      build_prologue({CipherSuite::chachapoly, SecurityMode::encrypt},
                     std::vector<uint8_t>{'j', 'o', 'b'})
          .value();
  for (CipherSuite suite : {CipherSuite::chachapoly, CipherSuite::aesgcm}) {
    std::vector<double> us;
    const std::vector<uint8_t> hello(24, 1);
    for (int i = 0; i < 210; ++i) {
      const double t0 = now_s();
      HandshakeConfig c;
      c.suite = suite;
      c.prologue = prologue;
      c.psk = psk.span();
      c.local_static = &is;
      c.remote_static = rs.public_key;
      auto init = NoiseHandshake::create(c).value();
      c.role = Role::responder;
      c.local_static = &rs;
      auto resp = NoiseHandshake::create(c).value();
      auto m1 = init.write_message1(hello).value();
      (void)resp.read_message1(m1).value();
      auto m2 = resp.write_message2({}).value();
      (void)init.read_message2(m2).value();
      (void)init.split().value();
      (void)resp.split().value();
      if (i >= 10) us.push_back((now_s() - t0) * 1e6);
    }
    std::printf("Noise_IKpsk2_25519_%s_BLAKE2s: %.0f us for both ends (messages 96+24 and 48 "
                "bytes)\n",
                suite == CipherSuite::aesgcm ? "AESGCM" : "ChaChaPoly", median(us));
  }
}

void tls_handshakes() {
  EVP_PKEY* pkey = EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519");
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
  X509_set_pubkey(cert, pkey);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("weft"), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  X509_sign(cert, pkey, nullptr);
  auto make_ctx = [&](const SSL_METHOD* method) {
    SSL_CTX* ctx = SSL_CTX_new(method);
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_use_certificate(ctx, cert);
    SSL_CTX_use_PrivateKey(ctx, pkey);
    X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), cert);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    SSL_CTX_set1_groups_list(ctx, "X25519");
    return ctx;
  };
  SSL_CTX* sctx = make_ctx(TLS_server_method());
  SSL_CTX_set_num_tickets(sctx, 0);
  SSL_CTX* cctx = make_ctx(TLS_client_method());
  std::vector<double> us;
  for (int i = 0; i < 110; ++i) {
    const double t0 = now_s();
    SSL* c = SSL_new(cctx);
    SSL* s = SSL_new(sctx);
    BIO *bc = nullptr, *bs = nullptr;
    BIO_new_bio_pair(&bc, 0, &bs, 0);
    SSL_set_bio(c, bc, bc);
    SSL_set_bio(s, bs, bs);
    SSL_set_connect_state(c);
    SSL_set_accept_state(s);
    int done_c = 0, done_s = 0;
    for (int step = 0; step < 100 && !(done_c == 1 && done_s == 1); ++step) {
      if (done_c != 1) done_c = SSL_do_handshake(c);
      if (done_s != 1) done_s = SSL_do_handshake(s);
    }
    if (done_c != 1 || done_s != 1) {
      std::printf("TLS 1.3 handshake failed\n");
      return;
    }
    SSL_free(c);
    SSL_free(s);
    if (i >= 10) us.push_back((now_s() - t0) * 1e6);
  }
  std::printf("TLS 1.3 (OpenSSL, X25519, Ed25519 certificates both ways, no tickets): %.0f us "
              "for both ends\n",
              median(us));
  SSL_CTX_free(sctx);
  SSL_CTX_free(cctx);
  X509_free(cert);
  EVP_PKEY_free(pkey);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 512;
  const size_t total = std::max<size_t>(mib, 4) << 20;
  std::printf("weft security bench: %zu MiB per measurement, %s, AES instructions: %s\n", mib,
              OpenSSL_version(OPENSSL_VERSION), cpu_has_aes_acceleration() ? "yes" : "no");
  const Raw raw = in_memory(total);
  loopback(total, raw);
  small_messages();
  noise_handshakes();
  tls_handshakes();
  return 0;
}
