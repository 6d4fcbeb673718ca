// UcxEndpoint on the progress thread: receiving Active Messages. Eager data
// (small messages, which UCX hands over inside the callback) is copied into a
// pooled buffer; rendezvous data (large messages) is received by UCX straight
// into a pooled buffer. Each connection's messages are delivered in the order
// they were sent, so a small message never overtakes a large one before it.
#include <cstring>
#include <new>
#include <optional>

#include "common/logging.h"
#include "transport/ucx/ucx_endpoint_impl.h"
#include "transport/wire.h"

namespace syncline::ucx {

ucs_status_t UcxEndpoint::OnActiveMessage(void* arg, const void* header, size_t header_length, void* data,
                                          size_t length, const ucp_am_recv_param_t* param) {
  return static_cast<UcxEndpoint*>(arg)->Receive(static_cast<const uint8_t*>(header), header_length, data, length,
                                                 param);
}

ucs_status_t UcxEndpoint::Receive(const uint8_t* header, size_t header_length, void* data, size_t length,
                                  const ucp_am_recv_param_t* param) {
  // For rendezvous data, returning UCS_OK without receiving drops it.
  // Closing: nothing more is delivered, and no new rendezvous receive may
  // start (Shutdown waits for those under way before the worker goes).
  if (!delivering_) return UCS_OK;
  if (length > static_cast<uint64_t>(options_.max_message_bytes)) {
    Reject(InvalidArgument("message of " + std::to_string(length) + " bytes exceeds the limit of " +
                           std::to_string(options_.max_message_bytes)));
    return UCS_OK;
  }
  if (Status st = CheckPreamble(header, header_length, length); !st.ok()) {
    Reject(st);
    return UCS_OK;
  }
  std::shared_ptr<Inbox> inbox = stray_;
  if (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) {
    if (auto it = connections_.find(param->reply_ep); it != connections_.end()) inbox = it->second->inbox;
  }
  Buffer buffer;
  try {
    if (length > 0) buffer = pool_.Get(length).AsWritable();  // ours alone once delivered
  } catch (const std::bad_alloc&) {
    Reject(Unavailable("no memory for a message of " + std::to_string(length) + " bytes"));
    return UCS_OK;
  }

  if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
    if (length > 0) std::memcpy(buffer.mutable_data(), data, length);
    if (inbox->queue.empty()) {
      Deliver(header, header_length, buffer);
      return UCS_OK;
    }
    auto pending = std::make_shared<Pending>();
    pending->am_header.assign(reinterpret_cast<const char*>(header), header_length);
    pending->data = std::move(buffer);
    pending->state = Pending::kReady;
    inbox->queue.push_back(std::move(pending));
    return UCS_OK;
  }

  auto pending = std::make_shared<Pending>();
  pending->inbox = inbox;
  pending->am_header.assign(reinterpret_cast<const char*>(header), header_length);
  pending->data = buffer;
  inbox->queue.push_back(pending);
  auto* op = new RecvOp{this, pending};
  ucp_request_param_t params{};
  params.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE |
                        UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  params.cb.recv_am = &UcxEndpoint::OnReceived;
  params.user_data = op;
  params.datatype = ucp_dt_make_contig(1);
  params.memory_type = UCS_MEMORY_TYPE_HOST;
  ucs_status_ptr_t request = ucp_am_recv_data_nbx(ucx_->worker(), data, buffer.mutable_data(), length, &params);
  if (request == nullptr || UCS_PTR_IS_ERR(request)) {
    pending->state = request == nullptr ? Pending::kReady : Pending::kFailed;
    if (request != nullptr)
      SYNCLINE_LOG_WARN("{}: cannot receive a message of {} bytes: {}", address_, length,
                        StatusText(UCS_PTR_STATUS(request)));
    delete op;
    DeliverReady(*inbox);
  } else {
    receiving_.insert(op);
  }
  return UCS_INPROGRESS;  // the data descriptor now belongs to the receive
}

void UcxEndpoint::OnReceived(void* request, ucs_status_t status, size_t /*length*/, void* user_data) {
  auto* op = static_cast<RecvOp*>(user_data);
  UcxEndpoint* self = op->self;
  std::shared_ptr<Pending> pending = std::move(op->pending);
  self->receiving_.erase(op);
  delete op;
  ucp_request_free(request);
  pending->state = status == UCS_OK ? Pending::kReady : Pending::kFailed;
  if (status != UCS_OK && status != UCS_ERR_CANCELED)
    SYNCLINE_LOG_WARN("{}: receiving a message of {} bytes failed: {}", self->address_, pending->data.size(),
                      StatusText(status));
  self->DeliverReady(*pending->inbox);
}

void UcxEndpoint::DeliverReady(Inbox& inbox) {
  while (!inbox.queue.empty() && inbox.queue.front()->state != Pending::kWaiting) {
    std::shared_ptr<Pending> next = std::move(inbox.queue.front());
    inbox.queue.pop_front();
    if (next->state == Pending::kReady)
      Deliver(reinterpret_cast<const uint8_t*>(next->am_header.data()), next->am_header.size(), next->data);
  }
}

void UcxEndpoint::Deliver(const uint8_t* header, size_t header_length, const Buffer& data) {
  Result<DecodedFrames> frames = DecodeFrames(header, header_length, data);
  Result<Message> message = frames.ok() ? DecodeMessage(frames->header, frames->header_size,
                                                        std::move(frames->payloads))
                                        : Result<Message>(frames.status());
  std::optional<Message> admitted = AdmitReceived(std::move(message), counters_, Where());
  if (admitted && delivering_ && receiver_) receiver_(std::move(*admitted));
}

void UcxEndpoint::Reject(const Status& why) { (void)AdmitReceived(why, counters_, Where()); }

std::string_view UcxEndpoint::Where() const { return address_.empty() ? std::string_view("ucx") : address_; }

}  // namespace syncline::ucx
