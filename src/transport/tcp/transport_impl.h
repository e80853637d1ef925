// Internal classes of the TCP transport (see tcp_transport.h for the contract).
//
// Threads and locks: each Peer has one mutex guarding its matching state (a PeerQueues of the
// matching engine, transport/matching.h) and the send queues of its sockets; posters (any
// thread) and the reactor take it. The receive state of a Connection is
// guarded by its read_mu: normally the reactor reads, but a caller waiting for a message from
// that peer reads itself (Peer::caller_reading tells the reactor to leave the socket alone),
// which saves two thread hand-offs per message. Lock order: read_mu, then fp_mu_, then Peer::mu
// (several only as Matcher::post_any takes them: all, in rank order), then the matcher's own
// mutex and unexp_mu_ (leaves). Nobody holds two read_mu at once except drain_peer, in index order. The
// annotations (base/thread_annotations.h) let clang check this, except for a Connection's send
// side, which is guarded by its Peer's mutex (a Connection cannot name it).
#pragma once

#include <poll.h>
#include <sys/epoll.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "base/fd.h"
#include "base/mutex.h"
#include "runtime/buffer_pool.h"
#include "runtime/reactor.h"
#include "transport/matching.h"
#include "security/record.h"
#include "transport/tcp/frame.h"
#include "transport/tcp/mesh.h"
#include "transport/tcp/tcp_transport.h"

namespace weft::tcp {

// epoll interest of a connection when registered: readable and peer hang-up.
inline constexpr uint32_t kEvents = EPOLLIN | EPOLLRDHUP | EPOLLET;

struct OutFrame {
  uint8_t header[kHeaderBytes];
  const uint8_t* payload = nullptr;
  size_t payload_len = 0;
  size_t written = 0;       // of header + payload
  Request* req = nullptr;   // counts down req->parts_left when fully written
  std::string text;         // owned payload (error frames)
  // Secured links: the frame as records (header record, then the payload record if any),
  // sealed by flush() in queue order just before it is written; `written` then counts these.
  std::unique_ptr<uint8_t[]> sealed;
  size_t sealed_len = 0;
};

// A message that arrived before its receive was posted: the engine's Parked record holds its tag,
// fingerprint and size (and the eager bytes it stages, counted against the peer's credit), and
// this. An eager message parked while its payload still arrives is also its connection's
// cur_unexp; matched in that state it leaves the parked list and waits there for its payload.
struct Unexpected {
  FrameType type = FrameType::eager;  // eager (payload parked in `data`) or rts (payload waits)
  size_t bytes = 0;
  uint64_t msg_id = 0;           // rts
  uint8_t* data = nullptr;       // eager payload, from the pool
  bool arrived = false;          // eager payload fully received
  Request* waiting = nullptr;    // a receive matched while the payload was still arriving
};
using TcpParked = Parked<Unexpected*>;
using TcpMatcher = Matcher<Unexpected*>;

struct Connection {
  Fd fd;
  int peer = -1;
  int index = 0;
  std::atomic<bool> closed{false};  // shut down by drain_peer
  std::atomic<bool> eof{false};     // the peer closed its side (reads are over, writes may go on)
  std::atomic<bool> missed{false};  // readiness the reactor left to a reading caller
  Mutex read_mu;                    // guards the receive side below
  // Send side (guarded by the peer mutex; not annotated, a Connection cannot name it).
  std::deque<OutFrame> outq;
  bool want_out = false;  // EPOLLOUT is registered (only while frames wait for buffer space)
  bool send_broken = false;  // a write failed because the peer closed: its reads decide the error
  std::optional<security::RecordSealer> sealer;  // secured links (send side: the peer mutex)
  // EPOLLIN is registered: false while an operation's thread reads the sockets itself, so that
  // arrivals do not also wake the reactor thread (on an oversubscribed host every such wake-up
  // takes a core from a rank with work to do).
  bool reactor_reads = true;
  // The queue is blocked (socket full) while an operation's thread owns progress: that thread
  // writes the rest from its wait loop instead of the reactor (set under the peer mutex).
  std::atomic<bool> out_blocked{false};
  // Receive side. Secured links read each frame as its header record (state header), which
  // holds the payload too when it is small (payload_inline); otherwise, if the frame has a
  // payload, the payload record's length (payload_record), its body straight into the
  // destination (payload) and its tag (payload_tag), and open the body in place.
  enum class RecvState { header, payload_record, payload, payload_tag };
  RecvState state GUARDED_BY(read_mu) = RecvState::header;
  std::vector<uint8_t> inbuf GUARDED_BY(read_mu);
  size_t in_start GUARDED_BY(read_mu) = 0;
  size_t in_end GUARDED_BY(read_mu) = 0;
  // Also read_mu's, but not annotated: on_header and on_payload_done read it through a local
  // reference, which the analysis (clang 14) cannot follow back to `c.read_mu`.
  FrameHeader cur;
  uint8_t* target GUARDED_BY(read_mu) = nullptr;
  size_t remaining GUARDED_BY(read_mu) = 0;
  // Eager matched directly, or data for an expected receive.
  Request* cur_req GUARDED_BY(read_mu) = nullptr;
  Unexpected* cur_unexp GUARDED_BY(read_mu) = nullptr;  // eager parked
  std::string err_text GUARDED_BY(read_mu);             // error frame payload
  std::optional<security::RecordOpener> opener GUARDED_BY(read_mu);  // secured links
  uint8_t record_header[security::kRecordHeaderBytes] GUARDED_BY(read_mu) = {};
  uint8_t* body GUARDED_BY(read_mu) = nullptr;  // where the payload record's body lands
};

// The epoll interest a connection's state asks for (peer mutex held).
inline uint32_t epoll_events(const Connection& c) {
  return EPOLLRDHUP | EPOLLET | (c.reactor_reads ? EPOLLIN : 0u) | (c.want_out ? EPOLLOUT : 0u);
}

struct Peer {
  Peer(TcpMatcher& matcher, int r) : rank(r), queues(matcher, r) {}

