/** \file The one object of a kind per process, made afresh in a forked child. */
#pragma once

#include <pthread.h>

#include <atomic>
#include <mutex>

namespace seastar::runtime {

/// The process's T, built on first use (T's constructor may throw; the next call tries again).
/// The child of a fork starts with a new one: the parent's may hold locks taken by threads that
/// do not exist there, or describe threads and clocks of the parent. The old one is leaked, as
/// its threads are not there to join.
template <class T>
T& per_process() {
  static std::atomic<T*> instance{nullptr};
  static std::once_flag atfork;
  std::call_once(atfork, [] { pthread_atfork(nullptr, nullptr, [] { instance.store(nullptr); }); });
  T* p = instance.load();
  if (!p) {
    T* fresh = new T();
    if (instance.compare_exchange_strong(p, fresh)) {
      p = fresh;
    } else {
      delete fresh;
    }
  }
  return *p;
}

}  // namespace seastar::runtime
