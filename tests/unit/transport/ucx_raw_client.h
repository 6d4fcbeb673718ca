// A raw UCP client for tests (its own context and worker) that sends
// whatever active messages a test asks for to a UcxEndpoint's listener:
// forged input the endpoint's own Send would never produce.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "transport/ucx/ucx_context.h"
#include "transport/ucx/ucx_frame.h"
#include "transport/wire.h"

namespace syncline::testing {

class UcxRawClient {
 public:
  explicit UcxRawClient(const std::string& address) {
    auto context = ucx::Context::Open();
    EXPECT_TRUE(context.ok()) << context.status().ToString();
    if (!context.ok()) return;
    context_ = std::move(context).value();
    auto where = ucx::ParseAddress(address);
    EXPECT_TRUE(where.ok());
    if (!where.ok()) return;
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    params.sockaddr = where->resolved.ucs();
    params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    params.err_mode = context_->peer_failure_handling() ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    EXPECT_EQ(ucp_ep_create(context_->worker(), &params, &ep_), UCS_OK);
  }
  ~UcxRawClient() {
    if (ep_ == nullptr) return;
    Flush();
    ucp_request_param_t params{};
    params.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    params.flags = context_->peer_failure_handling() ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    Wait(ucp_ep_close_nbx(ep_, &params));
  }

  // Sends are complete before they are on the wire; this waits until they are.
  void Flush() {
    if (ep_ == nullptr) return;
    ucp_request_param_t flush{};
    Wait(ucp_ep_flush_nbx(ep_, &flush));
  }

  // One active message under Syncline's id, with any AM header and data.
  void SendAm(const std::string& am_header, const std::string& data, uint32_t flags = 0) {
    if (ep_ == nullptr) return;
    ucp_request_param_t params{};
    params.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    params.flags = UCP_AM_SEND_FLAG_REPLY | flags;
    Wait(ucp_am_send_nbx(ep_, ucx::kAmId, am_header.data(), am_header.size(), data.data(), data.size(), &params));
  }

  // A message laid out as UcxEndpoint lays it out, whatever `header` holds.
  void SendFrames(const std::string& header, const std::vector<std::string>& payloads) {
    std::vector<size_t> sizes;
    for (const std::string& p : payloads) sizes.push_back(p.size());
    ucx::EncodedFrames f = ucx::EncodeFrames(header, sizes, 4096);
    std::string data = f.data_prefix;
    for (const std::string& p : payloads) data += p;
    SendAm(f.am_header, data);
  }

  // The AM header of a well-formed message carrying `m`'s header and frame sizes.
  static std::string AmHeader(const Message& m) {
    std::vector<size_t> sizes;
    for (const Buffer& b : m.payloads) sizes.push_back(b.size());
    return ucx::EncodeFrames(EncodeHeader(m.header), sizes, 1 << 16).am_header;
  }

 private:
  void Wait(ucs_status_ptr_t request) {
    if (request == nullptr || UCS_PTR_IS_ERR(request)) return;
    const auto end = Clock::now() + std::chrono::seconds(10);
    while (ucp_request_check_status(request) == UCS_INPROGRESS && Clock::now() < end)
      ucp_worker_progress(context_->worker());
    ucp_request_free(request);
  }

  std::unique_ptr<ucx::Context> context_;
  ucp_ep_h ep_ = nullptr;
};

}  // namespace syncline::testing