  const int rank;
  Reactor* reactor = nullptr;
  Mutex mu;
  std::vector<std::unique_ptr<Connection>> conns;  // fixed after set-up
  // Receives posted for this peer and its arrivals that no receive took yet.
  PeerQueues<Unexpected*> queues GUARDED_BY(mu);
  std::vector<Request*> rts_pending GUARDED_BY(mu);  // our rendezvous sends waiting for CTS
  std::vector<Request*> expected GUARDED_BY(mu);     // our receives waiting for DATA
  size_t send_credits GUARDED_BY(mu) = 0;
  size_t credits_to_return GUARDED_BY(mu) = 0;
  uint64_t next_msg_id GUARDED_BY(mu) = 0;
  std::atomic<bool> caller_reading{false};  // a waiting caller reads this peer's sockets
  // Liveness: reads and writes that moved bytes (changes matter, not values), and whether the
  // peer was lost (connection dropped without GOODBYE, or silent for peer_timeout).
  std::atomic<uint64_t> rx_count{0};
  std::atomic<uint64_t> tx_count{0};
  std::atomic<bool> lost{false};
  std::atomic<bool> reported{false};  // it sent an ERROR frame: alive, so its EOF is no loss
  // heartbeat()'s own state (its thread only).
  uint64_t hb_rx = 0;
  uint64_t hb_tx = 0;
  std::chrono::steady_clock::time_point hb_heard{};
  bool departed GUARDED_BY(mu) = false;   // GOODBYE received
  bool open_conns GUARDED_BY(mu) = true;  // false once every socket saw EOF after GOODBYE
  int eof_count GUARDED_BY(mu) = 0;
};

class TcpTransport final : public Transport {
 public:
  TcpTransport(const TcpTransportConfig& config, BufferPool& pool);
  ~TcpTransport() override;

  Status start(std::vector<std::vector<Fd>> sockets, std::vector<std::vector<LinkCrypto>> crypto);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void post_send(Request* r) override;
  void post_recv(Request* r) override;
  bool wait(Completion& completion, uint32_t seen, const Request* hint,
            Completion::Clock::time_point deadline) override;
  void begin_operation(const Fingerprint& fp) override;
  void end_operation() override;
  // Registers or drops EPOLLIN for every connection (see Connection::reactor_reads).
  void set_reactor_reads(bool on) EXCLUDES(arm_mu_);
  // Writes what blocked queues hold (the operation's thread, from wait()); false on failure.
  bool flush_blocked();
  // Receives from any peer (Request::peer == kAnyPeer): Matcher::post_any.
  void post_recv_any(Request* r);
  // Matches receive r with the parked message `a` of peer p (taken from p.queues); a receive
  // that disagrees with it ends with the mismatch and the message is parked again. An error is
  // the transport's (the caller fails it once p.mu is released).
  Status match_unexpected(Peer& p, Request* r, TcpParked a) REQUIRES(p.mu);
  // A point-to-point request is being posted: the reactor must read between operations.
  void note_p2p() EXCLUDES(arm_mu_);
  void fail(const Status& status) override;
  Status error() const override;
  Status heartbeat(std::chrono::steady_clock::time_point now,
                   std::chrono::milliseconds peer_timeout) override;
  std::vector<int> lost_peers() const override;
  TransportCounters counters() const override {
    TransportCounters c;
    c.unexpected_bytes_peak = matcher_.staged_peak();
    return c;
  }

  void close_gracefully(std::chrono::milliseconds timeout);
  void close(std::chrono::milliseconds timeout) override { close_gracefully(timeout); }
  // Whether a waiting caller polls its sockets briefly before sleeping (see wait()).
  void set_spin(bool spin) { spin_ = spin; }

