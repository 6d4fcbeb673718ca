// Shared memory between colocated processes: the header ring and the outbox's
// reuse of released bytes on their own, and ShmEndpoint over the loopback
// transport (both ends in this process, which opens its own segments through
// /proc/self like a peer would): payloads through the segment, the switch of
// headers from the socket to the ring without reordering, and what a full
// outbox does.
#include "transport/shm/shm_endpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

#include "tests/unit/transport/collector.h"
#include "tests/unit/transport/messages.h"
#include "transport/loopback/loopback_network.h"

namespace syncline {
namespace {

using testing::Collector;
using testing::Pattern;
using testing::SameBytes;

std::string Text(size_t n, char c) { return std::string(n, c); }

TEST(HeaderRingTest, RecordsComeOutInOrderAcrossTheWrap) {
  auto ring = std::make_unique<HeaderRing>();
  ring->Init();
  std::string got;
  EXPECT_EQ(ring->Next(&got), HeaderRing::Take::kEmpty);
  // Ten times the ring's size in records of every alignment, read as they go.
  size_t posted = 0, taken = 0;
  for (size_t i = 0; posted < 10 * HeaderRing::kBytes; ++i) {
    const std::string record = Text(1 + i % 97 * 13, static_cast<char>('a' + i % 26));
    ASSERT_TRUE(ring->Post(record));
    posted += record.size();
    ASSERT_EQ(ring->Next(&got), HeaderRing::Take::kRecord);
    ASSERT_EQ(got, record) << "record " << i;
    taken += got.size();
  }
  EXPECT_EQ(posted, taken);
  EXPECT_EQ(ring->Next(&got), HeaderRing::Take::kEmpty);
}

TEST(HeaderRingTest, FullRingRefusesUntilTheReaderCatchesUp) {
  auto ring = std::make_unique<HeaderRing>();
  ring->Init();
  const std::string record = Text(1000, 'x');
  int accepted = 0;
  while (ring->Post(record)) ++accepted;
  EXPECT_EQ(accepted, static_cast<int>(HeaderRing::kBytes / 1008));  // 4-byte length, padded to 8
  EXPECT_FALSE(ring->Post(Text(HeaderRing::kMaxRecordBytes + 1, 'y'))) << "larger than any record may be";
  std::string got;
  ASSERT_EQ(ring->Next(&got), HeaderRing::Take::kRecord);
  EXPECT_TRUE(ring->Post(record));
  for (int i = 0; i < accepted; ++i) ASSERT_EQ(ring->Next(&got), HeaderRing::Take::kRecord);
  EXPECT_EQ(ring->Next(&got), HeaderRing::Take::kEmpty);
}

TEST(HeaderRingTest, AWaitingReaderWakesOnAPost) {
  auto ring = std::make_unique<HeaderRing>();
  ring->Init();
  std::thread poster([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ring->Post("hello");
  });
  const auto start = std::chrono::steady_clock::now();
  std::string got;
  while (ring->Next(&got) == HeaderRing::Take::kEmpty &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(20))
    ring->Wait(10000);
  poster.join();
  EXPECT_EQ(got, "hello");
  // Woken by the post, not by the 10 s timeout.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(9));
}

// A receiver gives a slot back through its own mapping of the segment (in a
// job, from another process), and a sender thread other than the one that
// filled it may place over the same bytes next. Below, the three threads are
// ordered only through that hand-back and relaxed atomics, which order
// nothing for ThreadSanitizer: under TSan this fails (a race between the two
// copies) unless the outbox tells it about the hand-back. In every build it
// checks that the released bytes are the ones reused, holding the new payload.
TEST(OutboxTest, BytesAReceiverReleasedAreReusedByAnotherSenderThread) {
  constexpr size_t kBytes = 4096;  // the whole data area: the second placement fits only once the first is released
  auto made = Outbox::Create(kBytes);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  Outbox& box = **made;
  auto peer = PeerSegment::Open(getpid(), box.fd(), box.segment_bytes());
  ASSERT_TRUE(peer.ok()) << peer.status().ToString();
  std::atomic<int> stage{0};  // 1: first placed, 2: released, 3: second placed
  std::atomic<bool> first_placed{false}, second_placed{false};
  std::atomic<uint64_t> first_offset{0}, first_slot{0}, second_offset{0};
  auto wait_for = [&](int s) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (stage.load(std::memory_order_relaxed) < s && std::chrono::steady_clock::now() < give_up)
      std::this_thread::yield();
    return stage.load(std::memory_order_relaxed) >= s;
  };
  std::thread first([&] {
    auto placed = box.Place({Pattern(kBytes, 1)}, kBytes);
    if (placed) {
      first_offset.store(placed->offset, std::memory_order_relaxed);
      first_slot.store(placed->slot, std::memory_order_relaxed);
    }
    first_placed.store(placed.has_value(), std::memory_order_relaxed);
    stage.store(1, std::memory_order_relaxed);
    wait_for(3);  // alive (not joined) until the second copy is done
  });
  std::thread second([&] {
    if (!wait_for(2)) return;
    auto placed = box.Place({Pattern(kBytes, 2)}, kBytes);
    if (placed) second_offset.store(placed->offset, std::memory_order_relaxed);
    second_placed.store(placed.has_value(), std::memory_order_relaxed);
    stage.store(3, std::memory_order_relaxed);
  });
  if (wait_for(1) && first_placed.load(std::memory_order_relaxed)) {
    EXPECT_FALSE(box.Place({Pattern(kBytes, 9)}, kBytes).has_value()) << "placed over live bytes";
    (*peer)->Release(static_cast<uint32_t>(first_slot.load(std::memory_order_relaxed)));
  }
  stage.store(2, std::memory_order_relaxed);
  second.join();
  stage.store(3, std::memory_order_relaxed);
  first.join();
  ASSERT_TRUE(first_placed.load());
  ASSERT_TRUE(second_placed.load()) << "the released bytes were not reclaimed";
  EXPECT_EQ(second_offset.load(), first_offset.load());
  auto bytes = (*peer)->At(second_offset.load(), kBytes);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(std::memcmp(*bytes, Pattern(kBytes, 2).data(), kBytes), 0) << "the second payload is not what landed";
}

class ShmEndpointTest : public ::testing::Test {
 protected:
  // `b_receiver`, if given, is b's Receiver instead of b_in_'s. Unless
  // `colocate` is false, each marks the other colocated, and that is all.
  void Start(ShmOptions options = {}, Endpoint::Receiver b_receiver = nullptr, bool colocate = true) {
    a_ = std::make_unique<ShmEndpoint>(net_.CreateEndpoint(), options);
    b_ = std::make_unique<ShmEndpoint>(net_.CreateEndpoint(), options);
    ASSERT_TRUE(a_->Listen("loop://a", a_in_.receiver()).ok());
    ASSERT_TRUE(b_->Listen("loop://b", b_receiver ? std::move(b_receiver) : b_in_.receiver()).ok());
    ASSERT_TRUE(a_->Connect(2, "loop://b").ok());
    ASSERT_TRUE(b_->Connect(1, "loop://a").ok());
    if (!colocate) return;
    a_->MarkColocated(2, getpid());
    b_->MarkColocated(1, getpid());
    a_->PeersComplete();
    b_->PeersComplete();
  }

