#include "proxy/credit_scheduler.h"

#include <algorithm>

#include "worker/operation.h"

namespace syncline {

CreditScheduler::CreditScheduler(Order order, uint64_t credit_bytes) : order_(order), credit_(credit_bytes) {}

std::unique_ptr<CreditScheduler> CreditScheduler::FromSettings(const Settings& settings) {
  return std::make_unique<CreditScheduler>(settings.scheduling == "fifo" ? Order::kFifo : Order::kPriority,
                                           settings.SchedulingCreditBytes());
}

CreditScheduler::~CreditScheduler() {
  Stop(Aborted("the worker's chunk scheduler was destroyed"));
  if (thread_.joinable()) thread_.join();
}

void CreditScheduler::Start(Admit admit) {
  admit_ = std::move(admit);
  thread_ = std::thread([this] { AdmitLoop(); });
}

bool CreditScheduler::After(const ChunkTask& a, const ChunkTask& b) const {
  if (order_ == Order::kPriority && a.priority != b.priority) return a.priority < b.priority;
  return a.sequence > b.sequence;
}

bool CreditScheduler::CanAdmitLocked() const {
  if (queue_.empty()) return false;
  return in_flight_ == 0 || credit_ == 0 || in_flight_ + queue_.front().WireBytes() <= credit_;
}

void CreditScheduler::Post(std::vector<ChunkTask> chunks) {
  std::optional<Status> refused;
  {
    MutexLock lock(mu_);
    refused = stopped_;
    if (!refused) {
      for (ChunkTask& c : chunks) {
        queue_.push_back(std::move(c));
        std::push_heap(queue_.begin(), queue_.end(), HeapOrder());
      }
    }
  }
  if (refused) {
    for (ChunkTask& c : chunks) c.op->Fail(*refused);
    return;
  }
  cv_.NotifyAll();
}

void CreditScheduler::Release(uint64_t bytes) {
  {
    MutexLock lock(mu_);
    in_flight_ -= std::min(bytes, in_flight_);
  }
  cv_.NotifyAll();
}

void CreditScheduler::Stop(const Status& status) {
  std::vector<ChunkTask> dropped;
  {
    MutexLock lock(mu_);
    if (!stopped_) stopped_ = status;
    dropped.swap(queue_);
  }
  cv_.NotifyAll();
  for (ChunkTask& c : dropped) c.op->Fail(status);
}

void CreditScheduler::SetCredit(uint64_t credit_bytes) {
  {
    MutexLock lock(mu_);
    credit_ = credit_bytes;
  }
  cv_.NotifyAll();
}

uint64_t CreditScheduler::credit() const {
  MutexLock lock(mu_);
  return credit_;
}

uint64_t CreditScheduler::bytes_in_flight() const {
  MutexLock lock(mu_);
  return in_flight_;
}

uint64_t CreditScheduler::peak_bytes_in_flight() const {
  MutexLock lock(mu_);
  return peak_in_flight_;
}

size_t CreditScheduler::queued() const {
  MutexLock lock(mu_);
  return queue_.size();
}

ChunkScheduler::Load CreditScheduler::load() const {
  MutexLock lock(mu_);
  return Load{queue_.size(), in_flight_, credit_};
}

void CreditScheduler::AdmitLoop() {
  for (;;) {
    ChunkTask next;
    {
      MutexLock lock(mu_);
      cv_.Wait(mu_, [this]() REQUIRES(mu_) { return stopped_.has_value() || CanAdmitLocked(); });
      if (stopped_) return;
      std::pop_heap(queue_.begin(), queue_.end(), HeapOrder());
      next = std::move(queue_.back());
      queue_.pop_back();
      in_flight_ += next.WireBytes();
      peak_in_flight_ = std::max(peak_in_flight_, in_flight_);
    }
    admit_(std::move(next));
  }
}

}  // namespace syncline
