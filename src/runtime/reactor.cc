#include "runtime/reactor.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>

#include "base/log.h"

namespace weft {

Result<std::unique_ptr<Reactor>> Reactor::create(std::string name) {
  std::unique_ptr<Reactor> r(new Reactor());
  r->name_ = std::move(name);
  r->epoll_ = Fd(::epoll_create1(EPOLL_CLOEXEC));
  if (!r->epoll_.valid()) return errno_status("epoll_create1");
  r->wake_ = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!r->wake_.valid()) return errno_status("eventfd");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = r->wake_.get();
  if (::epoll_ctl(r->epoll_.get(), EPOLL_CTL_ADD, r->wake_.get(), &ev) != 0) {
    return errno_status("epoll_ctl(eventfd)");
  }
  Reactor* raw = r.get();
  r->thread_ = std::jthread([raw] { raw->loop(); });
  return r;
}

Reactor::~Reactor() {
  if (thread_.joinable()) {
    post([this] { stopping_ = true; });
    thread_.join();
  }
}

Status Reactor::add(int fd, uint32_t events, Handler handler) {
  auto h = std::make_shared<Handler>(std::move(handler));
  Status result;
  run_sync([&] {
    handlers_[fd] = h;
    epoll_event ev{};
    ev.events = events;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      result = errno_status("epoll_ctl(ADD)");
      handlers_.erase(fd);
    }
  });
  return result;
}

Status Reactor::modify(int fd, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = fd;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fd, &ev) != 0) return errno_status("epoll_ctl(MOD)");
  return Status();
}

void Reactor::remove(int fd) {
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
  handlers_.erase(fd);
}

void Reactor::post(std::function<void()> task) {
  {
    MutexLock lock(tasks_mu_);
    tasks_.push_back(std::move(task));
  }
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_.get(), &one, sizeof(one));
}

void Reactor::run_sync(const std::function<void()>& task) {
  if (on_reactor_thread() || !thread_.joinable()) {
    task();
    return;
  }
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  post([&] {
    task();
    std::lock_guard<std::mutex> lock(mu);
    done = true;
    cv.notify_one();
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
}

void Reactor::run_tasks() {
  uint64_t n;
  while (::read(wake_.get(), &n, sizeof(n)) > 0) {
  }
  std::vector<std::function<void()>> tasks;
  {
    MutexLock lock(tasks_mu_);
    tasks.swap(tasks_);
  }
  for (auto& t : tasks) t();
}

void Reactor::loop() {
  pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
  constexpr int kMaxEvents = 64;
  epoll_event events[kMaxEvents];
  while (!stopping_) {
    int n = ::epoll_wait(epoll_.get(), events, kMaxEvents, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      log::error("reactor {}: epoll_wait failed: {}", name_, errno);
      break;
    }
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == wake_.get()) {
        run_tasks();
        continue;
      }
      auto it = handlers_.find(fd);
      if (it == handlers_.end()) continue;
      auto handler = it->second;  // keeps it alive if the handler removes itself
      (*handler)(events[i].events);
    }
  }
}

}  // namespace weft
