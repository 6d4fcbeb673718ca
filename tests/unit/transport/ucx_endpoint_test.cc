// What is particular to UCX: bad addresses, a clear error when no RDMA device
// exists, the factory's endpoints across transports, and the settings that
// pick UCX. What every Endpoint must do (listen errors, peers that are not
// there or stuck, traffic, forged active messages) is checked over UCX_TLS=tcp,
// sm, tcp,sm and UCX's default by endpoint_conformance_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/settings.h"
#include "tests/unit/transport/collector.h"
#include "tests/unit/transport/ucx_test_util.h"
#include "transport/factory.h"

namespace syncline {
namespace {

using ::testing::HasSubstr;
using namespace syncline::testing;

TEST(UcxEndpointTest, BadAddressesAreInvalidArguments) {
  auto e = NewEndpoint();
  EXPECT_EQ(e->Listen("tcp://127.0.0.1:0", [](Message&&) {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e->Connect(1, "ucx://127.0.0.1").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e->Connect(1, "ucx://127.0.0.1:99999").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e->Connect(1, "ucx://no-such-host.invalid:5").code(), StatusCode::kUnavailable);
}

TEST(UcxEndpointTest, NoRdmaDeviceIsAClearErrorNotACrash) {
  for (const char* tls : {"rc", "ud", "dc_x"}) {
    ScopedTls scoped(tls);
    auto e = CreateUcxEndpoint();
    ASSERT_FALSE(e.ok()) << tls << ": this machine has an RDMA device; nothing to test";
    EXPECT_EQ(e.status().code(), StatusCode::kUnavailable);
    EXPECT_THAT(e.status().message(), HasSubstr("no usable transport"));
    EXPECT_THAT(e.status().message(), HasSubstr(std::string("UCX_TLS=") + tls));
    EXPECT_THAT(e.status().message(), HasSubstr("RDMA"));
  }
}

TEST(UcxFactoryTest, EndpointsReachPeersOfEitherTransport) {
  // A node whose data plane is UCX registers with a scheduler on ZeroMQ TCP,
  // and the scheduler answers it over UCX.
  auto node = CreateEndpoint("ucx");
  auto scheduler = CreateEndpoint("tcp");
  ASSERT_TRUE(node.ok() && scheduler.ok());
  Collector node_in, scheduler_in;
  auto node_address = (*node)->Listen(*ListenAddress("ucx", "127.0.0.1", 0), node_in.receiver());
  auto scheduler_address = (*scheduler)->Listen("tcp://127.0.0.1:0", scheduler_in.receiver());
  ASSERT_TRUE(node_address.ok() && scheduler_address.ok());
  ASSERT_EQ(node_address->rfind("ucx://", 0), 0u);
  ASSERT_TRUE((*node)->Connect(0, *scheduler_address).ok());
  ASSERT_TRUE((*node)->Send(0, MakeMessage(proto::HEARTBEAT, 7), Soon()).ok());
  ASSERT_TRUE(scheduler_in.WaitFor(1));
  ASSERT_TRUE((*scheduler)->Connect(7, *node_address).ok());
  ASSERT_TRUE((*scheduler)->Send(7, Push(3, {Pattern(1 << 20, 3)}), Soon()).ok());
  ASSERT_TRUE(node_in.WaitFor(1));
  EXPECT_TRUE(SameBytes(node_in.at(0).payloads[0], Pattern(1 << 20, 3)));
  EXPECT_EQ((*scheduler)->stats().messages_sent, 1u);
  EXPECT_EQ((*node)->stats().messages_received, 1u);
  EXPECT_EQ((*node)->Send(99, MakeMessage(proto::HEARTBEAT, 7), Soon()).code(), StatusCode::kNotFound);
  (*node)->Close();
  (*scheduler)->Close();
}

TEST(UcxFactoryTest, NoRdmaDeviceFailsEndpointCreationWithTheReason) {
  ScopedTls scoped("rc");
  auto e = CreateEndpoint("ucx");
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(e.status().message(), HasSubstr("no usable transport"));
}

// The BytePS/ps-lite switches for RDMA and UCX select the ucx transport.
TEST(UcxSettingsTest, DmlcEnableRdmaAndUcxSelectUcxUnlessTheTransportIsSet) {
  auto from = [](Environment env) { return Settings::FromEnvironment(env); };
  EXPECT_EQ(from({})->transport, "tcp");
  EXPECT_EQ(from({{"SYNCLINE_TRANSPORT", "ucx"}})->transport, "ucx");
  EXPECT_EQ(from({{"DMLC_ENABLE_RDMA", "1"}})->transport, "ucx");
  EXPECT_EQ(from({{"DMLC_ENABLE_RDMA", "ibverbs"}})->transport, "ucx");
  EXPECT_EQ(from({{"DMLC_ENABLE_UCX", "true"}})->transport, "ucx");
  EXPECT_EQ(from({{"DMLC_ENABLE_UCX", "0"}})->transport, "tcp");
  EXPECT_EQ(from({{"DMLC_ENABLE_RDMA", "1"}, {"SYNCLINE_TRANSPORT", "ipc"}})->transport, "ipc");
  auto bad = from({{"DMLC_ENABLE_RDMA", "fabric"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("DMLC_ENABLE_RDMA"));
  std::vector<std::string> warnings;
  ASSERT_TRUE(Settings::FromEnvironment({{"DMLC_ENABLE_UCX", "1"}}, &warnings).ok());
  EXPECT_TRUE(warnings.empty()) << warnings.front();  // a known name, not "ignored"
}

}  // namespace
}  // namespace syncline
