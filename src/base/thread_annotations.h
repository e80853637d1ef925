// Clang's thread-safety annotations (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html), so
// that the compiler checks the locking rules the comments state: which mutex guards a field
// (GUARDED_BY), which one a function expects held (REQUIRES) or must not be called with
// (EXCLUDES). The checks run in the `thread-safety` preset (clang, -Werror=thread-safety); under
// GCC the macros are empty. The annotated mutex types are in base/mutex.h.
//
// NO_THREAD_SAFETY_ANALYSIS turns the check off for one function whose correct locking the
// analysis cannot follow (every peer locked in a loop, a lock handed over through a reference);
// each use says why next to it.
#pragma once

#if defined(__clang__)
#define WEFT_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define WEFT_THREAD_ANNOTATION(x)
#endif

// On a class: its objects are capabilities (mutexes); `x` names the kind in messages.
#define CAPABILITY(x) WEFT_THREAD_ANNOTATION(capability(x))
// On a class: an RAII object that holds capabilities for its lifetime (MutexLock).
#define SCOPED_CAPABILITY WEFT_THREAD_ANNOTATION(scoped_lockable)

// On a field: reading or writing it needs `x` held (shared suffices for reading).
#define GUARDED_BY(x) WEFT_THREAD_ANNOTATION(guarded_by(x))
// On a pointer field: what it points to needs `x` held (the pointer itself does not).
#define PT_GUARDED_BY(x) WEFT_THREAD_ANNOTATION(pt_guarded_by(x))

// On a mutex field: the lock order. Checked only with -Wthread-safety-beta; they still document
// the order where the mutexes are declared.
#define ACQUIRED_BEFORE(...) WEFT_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) WEFT_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))

// On a function: the caller holds the capabilities (exclusively, or at least shared).
#define REQUIRES(...) WEFT_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) WEFT_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
// On a function: it acquires / releases the capabilities (none named: `this`).
#define ACQUIRE(...) WEFT_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) WEFT_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) WEFT_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) WEFT_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
// Releases whatever kind of hold the caller has (a scoped lock's destructor).
#define RELEASE_GENERIC(...) WEFT_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
// On a function returning bool: it acquired the capabilities when it returns the first argument
// (TRY_ACQUIRE(true) on a member: `this`).
#define TRY_ACQUIRE(...) WEFT_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// On a function: the caller must not hold the capabilities (the function takes them itself).
#define EXCLUDES(...) WEFT_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// On a function: returns only if the calling thread holds `x` (checked at run time, if at all).
#define ASSERT_CAPABILITY(x) WEFT_THREAD_ANNOTATION(assert_capability(x))
// On a function: it returns a reference to capability `x`.
#define RETURN_CAPABILITY(x) WEFT_THREAD_ANNOTATION(lock_returned(x))

// On a function: no checking inside it (its callers are still checked against its annotations).
#define NO_THREAD_SAFETY_ANALYSIS WEFT_THREAD_ANNOTATION(no_thread_safety_analysis)
