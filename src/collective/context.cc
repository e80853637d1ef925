#include "collective/context.h"

#include <fmt/format.h>

#include "base/log.h"
#include "runtime/buffer_pool.h"

namespace weft {
namespace {

// start + timeout, saturating: a huge timeout means "no deadline", not an overflow into the past.
Context::Clock::time_point deadline_after(Context::Clock::time_point start,
                                          std::chrono::milliseconds timeout) {
  const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(
      Context::Clock::time_point::max() - start);
  if (timeout >= room) return Context::Clock::time_point::max();
  return start + timeout;
}

std::string format_duration(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return fmt::format("{} s", d.count() / 1000);
  return fmt::format("{:g} s", static_cast<double>(d.count()) / 1000.0);
}

}  // namespace

Context::Context(Transport& transport, const Options& options, const Fingerprint& fp,
                 BufferPool& pool)
    : Context(transport, options, fp, pool, Clock::now()) {}

Context::Context(Transport& transport, const Options& options, const Fingerprint& fp,
                 BufferPool& pool, Clock::time_point start)
    : transport_(transport),
      options_(options),
      fp_(fp),
      pool_(pool),
      start_(start),
      deadline_(deadline_after(start_, options.timeout)) {}

Context::~Context() {
  if (outstanding_ > 0 || !error_.ok()) {
    // An algorithm returned early (an error, or a bug): nothing posted may keep pointing at
    // caller or scratch memory past this point, and the peers must learn that this rank stopped
    // taking part, so they end in bounded time instead of waiting for their deadline.
    Status why = !error_.ok()
                     ? error_
                     : Status(ErrorCode::internal,
                              fmt::format("rank {}: {} returned with {} messages still pending",
                                          rank(), fp_.describe(), outstanding_));
    transport_.fail(why);
  }
  // completion_'s destructor waits for a notifier still inside notify() (transport.h brackets
  // each completion), so the requests and completion_ may go now.
  for (auto& [ptr, bytes] : scratch_) pool_.release(ptr, bytes);
}

Request* Context::acquire() {
  Request* r;
  if (!free_.empty()) {
    r = free_.back();
    free_.pop_back();
    r->reset();
  } else {
    if (!requests_) requests_.emplace();
    r = &requests_->emplace_back();
    // Set once and never rewritten: a transport may still read it while completing.
    r->completion = &completion_;
  }
  ++outstanding_;
  return r;
}

void Context::release(Request* r) {
  --outstanding_;
  free_.push_back(r);
}

Handle Context::isend(int peer, uint32_t slot, const void* buf, size_t bytes) {
  Request* r = acquire();
  r->kind = Request::Kind::send;
  r->peer = peer;
  r->tag = collective_tag(fp_.seq, slot_offset_ + slot);
  r->buf = const_cast<void*>(buf);
  r->bytes = bytes;
  r->fp = fp_;
  transport_.post_send(r);
  return r;
}

Handle Context::irecv(int peer, uint32_t slot, void* buf, size_t bytes) {
  Request* r = acquire();
  r->kind = Request::Kind::recv;
  r->peer = peer;
  r->tag = collective_tag(fp_.seq, slot_offset_ + slot);
  r->buf = buf;
  r->bytes = bytes;
  r->fp = fp_;
  transport_.post_recv(r);
  return r;
}

Status Context::finish(Request* r) {
  Status s = std::move(r->status);
  release(r);
  if (!s.ok() && error_.ok()) error_ = s;
  return s;
}

Status Context::wait(Handle h) {
  for (;;) {
    const uint32_t seen = completion_.generation();
    if (h->done()) return finish(h);
    if (!transport_.wait(completion_, seen, h, deadline_) && !h->done()) {
      Status s = timeout_error(*h);
      if (error_.ok()) error_ = s;
      return s;
    }
  }
}

Status Context::wait_all(std::span<const Handle> hs) {
  // Handles still pending live in the front [0, pending) of `left`; finish them in any order so
  // that the first error surfaces at once, whichever request it hits.
  std::vector<Handle> left(hs.begin(), hs.end());
  size_t pending = left.size();
  // A pending receive if there is one: the peer this rank is really waiting for.
  auto waited_for = [&] {
    for (size_t i = 0; i < pending; ++i) {
      if (left[i]->kind == Request::Kind::recv) return left[i];
    }
    return left[0];
  };
  while (pending > 0) {
    const uint32_t seen = completion_.generation();
    for (size_t i = 0; i < pending;) {
      if (!left[i]->done()) {
        ++i;
        continue;
      }
      Handle h = left[i];
      left[i] = left[--pending];
      Status s = finish(h);
      if (!s.ok()) return s;
    }
    if (pending == 0) break;
    // The transport may receive on this thread for that peer while it waits.
    if (!transport_.wait(completion_, seen, waited_for(), deadline_)) {
      bool any_done = false;
      for (size_t i = 0; i < pending; ++i) any_done = any_done || left[i]->done();
      if (any_done) continue;
      Status s = timeout_error(*waited_for());
      if (error_.ok()) error_ = s;
      return s;
    }
  }
  return Status::success();
}

Status Context::send(int peer, uint32_t slot, const void* buf, size_t bytes) {
  return wait(isend(peer, slot, buf, bytes));
}

Status Context::recv(int peer, uint32_t slot, void* buf, size_t bytes) {
  return wait(irecv(peer, slot, buf, bytes));
}

Status Context::sendrecv(int to, const void* sbuf, size_t sbytes, int from, void* rbuf,
                         size_t rbytes, uint32_t slot) {
  // Receive first: with a rendezvous transport the peer's send completes only once it is posted.
  const Handle hs[2] = {irecv(from, slot, rbuf, rbytes), isend(to, slot, sbuf, sbytes)};
  return wait_all(hs);
}

Result<std::byte*> Context::scratch(size_t bytes) {
  if (bytes == 0) return static_cast<std::byte*>(nullptr);
  void* p = pool_.try_acquire(bytes);
  if (p == nullptr) {
    return remember(Status(ErrorCode::io,
                           fmt::format("rank {}: {}: out of memory: cannot allocate {} bytes of "
                                       "scratch memory",
                                       rank(), fp_.describe(), bytes)));
  }
  scratch_.emplace_back(p, bytes);
  return static_cast<std::byte*>(p);
}

Status Context::timeout_error(const Request& r) const {
  return timeout_error(fmt::format("waiting for rank {}", r.peer));
}

Status Context::timeout_error(std::string_view waiting) const {
  return Status(ErrorCode::timeout, fmt::format("rank {}: {} Timed out after {} {}", rank(),
                                                fp_.describe(), format_duration(options_.timeout),
                                                waiting));
}

Status Context::remember(Status st) {
  // The transport's timeout says only whom it waited for ("waiting for rank 3").
  if (st.code() == ErrorCode::timeout) st = timeout_error(st.message());
  if (error_.ok()) error_ = st;
  return st;
}

Result<uint8_t*> Context::shared_begin() {
  auto buf = transport_.shared_begin(fp_, deadline_);
  if (!buf.ok()) return remember(buf.status());
  return buf;
}

Result<std::span<const uint8_t>> Context::shared_read(int peer) {
  auto data = transport_.shared_read(peer, deadline_);
  if (!data.ok()) return remember(data.status());
  return data;
}

}  // namespace weft
