// One UcxEndpoint at a time: listen errors, bad addresses, peers that are not
// there, a full send queue, and a clear error when no RDMA device exists; the
// factory's endpoints across transports, and the settings that pick UCX.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "common/settings.h"
#include "tests/unit/transport/collector.h"
#include "tests/unit/transport/ucx_test_util.h"
#include "transport/factory.h"

namespace syncline {
namespace {

using ::testing::HasSubstr;
using namespace syncline::testing;

TEST(UcxEndpointTest, ListeningOnAPortInUseIsUnavailableNamingTheAddress) {
  Collector in;
  auto first = NewEndpoint();
  auto address = first->Listen("ucx://127.0.0.1:0", in.receiver());
  ASSERT_TRUE(address.ok());
  auto second = NewEndpoint();
  auto st = second->Listen(*address, [](Message&&) {});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(st.status().message(), HasSubstr("address " + *address + " is already in use"));
  second->Close();
  auto sender = NewEndpoint();
  ASSERT_TRUE(sender->Connect(1, *address).ok());
  ASSERT_TRUE(sender->Send(1, MakeMessage(proto::HEARTBEAT, 5), Soon()).ok());
  EXPECT_TRUE(in.WaitFor(1));
}

TEST(UcxEndpointTest, ListeningOnAPortHeldByAPlainSocketIsUnavailable) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(sa);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len), 0);
  const std::string address = "ucx://127.0.0.1:" + std::to_string(ntohs(sa.sin_port));
  auto e = NewEndpoint();
  auto st = e->Listen(address, [](Message&&) {});
  close(fd);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(st.status().message(), HasSubstr(address + " is already in use"));
}

TEST(UcxEndpointTest, BadAddressesAreInvalidArguments) {
  auto e = NewEndpoint();
  EXPECT_EQ(e->Listen("tcp://127.0.0.1:0", [](Message&&) {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e->Connect(1, "ucx://127.0.0.1").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e->Connect(1, "ucx://127.0.0.1:99999").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e->Connect(1, "ucx://no-such-host.invalid:5").code(), StatusCode::kUnavailable);
}

TEST(UcxEndpointTest, AConnectionToNobodyIsLoggedAndItsMessagesDropped) {
  auto probe = NewEndpoint();
  auto address = probe->Listen("ucx://127.0.0.1:0", [](Message&&) {});
  ASSERT_TRUE(address.ok());
  probe->Close();  // nobody listens there now
  auto e = NewEndpoint();
  ASSERT_TRUE(e->Connect(1, *address).ok());
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(e->Send(1, Push(i, {Pattern(1 << 16, i)}), Soon()).ok());
  e->Close();  // and closing does not hang on them
}

TEST(UcxEndpointTest, AFullSendQueueIsDeadlineExceeded) {
  UcxOptions options;
  options.send_queue_messages = 4;
  auto e = NewEndpoint(options);
  // The sink's Receiver is slow, so its progress thread (which completes
  // rendezvous transfers) falls behind and the sender's messages stay in flight.
  auto sink = NewEndpoint();
  auto address = sink->Listen("ucx://127.0.0.1:0", [](Message&&) { std::this_thread::sleep_for(Millis(200)); });
  ASSERT_TRUE(address.ok());
  ASSERT_TRUE(e->Connect(1, *address).ok());
  Status last;
  for (int i = 0; i < 64 && last.ok(); ++i) last = e->Send(1, Push(i, {Pattern(4 << 20, i)}), Deadline::AfterMs(50));
  EXPECT_EQ(last.code(), StatusCode::kDeadlineExceeded) << last.ToString();
  EXPECT_THAT(last.message(), HasSubstr("is full"));
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
