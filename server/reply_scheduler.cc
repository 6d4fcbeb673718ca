#include "server/reply_scheduler.h"

#include <algorithm>

namespace syncline {

ReplyScheduler::ReplyScheduler(uint64_t window_bytes) : window_bytes_(window_bytes) {}

std::vector<Reply> ReplyScheduler::Submit(std::vector<Reply> replies) {
  if (window_bytes_ == 0) return replies;
  std::vector<Reply> ready;
  ready.reserve(replies.size());
  MutexLock lock(mu_);
  for (Reply& r : replies) {
    if (r.message.header.op() != proto::PULL_REPLY) {
      ready.push_back(std::move(r));
      continue;
    }
    Worker& w = workers_[r.to];
    const uint64_t bytes = r.message.header.byte_length();
    if (w.waiting.empty() && (w.in_flight == 0 || w.in_flight + bytes <= window_bytes_)) {
      MarkSentLocked(w, r);
      ready.push_back(std::move(r));
      continue;
    }
    ++queued_replies_;
    queued_bytes_ += bytes;
    const Order order{r.message.header.priority(), arrivals_++};
    w.waiting.emplace(order, std::move(r));
    // A more urgent sum may fit where the one at the head of the queue did not.
    ReleaseLocked(w, ready);
  }
  return ready;
}

ReplyScheduler::Acknowledged ReplyScheduler::Acknowledge(int32_t worker, uint64_t bytes) {
  Acknowledged result;
  if (window_bytes_ == 0) {
    result.excess_bytes = bytes;
    return result;
  }
  MutexLock lock(mu_);
  auto it = workers_.find(worker);
  const uint64_t in_flight = it == workers_.end() ? 0 : it->second.in_flight;
  const uint64_t taken = std::min(bytes, in_flight);
  result.excess_bytes = bytes - taken;
  if (taken == 0) return result;
  it->second.in_flight -= taken;
  in_flight_ -= taken;
  ReleaseLocked(it->second, result.ready);
  return result;
}

void ReplyScheduler::ReleaseLocked(Worker& w, std::vector<Reply>& out) {
  while (!w.waiting.empty()) {
    auto head = w.waiting.begin();
    const uint64_t bytes = head->second.message.header.byte_length();
    if (w.in_flight > 0 && w.in_flight + bytes > window_bytes_) return;
    Reply r = std::move(head->second);
    w.waiting.erase(head);
    --queued_replies_;
    queued_bytes_ -= bytes;
    MarkSentLocked(w, r);
    out.push_back(std::move(r));
  }
}

void ReplyScheduler::MarkSentLocked(Worker& w, Reply& reply) {
  const uint64_t bytes = reply.message.header.byte_length();
  w.in_flight += bytes;
  in_flight_ += bytes;
  reply.message.header.set_flags(reply.message.header.flags() | proto::FLAG_ACK_REPLY);
}

ReplyScheduler::Load ReplyScheduler::load() const {
  MutexLock lock(mu_);
  return Load{queued_replies_, queued_bytes_, in_flight_};
}

}  // namespace syncline