  static Message Numbered(uint64_t n, size_t bytes) {
    Message m = testing::Push(n, {Pattern(bytes, static_cast<uint32_t>(n))});
    m.header.set_request_id(n);
    return m;
  }

  static Message HeaderOnly(uint64_t n) {
    Message m = MakeMessage(proto::HEARTBEAT, 1);
    m.header.set_request_id(n);
    return m;
  }

  LoopbackNetwork net_;
  Collector a_in_, b_in_;
  std::unique_ptr<ShmEndpoint> a_, b_;
};

TEST_F(ShmEndpointTest, HeadersMoveToTheRingWithoutReorderingAnything) {
  // b is slow with the first messages, which come through the socket, so
  // that a has switched to the ring while they are still being delivered.
  Endpoint::Receiver collect = b_in_.receiver();
  Start({}, [collect](Message&& m) {
    if (m.header.request_id() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    collect(std::move(m));
  });
  // Until the ring is in use, large messages (and the first small one) go
  // through the segment with their header on the socket, and small ones
  // whole through the socket; sent back to back, they must arrive in order
  // and intact whichever way each went.
  constexpr uint64_t kMessages = 400;
  const auto size_of = [](uint64_t n) -> size_t { return n % 3 == 0 ? 64 * 1024 : 2 * (1 + n % 50); };
  for (uint64_t n = 0; n < kMessages; ++n) {
    ASSERT_TRUE(a_->Send(2, Numbered(n, size_of(n)), Deadline::AfterMs(5000)).ok()) << n;
    // b maps a's segment on receiving message 0 (and then sleeps in its Receiver).
    if (n == 1) {
      ASSERT_TRUE(testing::Eventually([&] { return b_->shm_stats().messages_received > 0; }));
    }
  }
  ASSERT_TRUE(b_in_.WaitFor(kMessages));
  std::vector<Message> got = b_in_.TakeAll();
  ASSERT_EQ(got.size(), kMessages);
  for (uint64_t n = 0; n < kMessages; ++n) {
    ASSERT_EQ(got[n].header.request_id(), n) << "message " << n << " arrived out of order";
    ASSERT_EQ(got[n].payloads.size(), 1u);
    EXPECT_TRUE(SameBytes(got[n].payloads[0], Pattern(size_of(n), static_cast<uint32_t>(n)))) << n;
    EXPECT_FALSE(got[n].header.has_shm()) << "the receiver sees plain payload frames";
  }
  got.clear();
  const ShmEndpoint::ShmStats sent = a_->shm_stats(), received = b_->shm_stats();
  EXPECT_GE(sent.ring_messages_sent, kMessages - 2) << "once b maps a's segment, a should use its ring";
  EXPECT_EQ(received.ring_messages_received, sent.ring_messages_sent);
  EXPECT_EQ(b_->stats().messages_received, kMessages);
  EXPECT_EQ(a_->stats().messages_sent, kMessages);
  EXPECT_EQ(b_->stats().messages_rejected, 0u);
}

TEST_F(ShmEndpointTest, AFirstSmallPayloadMakesThePeerAttachTheRing) {
  // A job whose first tensors are small: the first payload, however small,
  // goes through the segment, so the peer maps it and the next message takes
  // the ring (it used to wait for a payload of min_bytes, on the socket).
  Start();
  ASSERT_TRUE(a_->Send(2, Numbered(0, 4), Deadline::AfterMs(5000)).ok());
  ASSERT_TRUE(b_in_.WaitFor(1));
  EXPECT_EQ(b_->shm_stats().messages_received, 1u);
  EXPECT_EQ(a_->shm_stats().ring_messages_sent, 0u);
  ASSERT_TRUE(a_->Send(2, Numbered(1, 4), Deadline::AfterMs(5000)).ok());
  ASSERT_TRUE(b_in_.WaitFor(2));
  EXPECT_EQ(a_->shm_stats().ring_messages_sent, 1u);
  std::vector<Message> got = b_in_.TakeAll();
  for (uint64_t n = 0; n < 2; ++n) {
    EXPECT_EQ(got.at(n).header.request_id(), n);
    EXPECT_TRUE(SameBytes(got.at(n).payloads.at(0), Pattern(4, static_cast<uint32_t>(n))));
  }
}

TEST_F(ShmEndpointTest, BothDirectionsSwitchAndHeaderOnlyMessagesFollow) {
  Start();
  for (uint64_t round = 0; round < 20; ++round) {
    ASSERT_TRUE(a_->Send(2, Numbered(round, 8192), Deadline::AfterMs(5000)).ok());
    ASSERT_TRUE(b_in_.WaitFor(round + 1));
    Message ack = MakeMessage(proto::PULL, 2);  // no payload at all
    ack.header.set_key(round);
    ack.header.set_dtype(proto::FLOAT32);
    ack.header.set_request_id(round);
    ASSERT_TRUE(b_->Send(1, std::move(ack), Deadline::AfterMs(5000)).ok());
    Message reply = Numbered(round, 4096);
    reply.header.set_sender(2);
    ASSERT_TRUE(b_->Send(1, std::move(reply), Deadline::AfterMs(5000)).ok());
    ASSERT_TRUE(a_in_.WaitFor(2 * (round + 1)));
  }
  std::vector<Message> at_a = a_in_.TakeAll();
  for (size_t i = 0; i < at_a.size(); ++i) {
    EXPECT_EQ(at_a[i].header.request_id(), i / 2);
    EXPECT_EQ(at_a[i].payloads.size(), i % 2 == 0 ? 0u : 1u);
  }
  EXPECT_GT(a_->shm_stats().ring_messages_sent, 0u);
  EXPECT_GT(b_->shm_stats().ring_messages_sent, 0u);
  EXPECT_EQ(a_->shm_stats().ring_messages_received, b_->shm_stats().ring_messages_sent);
}

// Sends `a` one message and a few more until a's ring is in use; returns how many.
size_t SwitchToTheRing(ShmEndpoint& a, Collector& b_in) {
  size_t sent = 0;
  const bool switched = testing::Eventually([&] {
    Message m = testing::Push(1, {Pattern(4096, 1)});
    m.header.set_request_id(0);
    sent += a.Send(2, std::move(m), Deadline::AfterMs(5000)).ok() ? 1 : 0;
    return a.shm_stats().ring_messages_sent > 0;
  });
  EXPECT_TRUE(switched && b_in.WaitFor(sent));
  return sent;
}

TEST_F(ShmEndpointTest, WithTheOutboxFullPayloadsTakeTheSocketInOrder) {
  ShmOptions options;
  options.outbox_bytes = 1 << 20;
  Start(options);
  const size_t first = SwitchToTheRing(*a_, b_in_);
  // b's collector holds every payload, so the 1 MiB outbox fills up after
  // three of these; the rest, and one larger than the whole outbox, go
  // through the socket, and so does nothing behind them overtake them.
  std::vector<size_t> sizes = {256 << 10, 256 << 10, 256 << 10, 256 << 10, 256 << 10, 2 << 20, 8, 256 << 10};
  for (size_t i = 0; i < sizes.size(); ++i)
    ASSERT_TRUE(a_->Send(2, Numbered(100 + i, sizes[i]), Deadline::AfterMs(5000)).ok()) << i;
  ASSERT_TRUE(b_in_.WaitFor(first + sizes.size()));
  EXPECT_GE(a_->shm_stats().fallbacks, 3u);
  std::vector<Message> got = b_in_.TakeAll();  // dropping them gives the regions back to a
  for (size_t i = 0; i < sizes.size(); ++i) {
    const Message& m = got.at(first + i);
    EXPECT_EQ(m.header.request_id(), 100 + i);
    EXPECT_TRUE(SameBytes(m.payloads.at(0), Pattern(sizes[i], static_cast<uint32_t>(100 + i)))) << i;
  }
  got.clear();
  const uint64_t ring_before = a_->shm_stats().ring_messages_sent;
  ASSERT_TRUE(a_->Send(2, Numbered(999, 256 << 10), Deadline::AfterMs(5000)).ok());
  ASSERT_TRUE(b_in_.WaitFor(1));
  EXPECT_EQ(b_in_.at(0).header.request_id(), 999u);
  EXPECT_EQ(a_->shm_stats().ring_messages_sent, ring_before + 1) << "with room again, the ring carries it";
}

TEST_F(ShmEndpointTest, AFullRingMakesSendWaitForItsDeadlineAndLosesNothingBefore) {
  std::atomic<bool> hold{false};
  Endpoint::Receiver collect = b_in_.receiver();
  Start({}, [&hold, collect](Message&& m) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (hold.load() && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    collect(std::move(m));
  });
  const size_t first = SwitchToTheRing(*a_, b_in_);
  hold = true;  // b's poller stops in its Receiver: the ring is no longer read
  Status sent;
  uint64_t accepted = 0;
  while ((sent = a_->Send(2, Numbered(accepted, 0), Deadline::AfterMs(300))).ok() && accepted < 100000) ++accepted;
  EXPECT_EQ(sent.code(), StatusCode::kDeadlineExceeded) << sent.ToString();
  EXPECT_NE(sent.message().find("stayed full"), std::string::npos) << sent.message();
  EXPECT_GT(accepted, 100u) << "a 32 KiB ring holds hundreds of headers";
  hold = false;
  ASSERT_TRUE(b_in_.WaitFor(first + accepted));
  std::vector<Message> got = b_in_.TakeAll();
  ASSERT_EQ(got.size(), first + accepted) << "the message that timed out must not arrive";
  for (uint64_t n = 0; n < accepted; ++n) ASSERT_EQ(got[first + n].header.request_id(), n);
}

TEST_F(ShmEndpointTest, AReferenceFromAPeerNotMarkedYetWaitsForTheAddressBookWithWhatFollowsIt) {
  // a read its address book first (it marks b); b has not: a's reference,
  // and a's messages after it, wait until b knows its peers, then arrive in order.
  Start({}, nullptr, /*colocate=*/false);
  a_->MarkColocated(2, getpid());
  a_->PeersComplete();
  ASSERT_TRUE(a_->Send(2, Numbered(0, 8192), Deadline::AfterMs(5000)).ok());
  ASSERT_TRUE(a_->Send(2, Numbered(1, 16), Deadline::AfterMs(5000)).ok());
  EXPECT_FALSE(b_in_.WaitFor(1, 200)) << "b acted on a reference before it knew whether a shares its machine";
  b_->MarkColocated(1, getpid());
  b_->PeersComplete();
  ASSERT_TRUE(b_in_.WaitFor(2));
  std::vector<Message> got = b_in_.TakeAll();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].header.request_id(), 0u);
  EXPECT_EQ(got[1].header.request_id(), 1u);
  ASSERT_EQ(got[0].payloads.size(), 1u);
  EXPECT_EQ(std::memcmp(got[0].payloads[0].data(), Pattern(8192, 0).data(), 8192), 0);
  EXPECT_EQ(b_->shm_stats().messages_received, 2u) << "both payloads came through the segment";
}

