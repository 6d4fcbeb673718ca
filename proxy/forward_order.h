// ForwardOrder: the priority of each tensor, from the order in which the
// forward pass first uses it (first used = most urgent, ByteScheduler's
// rule): the gradient whose parameter the next forward pass needs first
// should be summed first. Framework glue reports each use while learning (the
// first iteration) and calls FinishLearning once; priorities then stay fixed.
// Tensors the forward pass did not use (or declared priorities, before any
// use) rank after the used ones, by declaration order.
//
// Priorities follow BytePS's convention (larger is more urgent) and are the
// same on every worker that runs the same model code; Order/FromOrder carry
// one worker's learned order to the others where that is not given.
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "worker/chunk.h"

namespace syncline {

class ForwardOrder {
 public:
  // Declaration order: the tie-break, and the order of unused tensors.
  void Declared(TensorId id);
  // The forward pass is about to read tensor `id` (ignored once learned).
  void UsedByForward(TensorId id);
  // Ends learning: the order seen so far is kept from now on.
  void FinishLearning();
  bool learning() const;
  // Larger is more urgent: 0 for the first tensor used, -1 for the next, ...
  int64_t PriorityOf(TensorId id) const;
  // The learned order, first used first (to share it with other workers).
  std::vector<TensorId> Order() const;
  // Adopts an order learned elsewhere and ends learning.
  void FromOrder(const std::vector<TensorId>& order);

 private:
  mutable Mutex mu_;
  bool learning_ GUARDED_BY(mu_) = true;
  std::vector<TensorId> used_ GUARDED_BY(mu_);  // first use first
  std::unordered_map<TensorId, size_t> use_rank_ GUARDED_BY(mu_);
  std::unordered_map<TensorId, size_t> declared_ GUARDED_BY(mu_);  // declaration index
};

}  // namespace syncline
