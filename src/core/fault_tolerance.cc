// Revoke, agree, shrink, grow and join: going on after a rank failed, through the store.
//
// The transport of a communicator with a failed member is gone, so everything here talks through
// the rendezvous store, which outlives ranks when it runs outside them (`weft run` hosts it in
// the launcher, `weft store` stands alone). Keys (under the communicator's store prefix):
//   weft-ft/<epoch>/rank<r>   rank r's contribution to agreement <epoch>: {"flag", "lost"}
//   weft-ft/<epoch>/claim     counter: the first rank to bump it writes the decision
//   weft-ft/<epoch>/decision  {"flag", "alive", "failed"}: what every rank returns
//   weft-grow/<n>             rank 0's plan for grow call n: the new store prefix, or "error:..."
// and under the root store (the one the first communicator was created with):
//   weft-join/tickets         counter: joiners take numbers
//   weft-join/assigned        counter: tickets handed out by grow() calls so far
//   weft-join/ticket/<t>      ticket t's plan: {"prefix", "rank", "size"}
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/log.h"
#include "core/communicator_impl.h"

namespace weft {
namespace {

// Polls with a growing pause: quick when the others are already there, cheap when they are not.
class Backoff {
 public:
  void pause() {
    std::this_thread::sleep_for(delay_);
    delay_ = std::min(delay_ * 2, std::chrono::milliseconds(50));
  }