TEST_F(ShmEndpointTest, AReferenceFromAPeerTheAddressBookDoesNotColocateIsRefusedAndNothingIsMapped) {
  Start({}, nullptr, /*colocate=*/false);
  a_->MarkColocated(2, getpid());  // a believes b shares its machine; b's address book says otherwise
  a_->PeersComplete();
  ASSERT_TRUE(a_->Send(2, Numbered(0, 8192), Deadline::AfterMs(5000)).ok());
  ASSERT_TRUE(a_->Send(2, HeaderOnly(1), Deadline::AfterMs(5000)).ok());
  b_->PeersComplete();
  ASSERT_TRUE(b_in_.WaitFor(1));
  EXPECT_EQ(b_in_.at(0).header.request_id(), 1u) << "the message without a reference still arrives";
  EXPECT_EQ(b_->stats().messages_rejected, 1u);
  EXPECT_EQ(b_->shm_stats().messages_received, 0u);
  // b never mapped a's segment, so it never attached the ring: a keeps the socket.
  for (uint64_t n = 2; n < 6; ++n) ASSERT_TRUE(a_->Send(2, HeaderOnly(n), Deadline::AfterMs(5000)).ok());
  ASSERT_TRUE(b_in_.WaitFor(5));
  EXPECT_EQ(a_->shm_stats().ring_messages_sent, 0u);
}

TEST_F(ShmEndpointTest, CloseStopsThePollersAndNothingIsDeliveredAfter) {
  Start();
  ASSERT_TRUE(a_->Send(2, Numbered(0, 8192), Deadline::AfterMs(5000)).ok());
  ASSERT_TRUE(b_in_.WaitFor(1));
  ASSERT_TRUE(testing::Eventually([&] {
    (void)a_->Send(2, Numbered(1, 8192), Deadline::AfterMs(5000));
    return a_->shm_stats().ring_messages_sent > 0;
  }));
  b_->Close();
  const size_t before = b_in_.size();
  const uint64_t ring_before = a_->shm_stats().ring_messages_sent;
  (void)a_->Send(2, Numbered(2, 8192), Deadline::AfterMs(200));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(b_in_.size(), before);
  EXPECT_EQ(a_->shm_stats().ring_messages_sent, ring_before) << "a closed receiver's ring is not used";
  a_->Close();
}

}  // namespace
}  // namespace syncline
