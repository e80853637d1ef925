// Creating, splitting and ending communicators (weft_c.h).
#include <cstdlib>
#include <string>

#include "capi.h"
#include "unique_id.h"

using weft::capi::fail;
using weft::capi::invalid;

namespace {

weftComm_t adopt(std::unique_ptr<weft::Communicator> comm,
                 std::shared_ptr<weft::capi::ServerLease> server) {
  return new weftComm{std::move(server), std::move(comm)};
}

// WEFT_AUTH_KEY_FILE, or "" when unset.
std::string job_key_file() {
  const char* value = std::getenv("WEFT_AUTH_KEY_FILE");
  return value == nullptr ? std::string() : std::string(value);
}

}  // namespace

extern "C" {

weftResult_t weftGetUniqueId(weftUniqueId* uniqueId) {
  if (uniqueId == nullptr) return invalid(-1, "weftGetUniqueId", "uniqueId is NULL");
  // The C API is an edge, as a launcher is: it reads the key file's name where from_env would.
  auto id = weft::capi::make_unique_id(job_key_file());
  if (!id.ok()) return fail(id.status());
  *uniqueId = id.value();
  return weftSuccess;
}

weftResult_t weftCommInitRank(weftComm_t* comm, int nranks, weftUniqueId uniqueId, int rank) {
  const char* op = "weftCommInitRank";
  if (comm == nullptr) return invalid(rank, op, "comm is NULL");
  *comm = nullptr;
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    return invalid(rank, op,
                   "rank " + std::to_string(rank) + " of " + std::to_string(nranks) +
                       " ranks is out of range");
  }
  auto id = weft::capi::parse_unique_id(uniqueId);
  if (!id.ok()) return fail(id.status().with_context("rank " + std::to_string(rank)));
  auto options = weft::Options::from_env();
  if (!options.ok()) return fail(options.status());
  weft::Options o = options.value();
  o.rank = rank;
  o.size = nranks;
  // A keyed id: every rank brings the job key (its own WEFT_AUTH_KEY_FILE; under weft run, the
  // launcher's). Unkeyed: the store does not authenticate, and neither do the links.
  std::string key_file;
  if (id->keyed) {
    key_file = job_key_file();
    if (key_file.empty()) {
      return invalid(rank, op,
                     "the id was made with a job key and WEFT_AUTH_KEY_FILE is not set here");
    }
  }
  // The process that serves the id reaches its own server over loopback.
  std::shared_ptr<weft::capi::ServerLease> lease = weft::capi::lease_for(id.value());
  const std::string host = lease ? std::string("127.0.0.1") : id->host;
  auto store = weft::connect_tcp_store(host, id->port, o.connect_timeout, key_file);
  if (!store.ok()) {
    return fail(store.status().with_context("rank " + std::to_string(rank) + ": " + op +
                                            ": cannot reach the store at " + host + ":" +
                                            std::to_string(id->port)));
  }
  auto made = weft::Communicator::create(
      o, weft::make_prefix_store("capi/" + id->job, std::move(store.value())), key_file);
  if (!made.ok()) return fail(made.status());
  weft::capi::release_id_hold(id.value());
  *comm = adopt(std::move(made.value()), std::move(lease));
  return weftSuccess;
}

weftResult_t weftCommInitFromEnv(weftComm_t* comm) {
  if (comm == nullptr) return invalid(-1, "weftCommInitFromEnv", "comm is NULL");
  *comm = nullptr;
  auto made = weft::Communicator::from_env();
  if (!made.ok()) return fail(made.status());
  *comm = adopt(std::move(made.value()), nullptr);
  return weftSuccess;
}

weftResult_t weftCommSplit(weftComm_t comm, int color, int key, weftComm_t* newcomm,
                           const void* config) {
  const char* op = "weftCommSplit";
  if (comm == nullptr) return invalid(-1, op, "comm is NULL");
  const int rank = comm->comm->rank();
  if (newcomm == nullptr) return invalid(rank, op, "newcomm is NULL");
  *newcomm = nullptr;
  if (config != nullptr) return invalid(rank, op, "config is reserved and must be NULL");
  auto made = comm->comm->split(color < 0 ? -1 : color, key);
  if (!made.ok()) return fail(made.status());
  if (made.value() != nullptr) *newcomm = adopt(std::move(made.value()), comm->server);
  return weftSuccess;
}

weftResult_t weftCommDestroy(weftComm_t comm) {
  if (comm == nullptr) return weftSuccess;
  const weft::Status status = comm->comm->shutdown();
  delete comm;
  return fail(status);
}

weftResult_t weftCommAbort(weftComm_t comm) {
  if (comm == nullptr) return weftSuccess;
  comm->comm->abort("weftCommAbort called");
  delete comm;
  return weftSuccess;
}

weftResult_t weftCommCount(const weftComm_t comm, int* count) {
  if (comm == nullptr || count == nullptr) {
    return invalid(-1, "weftCommCount", "comm or count is NULL");
  }
  *count = comm->comm->size();
  return weftSuccess;
}

weftResult_t weftCommUserRank(const weftComm_t comm, int* rank) {
  if (comm == nullptr || rank == nullptr) {
    return invalid(-1, "weftCommUserRank", "comm or rank is NULL");
  }
  *rank = comm->comm->rank();
  return weftSuccess;
}

}  // extern "C"
