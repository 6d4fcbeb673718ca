// The UCX backend's pure parts: how a message is laid out as an active
// message, and which UCX features the transports in UCX_TLS allow.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "transport/ucx/ucx_context.h"
#include "transport/ucx/ucx_frame.h"

namespace syncline {
namespace {

TEST(UcxTransportChoiceTest, SharedMemoryGoesWithoutPeerFailureHandlingAndGetsTcpForConnections) {
  auto all = ucx::ChooseTransports("");
  EXPECT_TRUE(all.peer_failure_handling);
  EXPECT_FALSE(all.added_tcp);
  auto tcp = ucx::ChooseTransports("tcp");
  EXPECT_TRUE(tcp.peer_failure_handling);
  EXPECT_EQ(tcp.tls, "tcp");
  auto sm = ucx::ChooseTransports("sm");
  EXPECT_FALSE(sm.peer_failure_handling);
  EXPECT_TRUE(sm.added_tcp);
  EXPECT_EQ(sm.tls, "sm,tcp");
  auto both = ucx::ChooseTransports("tcp,sm");
  EXPECT_FALSE(both.peer_failure_handling);
  EXPECT_FALSE(both.added_tcp);
  EXPECT_TRUE(ucx::ChooseTransports("rc,ud").peer_failure_handling);
  EXPECT_TRUE(ucx::ChooseTransports("^ib").peer_failure_handling);
}

TEST(UcxFrameTest, EncodeDecodeRoundTripInTheHeaderAndInTheData) {
  const std::string header = "encoded header bytes";
  const std::vector<size_t> sizes = {0, 3, 5};
  for (size_t limit : {size_t{1} << 16, size_t{16}}) {
    ucx::EncodedFrames f = ucx::EncodeFrames(header, sizes, limit);
    EXPECT_EQ(f.data_prefix.empty(), limit > 16);
    std::string data = f.data_prefix + "abcdefgh";
    Buffer buffer = Buffer::Copy(data.data(), data.size());
    auto am = reinterpret_cast<const uint8_t*>(f.am_header.data());
    ASSERT_TRUE(ucx::CheckPreamble(am, f.am_header.size(), data.size()).ok());
    auto decoded = ucx::DecodeFrames(am, f.am_header.size(), buffer);
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(decoded->header), decoded->header_size), header);
    ASSERT_EQ(decoded->payloads.size(), 3u);
    EXPECT_EQ(decoded->payloads[0].size(), 0u);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(decoded->payloads[1].data()), 3), "abc");
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(decoded->payloads[2].data()), 5), "defgh");
  }
}

TEST(UcxFrameTest, RandomBytesNeverDecode) {
  std::mt19937 gen(11);
  for (int i = 0; i < 20000; ++i) {
    std::string am(gen() % 64, '\0');
    for (char& c : am) c = static_cast<char>(gen());
    if (am.size() >= 4 && i % 2) std::memcpy(am.data(), "SYN1", 4);  // get past the magic half the time
    std::string data(gen() % 64, 'd');
    Buffer buffer = Buffer::Copy(data.data(), data.size());
    auto decoded = ucx::DecodeFrames(reinterpret_cast<const uint8_t*>(am.data()), am.size(), buffer);
    if (decoded.ok()) {  // only if every size checks out
      size_t total = 0;
      for (const Buffer& b : decoded->payloads) total += b.size();
      EXPECT_LE(total, data.size());
    }
  }
}

}  // namespace
}  // namespace syncline