 private:
  // send_path.cc
  void enqueue(Peer& p, Connection& c, const FrameHeader& h, const void* payload, Request* r)
      REQUIRES(p.mu);
  Status flush(Peer& p, Connection& c) REQUIRES(p.mu);
  // Secured links: seals frame f (the next unsealed one of c's queue) into f.sealed.
  Status seal_frame(Peer& p, Connection& c, OutFrame& f) REQUIRES(p.mu);
  void send_cts(Peer& p, uint64_t msg_id) REQUIRES(p.mu);
  void start_data(Peer& p, Request* r) REQUIRES(p.mu);
  void maybe_return_credits(Peer& p) REQUIRES(p.mu);
  void send_self(Peer& p, Request* r) REQUIRES(p.mu);
  // recv_path.cc
  void on_event(Peer& p, Connection& c, uint32_t events) EXCLUDES(p.mu, c.read_mu);
  // Reads until the socket is empty.
  Status drain_reads(Peer& p, Connection& c) EXCLUDES(p.mu, c.read_mu);
  Status read_some(Peer& p, Connection& c, bool& again) REQUIRES(c.read_mu) EXCLUDES(p.mu);
  Status process(Peer& p, Connection& c) REQUIRES(c.read_mu) EXCLUDES(p.mu);
  Status on_header(Peer& p, Connection& c) REQUIRES(c.read_mu) EXCLUDES(p.mu);
  Status on_payload_done(Peer& p, Connection& c) REQUIRES(c.read_mu) EXCLUDES(p.mu);
  // The payload's last byte arrived: delivered at once (clear), or after its tag (secured).
  Status payload_received(Peer& p, Connection& c) REQUIRES(c.read_mu) EXCLUDES(p.mu);
  // Secured links: the header record at the front of inbuf, opened in place; its body length
  // (kHeaderBytes, or more with an inline payload), 0 while incomplete.
  Result<size_t> open_header_record(Peer& p, Connection& c) REQUIRES(c.read_mu);
  Status record_error(const Peer& p, const Connection& c, const Status& st) const;
  Status check_collective(Peer& p, const FrameHeader& h) REQUIRES(fp_mu_);
  Status match_check(Peer& p, const Request& r, uint64_t bytes, const Fingerprint& remote);
  void deliver_unexpected(Peer& p, Unexpected* u, Request* r) REQUIRES(p.mu);
  // transport_impl.cc
  void fail_async(const Status& status) EXCLUDES(err_mu_);
  // Not analysed: it holds every read_mu of the peer at once (taken in a loop), which the
  // analysis cannot follow.
  void drain_peer(Peer& p, const Status& status, bool tell_peer)
      EXCLUDES(p.mu) NO_THREAD_SAFETY_ANALYSIS;
  Status failure() const EXCLUDES(err_mu_);
  Unexpected* new_unexpected() EXCLUDES(unexp_mu_);
  void free_unexpected(Unexpected* u) EXCLUDES(unexp_mu_);
  bool is_self(const Peer& p) const { return p.rank == rank_; }

  const int rank_;
  const int size_;
  const uint32_t comm_;
  const Options options_;
  BufferPool& pool_;
  FrameLimits limits_;
  // Secured links (fixed at construction): every frame travels as records; the largest payload
  // one frame carries (one record), so eager and data frames are cut to it.
  const bool secure_;
  const uint64_t max_frame_payload_;
  std::vector<std::unique_ptr<Reactor>> reactors_;
  // Receives from any peer and the counters over all peers' queues (parked collective messages,
  // eager bytes staged); declared before the peers, whose queues refer to it.
  TcpMatcher matcher_;
  std::vector<std::unique_ptr<Peer>> peers_;

  mutable Mutex err_mu_;  // a leaf (also taken under a Peer::mu)
  Status error_ GUARDED_BY(err_mu_);
  std::atomic<bool> failed_{false};

  Mutex fp_mu_;  // after a read_mu, before any Peer::mu
  Fingerprint current_ GUARDED_BY(fp_mu_);

  Mutex unexp_mu_ ACQUIRED_AFTER(fp_mu_);  // a leaf (taken under a Peer::mu)
  std::vector<std::unique_ptr<Unexpected>> unexp_storage_ GUARDED_BY(unexp_mu_);
  std::vector<Unexpected*> unexp_free_ GUARDED_BY(unexp_mu_);

  Fd wake_;  // eventfd a caller waiting in poll() is woken through (see wait())
  // The executing thread owns every socket's receive side from begin_operation to
  // end_operation: it reads whenever it waits, and the reactor only notes readiness.
  std::atomic<bool> op_active_{false};
  std::atomic<bool> p2p_used_{false};  // a point-to-point request was ever posted (note_p2p)
  Mutex arm_mu_;                       // before the Peer::mu it takes; never with read_mu or fp_mu_
  bool reactor_reads_ GUARDED_BY(arm_mu_) = true;  // every connection's reactor_reads
  std::thread::id op_thread_;  // written by that thread before op_active_ is set
  std::vector<pollfd> poll_fds_;  // wait()'s scratch; only the operation's thread uses it
  std::vector<Connection*> poll_conns_;  // the connection of each poll_fds_ entry (same thread)
  bool spin_ = true;              // fixed before start()
  std::atomic<int> goodbyes_{0};
  Completion closing_;
};

}  // namespace weft::tcp
