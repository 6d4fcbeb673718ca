#include "worker/credit_window.h"

namespace syncline {

void CreditWindow::Admit(Push push, std::vector<Push>* go) {
  if (!waiting_.empty() || !Fits(push.bytes)) {
    waiting_.push_back(std::move(push));  // behind earlier pushes: issue order is kept
    return;
  }
  in_flight_ += push.bytes;
  go->push_back(std::move(push));
}

void CreditWindow::Release(uint64_t bytes, std::vector<Push>* go) {
  in_flight_ = bytes > in_flight_ ? 0 : in_flight_ - bytes;
  while (!waiting_.empty() && Fits(waiting_.front().bytes)) {
    in_flight_ += waiting_.front().bytes;
    go->push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
}

std::deque<CreditWindow::Push> CreditWindow::TakeWaiting() {
  std::deque<Push> out;
  out.swap(waiting_);
  in_flight_ = 0;
  return out;
}

}  // namespace syncline
