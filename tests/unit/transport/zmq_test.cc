// ZmqEndpoint: what is particular to it — its address schemes, its message
// size limit, and messages queued for a peer that is not listening yet.
// What every Endpoint must do is checked over zmq tcp and ipc (and shared
// memory over zmq tcp) by endpoint_conformance_test.cc.
#include "transport/zmq/zmq_endpoint.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "tests/unit/transport/collector.h"
#include "tests/unit/transport/messages.h"
#include "transport/wire.h"

namespace syncline {
namespace {

using testing::Collector;
using testing::Pattern;
using testing::Push;

Deadline Soon() { return Deadline::AfterMs(5000); }

TEST(ZmqEndpointTest, NonZmqSchemeIsInvalidArgument) {
  auto e = CreateZmqEndpoint();
  auto st = e->Listen("loop://x", [](Message&&) {});
  EXPECT_EQ(st.status().code(), StatusCode::kInvalidArgument);
}

TEST(ZmqEndpointTest, MessagesOverTheSizeLimitAreRefusedWithoutHarm) {
  ZmqOptions options;
  options.max_message_bytes = 1024;
  Collector in;
  auto server = CreateZmqEndpoint(options);
  auto address = server->Listen("tcp://127.0.0.1:0", in.receiver());
  ASSERT_TRUE(address.ok());
  auto big_sender = CreateZmqEndpoint();
  ASSERT_TRUE(big_sender->Connect(1, *address).ok());
  ASSERT_TRUE(big_sender->Send(1, Push(1, {Pattern(4096, 1)}), Soon()).ok());
  auto small_sender = CreateZmqEndpoint();
  ASSERT_TRUE(small_sender->Connect(1, *address).ok());
  ASSERT_TRUE(small_sender->Send(1, Push(2, {Pattern(512, 2)}), Soon()).ok());
  ASSERT_TRUE(in.WaitFor(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in.at(0).header.key(), 2u);
}

TEST(ZmqEndpointTest, MessagesQueuedBeforeThePeerListensAreDelivered) {
  // Reserve a port, free it, connect to it before anyone listens there.
  auto probe = CreateZmqEndpoint();
  auto address = probe->Listen("tcp://127.0.0.1:0", [](Message&&) {});
  ASSERT_TRUE(address.ok());
  probe->Close();
  auto sender = CreateZmqEndpoint();
  ASSERT_TRUE(sender->Connect(1, *address).ok());
  ASSERT_TRUE(sender->Send(1, MakeMessage(proto::HEARTBEAT, 3), Soon()).ok());
  Collector in;
  auto late = CreateZmqEndpoint();
  auto st = late->Listen(*address, in.receiver());
  if (!st.ok()) GTEST_SKIP() << "port was taken in between: " << st.status().ToString();
  EXPECT_TRUE(in.WaitFor(1, 5000));
}

TEST(ZmqEndpointTest, AStaleIpcSocketFileIsTakenOver) {
  // A socket file whose process died: it exists, but nobody accepts on it.
  const std::string path = "/tmp/syncline-zmq-test-stale-" + std::to_string(getpid()) + ".sock";
  unlink(path.c_str());
  sockaddr_un su{};
  su.sun_family = AF_UNIX;
  std::strncpy(su.sun_path, path.c_str(), sizeof(su.sun_path) - 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&su), sizeof(su)), 0) << strerror(errno);
  close(fd);  // the file stays behind
  ASSERT_EQ(access(path.c_str(), F_OK), 0);
  Collector in;
  auto e = CreateZmqEndpoint();
  auto address = e->Listen("ipc://" + path, in.receiver());
  ASSERT_TRUE(address.ok()) << address.status().ToString();
  auto sender = CreateZmqEndpoint();
  ASSERT_TRUE(sender->Connect(1, *address).ok());
  ASSERT_TRUE(sender->Send(1, MakeMessage(proto::HEARTBEAT, 3), Soon()).ok());
  EXPECT_TRUE(in.WaitFor(1, 5000));
  // And while it listens, the path is in use.
  auto second = CreateZmqEndpoint();
  auto taken = second->Listen("ipc://" + path, [](Message&&) {});
  EXPECT_EQ(taken.status().code(), StatusCode::kUnavailable);
  sender->Close();
  e->Close();
  unlink(path.c_str());
}

}  // namespace
}  // namespace syncline
