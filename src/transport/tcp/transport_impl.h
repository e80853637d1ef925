// Internal classes of the TCP transport (see tcp_transport.h for the contract).
//
// Threads and locks: each Peer has one mutex guarding its matching state and the send queues of
// its sockets; posters (any thread) and the reactor take it. The receive state of a Connection is
// guarded by its read_mu: normally the reactor reads, but a caller waiting for a message from
// that peer reads itself (Peer::caller_reading tells the reactor to leave the socket alone),
// which saves two thread hand-offs per message. Lock order: read_mu, then fp_mu_, then Peer::mu
// (unexp_mu_ last). Nobody holds two read_mu at once except drain_peer, in index order.
#pragma once

#include <poll.h>
#include <sys/epoll.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/fd.h"
#include "runtime/buffer_pool.h"
#include "runtime/reactor.h"
#include "transport/tcp/frame.h"
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
};

// A message that arrived before its receive was posted.
struct Unexpected {
  FrameType type = FrameType::eager;  // eager (payload parked in `data`) or rts (payload waits)
  uint64_t tag = 0;
  Fingerprint fp;
  size_t bytes = 0;
  uint64_t msg_id = 0;           // rts
  uint8_t* data = nullptr;       // eager payload, from the pool
  bool arrived = false;          // eager payload fully received
  Request* waiting = nullptr;    // a receive matched while the payload was still arriving
};

struct Connection {
  Fd fd;
  int peer = -1;
  int index = 0;
  std::atomic<bool> closed{false};  // shut down by drain_peer
  std::atomic<bool> eof{false};     // the peer closed its side (reads are over, writes may go on)
  std::atomic<bool> missed{false};  // readiness the reactor left to a reading caller
  std::mutex read_mu;               // guards the receive side below
  // Send side (guarded by the peer mutex).
  std::deque<OutFrame> outq;
  bool want_out = false;  // EPOLLOUT is registered (only while frames wait for buffer space)
  bool send_broken = false;  // a write failed because the peer closed: its reads decide the error
  // EPOLLIN is registered: false while an operation's thread reads the sockets itself, so that
  // arrivals do not also wake the reactor thread (on an oversubscribed host every such wake-up
  // takes a core from a rank with work to do).
  bool reactor_reads = true;
  // The queue is blocked (socket full) while an operation's thread owns progress: that thread
  // writes the rest from its wait loop instead of the reactor (set under the peer mutex).
  std::atomic<bool> out_blocked{false};
  // Receive side (read_mu).
  enum class RecvState { header, payload } state = RecvState::header;
  std::vector<uint8_t> inbuf;
  size_t in_start = 0, in_end = 0;
  FrameHeader cur;
  uint8_t* target = nullptr;
  size_t remaining = 0;
  Request* cur_req = nullptr;       // eager matched directly, or data for an expected receive
  Unexpected* cur_unexp = nullptr;  // eager parked
  std::string err_text;             // error frame payload
};

// The epoll interest a connection's state asks for (peer mutex held).
inline uint32_t epoll_events(const Connection& c) {
  return EPOLLRDHUP | EPOLLET | (c.reactor_reads ? EPOLLIN : 0u) | (c.want_out ? EPOLLOUT : 0u);
}

struct Peer {
  int rank = -1;
  Reactor* reactor = nullptr;
  std::mutex mu;
  std::vector<std::unique_ptr<Connection>> conns;   // fixed after set-up
  std::vector<Request*> posted;                     // receives not yet matched, in posting order
  std::vector<Unexpected*> unexpected;              // arrivals not yet matched, in arrival order
  std::vector<Request*> rts_pending;                // our rendezvous sends waiting for CTS
  std::vector<Request*> expected;                   // our receives waiting for DATA
  size_t send_credits = 0;
  size_t credits_to_return = 0;
  size_t unexpected_bytes = 0;  // eager payloads parked in `unexpected` (at most our credit)
  uint64_t next_msg_id = 0;
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
  bool departed = false;     // GOODBYE received
  bool open_conns = true;    // false once every socket saw EOF after GOODBYE
  int eof_count = 0;
};

class TcpTransport final : public Transport {
 public:
  TcpTransport(const TcpTransportConfig& config, BufferPool& pool);
  ~TcpTransport() override;

