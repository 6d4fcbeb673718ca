// Worker: push_pulls and broadcasts of tensors in device memory. A push_pull
// sums a device tensor through a pinned host buffer of the tensor's own
// (StagingBuffers: allocated at its first push_pull from a device), chunk by
// chunk through the device stages (worker/device_stages.h).
#include <cstring>

#include "worker/worker.h"

namespace syncline {

Result<std::shared_ptr<Operation>> Worker::PushPullDevice(TensorId id, void* data, PushPullOptions options) {
  std::shared_ptr<StagingBuffers> staging;
  {
    MutexLock lock(mu_);
    if (id >= tensors_.size() || tensors_[id].name.empty())
      return InvalidArgument("tensor id " + std::to_string(id) + " was not declared");
    Tensor& t = tensors_[id];
    if (!t.staging) t.staging = std::make_shared<StagingBuffers>(device_.get(), t.num_elements * DTypeSize(t.dtype));
    staging = t.staging;
  }
  // Marked first: the framework's work queued so far is what the copies wait for.
  SYNCLINE_ASSIGN_OR_RETURN(std::shared_ptr<const DeviceMemory::Mark> after, device_->MarkStream(data, options.stream));
  SYNCLINE_ASSIGN_OR_RETURN(Buffer host, staging->Take(data));
  auto route = std::make_shared<const DeviceRoute>(DeviceRoute{static_cast<uint8_t*>(data), host.mutable_data(), after});
  // The push_pull uses the buffer until it is Done, and may outlive the
  // worker and its tensors (a transport still holding a chunk): its done
  // callback keeps the buffer's memory alive as long as the push_pull.
  options.on_done = [host, done = std::move(options.on_done)](const Status& st) {
    if (done) done(st);
  };
  Result<std::shared_ptr<Operation>> op = PushPullHost(id, host.mutable_data(), options, std::move(route));
  if (op.ok()) {
    staging->Lend(host, *op);
  } else {
    staging->Give(host);
  }
  return op;
}

Status Worker::BroadcastDevice(TensorId id, void* data, int root, uint64_t bytes) {
  // Rare (parameters at the start): staged whole, in a buffer of its own.
  SYNCLINE_ASSIGN_OR_RETURN(Buffer host, device_->AllocatePinned(data, bytes));
  if (rank() == root) {
    SYNCLINE_ASSIGN_OR_RETURN(std::shared_ptr<const DeviceMemory::Mark> after, device_->MarkStream(data, nullptr));
    SYNCLINE_RETURN_IF_ERROR(device_->CopyToHost(host.mutable_data(), data, bytes, after.get()));
  } else if (bytes > 0) {
    std::memset(host.mutable_data(), 0, bytes);
  }
  // A wait that times out leaves the push_pull to the transport: its done
  // callback keeps the buffer alive as long as the push_pull.
  PushPullOptions options = BroadcastOptions();
  options.on_done = [host](const Status&) {};
  SYNCLINE_ASSIGN_OR_RETURN(std::shared_ptr<Operation> op, PushPullHost(id, host.mutable_data(), options));
  SYNCLINE_RETURN_IF_ERROR(op->Wait(DefaultDeadline()));
  return device_->CopyToDevice(data, host.data(), bytes);
}

}  // namespace syncline