 private:
  std::chrono::milliseconds delay_{1};
};

std::string list(const std::vector<int>& ranks) { return fmt::format("{}", fmt::join(ranks, ",")); }

Result<nlohmann::json> read_json(Store& store, const std::string& key,
                                 std::chrono::milliseconds timeout) {
  auto text = store.get_string(key, timeout);
  if (!text.ok()) return text.status();
  auto j = nlohmann::json::parse(text.value(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Status(ErrorCode::protocol, fmt::format("malformed value under {} in the store", key));
  }
  return j;
}

}  // namespace

void CommunicatorImpl::revoke() {
  metrics_.revokes.fetch_add(1, std::memory_order_relaxed);
  set_broken(Status(ErrorCode::revoked, fmt::format("rank {} revoked the communicator", rank())));
}

Result<Agreement> CommunicatorImpl::agree(uint64_t flag) { return agree_through_store(flag, "agree"); }

Result<Agreement> CommunicatorImpl::agree_through_store(uint64_t flag, const char* what) {
  const uint64_t epoch = ++ft_epoch_;
  auto key = [&](const std::string& k) { return fmt::format("weft-ft/{}/{}", epoch, k); };
  auto fail = [&](const Status& st) {
    return st.with_context(fmt::format("rank {}: {} #{}", rank(), what, epoch));
  };
  std::set<int> lost;
  auto note_lost = [&] {
    for (int r : transport_->lost_peers()) lost.insert(r);
  };
  note_lost();
  nlohmann::json mine = {{"flag", flag}, {"lost", std::vector<int>(lost.begin(), lost.end())}};
  if (Status st = store_->set(key(fmt::format("rank{}", rank())), mine.dump()); !st.ok()) {
    return fail(st);
  }
  // Contributions seen so far; a rank is waited for until it contributed, somebody saw it
  // die or go silent, or the timeout passed.
  std::vector<std::optional<uint64_t>> flags(static_cast<size_t>(size()));
  const auto deadline = Clock::now() + options_.timeout;
  Backoff backoff;
  while (true) {
    auto decided = store_->check({key("decision")});
    if (!decided.ok()) return fail(decided.status());
    if (decided.value()) break;
    note_lost();
    bool complete = true;
    for (int r = 0; r < size(); ++r) {
      auto& f = flags[static_cast<size_t>(r)];
      if (!f) {
        const std::string k = key(fmt::format("rank{}", r));
        auto there = store_->check({k});
        if (!there.ok()) return fail(there.status());
        if (there.value()) {
          auto j = read_json(*store_, k, options_.connect_timeout);
          if (!j.ok()) return fail(j.status());
          f = j->value("flag", uint64_t{0});
          if (j->contains("lost") && (*j)["lost"].is_array()) {
            for (const auto& v : (*j)["lost"]) {
              if (v.is_number_integer() && v.get<int>() >= 0 && v.get<int>() < size()) {
                lost.insert(v.get<int>());
              }
            }
          }
        }
      }
      complete = complete && (f.has_value() || lost.count(r) != 0);
    }
    const bool expired = Clock::now() >= deadline;
    if (complete || expired) {
      Agreement a;
      a.flag = ~uint64_t{0};
      // A rank that contributed is alive, whatever others saw of its connections (a closed
      // socket is no proof of death); the lost reports only end the wait for the others.
      for (int r = 0; r < size(); ++r) {
        const auto& f = flags[static_cast<size_t>(r)];
        if (f) {
          a.alive.push_back(r);
          a.flag &= *f;
        } else {
          a.failed.push_back(r);
        }
      }
      if (a.alive.empty()) a.flag = 0;
      if (expired && !complete) {
        log::warn("rank {}: {} #{}: going on without rank(s) {} (not there after {:g} s)", rank(),
                  what, epoch, list(a.failed),
                  std::chrono::duration<double>(options_.timeout).count());
      }
      auto claim = store_->add(key("claim"), 1);
      if (!claim.ok()) return fail(claim.status());
      if (claim.value() == 1) {
        nlohmann::json d = {{"flag", a.flag}, {"alive", a.alive}, {"failed", a.failed}};
        if (Status st = store_->set(key("decision"), d.dump()); !st.ok()) return fail(st);
      }
      break;
    }
    backoff.pause();
  }
  auto d = read_json(*store_, key("decision"), options_.connect_timeout);
  if (!d.ok()) return fail(d.status());
  Agreement a;
  try {
    a.flag = d->at("flag").get<uint64_t>();
    a.alive = d->at("alive").get<std::vector<int>>();
    a.failed = d->at("failed").get<std::vector<int>>();
  } catch (const nlohmann::json::exception&) {
    return fail(Status(ErrorCode::protocol, "malformed decision in the store"));
  }
  if (std::find(a.alive.begin(), a.alive.end(), rank()) == a.alive.end()) {
    return Status(ErrorCode::peer_lost,
                  fmt::format("rank {}: {} #{}: the other ranks ({}) went on without this rank: "
                              "it was seen failed or came too late",
                              rank(), what, epoch, list(a.alive)));
  }
  return a;
}

Result<std::unique_ptr<CommunicatorImpl>> CommunicatorImpl::shrink() {
  // Ranks still waiting in an operation of this communicator end it and come here too.
  if (broken().ok()) {
    set_broken(Status(ErrorCode::revoked,
                      fmt::format("rank {} revoked the communicator to shrink it", rank())));
  }
  auto a = agree_through_store(~uint64_t{0}, "shrink");
  if (!a.ok()) return a.status();
  const uint64_t epoch = ft_epoch_;
  Options o = options_;
  o.size = static_cast<int>(a->alive.size());
  o.rank = static_cast<int>(std::find(a->alive.begin(), a->alive.end(), rank()) - a->alive.begin());
  if (o.rank == 0) {
    log::warn("rank {}: shrinking to {} ranks (old ranks {}){}", rank(), o.size, list(a->alive),
              a->failed.empty() ? "" : fmt::format(" without rank(s) {}", list(a->failed)));
  }
  auto child = create(o, make_prefix_store(fmt::format("shrink{}", epoch), store_), nullptr,
                      /*allow_hierarchy=*/true, /*machine_ranks=*/0, root_store_, link_security_);
  if (!child.ok()) {
    return child.status().with_context(fmt::format("rank {}: shrink #{}", rank(), epoch));
  }
  metrics_.shrinks.fetch_add(1, std::memory_order_relaxed);
  return child;
}

Result<std::string> CommunicatorImpl::admit_joiners(int count, uint64_t grow_id) {
  Store& root = *root_store_;
  const auto deadline = Clock::now() + options_.connect_timeout;
  Backoff backoff;
  int64_t assigned = 0;
  while (true) {
    auto tickets = root.add("weft-join/tickets", 0);
    if (!tickets.ok()) return tickets.status();
    auto done = root.add("weft-join/assigned", 0);
    if (!done.ok()) return done.status();
    assigned = done.value();
    const int64_t waiting = tickets.value() - assigned;
    if (waiting >= count) break;
    if (Clock::now() >= deadline) {
      return Status(ErrorCode::timeout,
                    fmt::format("rank 0: grow by {}: {} of {} joining rank(s) arrived within {:g} s "
                                "(start them with Communicator::join, or WEFT_JOIN=1 under weft run)",
                                count, waiting, count,
                                std::chrono::duration<double>(options_.connect_timeout).count()));
    }
    backoff.pause();
  }
  const std::string prefix = fmt::format("weft-grow-{:016x}-{}", token_, grow_id);
  for (int i = 0; i < count; ++i) {
    nlohmann::json plan = {{"prefix", prefix}, {"rank", size() + i}, {"size", size() + count}};
    WEFT_RETURN_IF_ERROR(root.set(fmt::format("weft-join/ticket/{}", assigned + 1 + i), plan.dump()));
  }
  auto bumped = root.add("weft-join/assigned", count);
  if (!bumped.ok()) return bumped.status();
  return prefix;
}

Result<std::unique_ptr<CommunicatorImpl>> CommunicatorImpl::grow(int count) {
  if (count < 1) {
    return Status(ErrorCode::invalid_argument,
                  fmt::format("rank {}: grow({}): count must be at least 1", rank(), count));
  }
  if (Status b = broken(); !b.ok()) {
    return b.with_context(fmt::format("rank {}: grow needs a working communicator (shrink() first)",
                                      rank()));
  }
  const uint64_t id = ++grow_count_;
  const std::string plan_key = fmt::format("weft-grow/{}", id);
  std::string prefix;
  if (rank() == 0) {
    auto p = admit_joiners(count, id);
    WEFT_RETURN_IF_ERROR(store_->set(plan_key, p.ok() ? p.value() : "error:" + p.status().message()));
    if (!p.ok()) return p.status();
    prefix = p.value();
    log::info("rank 0: growing from {} to {} ranks", size(), size() + count);
  } else {
    auto p = store_->get_string(plan_key, options_.connect_timeout + options_.timeout);
    if (!p.ok()) {
      return p.status().with_context(fmt::format("rank {}: grow: waiting for rank 0", rank()));
    }
    if (p->rfind("error:", 0) == 0) {
      return Status(ErrorCode::timeout, fmt::format("rank {}: grow failed on rank 0: {}", rank(),
                                                    p->substr(6)));
    }
    prefix = p.value();
  }
  Options o = options_;
  o.size = size() + count;
  auto child = create(o, make_prefix_store(prefix, root_store_), nullptr, true, 0, root_store_,
                      link_security_);
  if (!child.ok()) return child.status().with_context(fmt::format("rank {}: grow", rank()));
  metrics_.grows.fetch_add(1, std::memory_order_relaxed);
  return child;
}

Result<std::unique_ptr<CommunicatorImpl>> CommunicatorImpl::join(const Options& options,
                                                                 std::shared_ptr<Store> store,
                                                                 LinkSecurity security) {
  if (!store) return Status(ErrorCode::invalid_argument, "join: a Store is required");
  auto ticket = store->add("weft-join/tickets", 1);
  if (!ticket.ok()) return ticket.status().with_context("join: taking a ticket");
  const std::string key = fmt::format("weft-join/ticket/{}", ticket.value());
  auto plan = read_json(*store, key, options.connect_timeout);
  if (!plan.ok()) {
    return plan.status().with_context(
        fmt::format("join (ticket {}): waiting for the ranks of the job to call grow()",
                    ticket.value()));
  }
  Options o = options;
  std::string prefix;
  try {
    prefix = plan->at("prefix").get<std::string>();
    o.rank = plan->at("rank").get<int>();
    o.size = plan->at("size").get<int>();
  } catch (const nlohmann::json::exception&) {
    return Status(ErrorCode::protocol, "join: malformed plan in the store");
  }
  if (o.rank < 0 || o.rank >= o.size) {
    return Status(ErrorCode::protocol, "join: plan in the store has rank out of range");
  }
  auto c = create(o, make_prefix_store(prefix, store), nullptr, true, 0, store,
                  std::move(security));
  if (!c.ok()) return c.status().with_context(fmt::format("join as rank {}", o.rank));
  // In place of the launcher's rank it replaces (weft run --respawn): Prometheus finds it there.
  WEFT_RETURN_IF_ERROR((*c)->publish_metrics(options.rank));
  return c;
}

Result<int> CommunicatorImpl::pending_joins() const {
  auto tickets = root_store_->add("weft-join/tickets", 0);
  if (!tickets.ok()) return tickets.status();
  auto assigned = root_store_->add("weft-join/assigned", 0);
  if (!assigned.ok()) return assigned.status();
  return static_cast<int>(std::max<int64_t>(0, tickets.value() - assigned.value()));
}

}  // namespace weft
