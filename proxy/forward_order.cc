#include "proxy/forward_order.h"

namespace syncline {

void ForwardOrder::Declared(TensorId id) {
  MutexLock lock(mu_);
  declared_.emplace(id, declared_.size());
}

void ForwardOrder::UsedByForward(TensorId id) {
  MutexLock lock(mu_);
  if (!learning_ || use_rank_.count(id)) return;
  use_rank_.emplace(id, used_.size());
  used_.push_back(id);
}

void ForwardOrder::FinishLearning() {
  MutexLock lock(mu_);
  learning_ = false;
}

bool ForwardOrder::learning() const {
  MutexLock lock(mu_);
  return learning_;
}

int64_t ForwardOrder::PriorityOf(TensorId id) const {
  MutexLock lock(mu_);
  if (auto it = use_rank_.find(id); it != use_rank_.end()) return -static_cast<int64_t>(it->second);
  // Unused: after every used tensor, in declaration order (unknown ones last).
  auto d = declared_.find(id);
  const size_t index = d != declared_.end() ? d->second : declared_.size();
  return -static_cast<int64_t>(used_.size() + index);
}

std::vector<TensorId> ForwardOrder::Order() const {
  MutexLock lock(mu_);
  return used_;
}

void ForwardOrder::FromOrder(const std::vector<TensorId>& order) {
  MutexLock lock(mu_);
  used_.clear();
  use_rank_.clear();
  for (TensorId id : order) {
    if (use_rank_.emplace(id, used_.size()).second) used_.push_back(id);
  }
  learning_ = false;
}

}  // namespace syncline
