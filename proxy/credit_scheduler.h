// CreditScheduler: the ChunkScheduler of the scheduling proxy. Posted chunks
// wait in a queue ordered by priority (most urgent first; ties, and FIFO
// order, by posting order); one is admitted to the network only while the
// bytes of pushes in flight stay within the credit, except that one chunk
// always goes when nothing is in flight. A newly posted urgent chunk thus
// overtakes every queued chunk (preemption at chunk granularity).
//
// Credit comes back when the server acknowledges a push (KvClient calls
// Release), not when the round's sum returns: a sum waits for every worker's
// push, and workers that become ready in different orders would otherwise
// hold each other's credit (docs/decisions.md).
//
// Chunks are admitted on the scheduler's own thread, so neither the posting
// thread nor the network thread that returns credit ever blocks in a send.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/settings.h"
#include "worker/chunk.h"

namespace syncline {

class CreditScheduler final : public ChunkScheduler {
 public:
  enum class Order { kPriority, kFifo };

  // `credit_bytes`: 0 = unlimited.
  CreditScheduler(Order order, uint64_t credit_bytes);
  // From settings: SYNCLINE_SCHEDULING and the scheduling credit.
  static std::unique_ptr<CreditScheduler> FromSettings(const Settings& settings);
  // Stops (failing queued chunks) and joins the admitting thread.
  ~CreditScheduler() override;

  void Start(Admit admit) override;
  void Post(std::vector<ChunkTask> chunks) override;
  void Release(uint64_t bytes) override;
  void Stop(const Status& status) override;

  // Takes effect for the next admission (the tuner's knob).
  void SetCredit(uint64_t credit_bytes) override;
  uint64_t credit() const;
  uint64_t bytes_in_flight() const;
  // The most bytes ever in flight at once.
  uint64_t peak_bytes_in_flight() const;
  size_t queued() const;
  Load load() const override;

 private:
  // Heap order: true if `a` goes out after `b`.
  bool After(const ChunkTask& a, const ChunkTask& b) const;
  auto HeapOrder() const {
    return [this](const ChunkTask& a, const ChunkTask& b) { return After(a, b); };
  }
  bool CanAdmitLocked() const REQUIRES(mu_);
  void AdmitLoop();

  const Order order_;
  Admit admit_;
  mutable Mutex mu_;
  CondVar cv_;
  uint64_t credit_ GUARDED_BY(mu_);
  uint64_t in_flight_ GUARDED_BY(mu_) = 0;
  uint64_t peak_in_flight_ GUARDED_BY(mu_) = 0;
  std::vector<ChunkTask> queue_ GUARDED_BY(mu_);  // a heap by After
  std::optional<Status> stopped_ GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace syncline