  Status start(std::vector<std::vector<Fd>> sockets);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void post_send(Request* r) override;
  void post_recv(Request* r) override;
  bool wait(Completion& completion, uint32_t seen, const Request* hint,
            Completion::Clock::time_point deadline) override;
  void begin_operation(const Fingerprint& fp) override;
  void end_operation() override;
  // Registers or drops EPOLLIN for every connection (see Connection::reactor_reads).
  void set_reactor_reads(bool on);
  // Writes what blocked queues hold (the operation's thread, from wait()); false on failure.
  bool flush_blocked();
  // Receives from any peer (Request::peer == kAnyPeer): matched against every peer's parked
  // messages when posted, else parked in any_posted_ for the first arrival with their tag.
  void post_recv_any(Request* r);
  // Peer mutex held: takes the oldest receive from any peer waiting for `tag`, or nullptr.
  Request* claim_any(const Peer& p, uint64_t tag);
  // Peer mutex held: matches receive r with parked message *it of peer p (removing it).
  Status match_unexpected(Peer& p, Request* r, std::vector<Unexpected*>::iterator it);
  // A point-to-point request is being posted: the reactor must read between operations.
  void note_p2p();
  void fail(const Status& status) override;
  Status error() const override;
  Status heartbeat(std::chrono::steady_clock::time_point now,
                   std::chrono::milliseconds peer_timeout) override;
  std::vector<int> lost_peers() const override;
  TransportCounters counters() const override {
    TransportCounters c;
    c.unexpected_bytes_peak = unexpected_peak_.load(std::memory_order_relaxed);
    return c;
  }

  void close_gracefully(std::chrono::milliseconds timeout);
  void close(std::chrono::milliseconds timeout) override { close_gracefully(timeout); }
  // Whether a waiting caller polls its sockets briefly before sleeping (see wait()).
  void set_spin(bool spin) { spin_ = spin; }

 private:
  // send_path.cc
  void enqueue(Peer& p, Connection& c, const FrameHeader& h, const void* payload, Request* r);
  Status flush(Peer& p, Connection& c);  // p.mu held
  void send_cts(Peer& p, uint64_t msg_id);
  void start_data(Peer& p, Request* r);
  void maybe_return_credits(Peer& p);
  void send_self(Peer& p, Request* r);
  // recv_path.cc
  void on_event(Peer& p, Connection& c, uint32_t events);
  Status drain_reads(Peer& p, Connection& c);  // reads until the socket is empty
  Status read_some(Peer& p, Connection& c, bool& again);
  Status process(Peer& p, Connection& c);
  Status on_header(Peer& p, Connection& c);
  Status on_payload_done(Peer& p, Connection& c);
  Status check_collective(Peer& p, const FrameHeader& h);
  Status match_check(Peer& p, const Request& r, uint64_t bytes, const Fingerprint& remote);
  void deliver_unexpected(Peer& p, Unexpected* u, Request* r);
  // transport_impl.cc
  void fail_async(const Status& status);
  void drain_peer(Peer& p, const Status& status, bool tell_peer);
  Status failure() const;
  Unexpected* new_unexpected();
  void free_unexpected(Unexpected* u);
  bool is_self(const Peer& p) const { return p.rank == rank_; }

  const int rank_;
  const int size_;
  const uint32_t comm_;
  const Options options_;
  BufferPool& pool_;
  FrameLimits limits_;
  std::vector<std::unique_ptr<Reactor>> reactors_;
  std::vector<std::unique_ptr<Peer>> peers_;

  mutable std::mutex err_mu_;
  Status error_;                       // guarded by err_mu_
  std::atomic<bool> failed_{false};
  std::atomic<uint64_t> unexpected_now_{0};   // parked eager bytes, all peers
  std::atomic<uint64_t> unexpected_peak_{0};

  std::mutex fp_mu_;
  Fingerprint current_;                // guarded by fp_mu_

  std::mutex unexp_mu_;
  std::vector<std::unique_ptr<Unexpected>> unexp_storage_;  // guarded by unexp_mu_
  std::vector<Unexpected*> unexp_free_;                     // guarded by unexp_mu_

  Fd wake_;  // eventfd a caller waiting in poll() is woken through (see wait())
  // The executing thread owns every socket's receive side from begin_operation to
  // end_operation: it reads whenever it waits, and the reactor only notes readiness.
  std::atomic<bool> op_active_{false};
  std::mutex any_mu_;                 // after a peer mutex, never before
  std::vector<Request*> any_posted_;  // receives from any peer not yet matched (any_mu_)
  std::atomic<bool> p2p_used_{false};  // a point-to-point request was ever posted (note_p2p)
  std::mutex arm_mu_;
  bool reactor_reads_ = true;  // every connection's reactor_reads (guarded by arm_mu_)
  std::thread::id op_thread_;  // written by that thread before op_active_ is set
  std::vector<pollfd> poll_fds_;  // wait()'s scratch; only the operation's thread uses it
  std::vector<Connection*> poll_conns_;  // the connection of each poll_fds_ entry (same thread)
  bool spin_ = true;              // fixed before start()
  std::atomic<int> goodbyes_{0};
  Completion closing_;
};

}  // namespace weft::tcp
