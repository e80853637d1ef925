// weftWork_t: testing, waiting on and freeing the handle of an async call (weft_c.h).
#include <chrono>
#include <string>

#include "capi.h"

using weft::capi::fail;
using weft::capi::invalid;

extern "C" {

weftResult_t weftWorkTest(weftWork_t work, int* done) {
  if (work == nullptr || done == nullptr) return invalid(-1, "weftWorkTest", "work or done is NULL");
  *done = work->work->test() ? 1 : 0;
  return *done ? fail(work->work->status()) : weftSuccess;
}

weftResult_t weftWorkWait(weftWork_t work, int64_t timeout_ms) {
  if (work == nullptr) return invalid(-1, "weftWorkWait", "work is NULL");
  if (timeout_ms < 0) return fail(work->work->wait());
  weft::Status status = work->work->wait(std::chrono::milliseconds(timeout_ms));
  if (status.code() == weft::ErrorCode::timeout && !work->work->test()) {
    // The wait ran out, not the operation: name the operation as its own errors do.
    status = weft::Status(weft::ErrorCode::timeout,
                          "rank " + std::to_string(work->rank) + ": " +
                              weft::to_string(work->kind) + ": weftWorkWait: " +
                              std::to_string(timeout_ms) + " ms passed (the operation goes on)");
  }
  return fail(status);
}

weftResult_t weftWorkFree(weftWork_t work) {
  delete work;
  return weftSuccess;
}

}  // extern "C"
