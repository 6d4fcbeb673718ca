// The endpoint stack of a job with a token and shared memory (NodeRuntime's
// order: ShmEndpoint over AuthenticatedEndpoint over the transport), over the
// loopback transport: a shared-memory reference is acted on only once its
// sender is proven, the proof covers the reference, and whole messages
// through a header ring are checked as well.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <numeric>
#include <optional>

#include "common/mutex.h"
#include "control/authenticated_endpoint.h"
#include "tests/unit/transport/collector.h"
#include "transport/loopback/loopback_network.h"
#include "transport/shm/shm_endpoint.h"
#include "transport/wire.h"

namespace syncline {
namespace {

using testing::Collector;
using testing::Eventually;

Deadline Soon() { return Deadline::AfterMs(5000); }

std::vector<uint8_t> Bytes(size_t n, uint8_t first) {
  std::vector<uint8_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

Message Push(int32_t sender, uint64_t id, size_t bytes) {
  Message m = MakeMessage(proto::PUSH, sender);
  m.header.set_key(id);
  m.header.set_request_id(id);
  m.header.set_dtype(proto::FLOAT32);
  const std::vector<uint8_t> v = Bytes(bytes, uint8_t(id));
  m.payloads.push_back(Buffer::Copy(v.data(), v.size()));
  m.header.set_byte_length(bytes);
  return m;
}

// Signs with a key ring of its own, not the one the pair shares: stands for
// whoever writes records into a header ring without the key.
class ForgingAuthenticator : public HeaderAuthenticator {
 public:
  ForgingAuthenticator() { keys_.SetPeerKey(2, RandomKey()); }
  Status Sign(PeerId peer, proto::Header* header) override { return keys_.Sign(peer, header); }
  Status Check(proto::Header* header) override { return keys_.Check(header); }

 private:
  KeyRing keys_;
};

// Signs the first header-ring record with the real key ring, then puts that
// signed header into every later record: stands for whoever copies a genuine
// record back into the ring.
class ReplayingAuthenticator : public HeaderAuthenticator {
 public:
  void Bind(HeaderAuthenticator* real) {
    MutexLock lock(mu_);
    real_ = real;
  }
  Status Sign(PeerId peer, proto::Header* header) override {
    MutexLock lock(mu_);
    if (recorded_) {
      *header = *recorded_;
      return Status::Ok();
    }
    SYNCLINE_RETURN_IF_ERROR(real_->Sign(peer, header));
    recorded_ = *header;
    return Status::Ok();
  }
  Status Check(proto::Header* header) override {
    MutexLock lock(mu_);
    return real_->Check(header);
  }

 private:
  Mutex mu_;
  HeaderAuthenticator* real_ GUARDED_BY(mu_) = nullptr;
  std::optional<proto::Header> recorded_ GUARDED_BY(mu_);
};

// Node 1 (a worker) and node 2 (a server) on one machine, sharing a key; an
// outsider on the same network without it.
class AuthenticatedShmTest : public ::testing::Test {
 protected:
  // `a_ring`: what signs a's header-ring messages (a's own key ring if null).
  void Start(HeaderAuthenticator* a_ring = nullptr) {
    const SecretKey k = RandomKey();
    a_keys_ = std::make_shared<KeyRing>();
    b_keys_ = std::make_shared<KeyRing>();
    a_keys_->SetPeerKey(2, k);
    b_keys_->SetPeerKey(1, k);
    a_keys_->MarkComplete();
    b_keys_->MarkComplete();
    a_ = std::make_unique<ShmEndpoint>(std::make_unique<AuthenticatedEndpoint>(net_.CreateEndpoint(), a_keys_),
                                       ShmOptions{}, a_ring != nullptr ? a_ring : a_keys_.get());
    b_ = std::make_unique<ShmEndpoint>(std::make_unique<AuthenticatedEndpoint>(net_.CreateEndpoint(), b_keys_),
                                       ShmOptions{}, b_keys_.get());
    outsider_ = net_.CreateEndpoint();
    ASSERT_TRUE(a_->Listen("loop://a", a_in_.receiver()).ok());
    ASSERT_TRUE(b_->Listen("loop://b", b_in_.receiver()).ok());
    ASSERT_TRUE(outsider_->Listen("loop://outsider", outsider_in_.receiver()).ok());
    ASSERT_TRUE(a_->Connect(2, "loop://b").ok());
    ASSERT_TRUE(b_->Connect(1, "loop://a").ok());
    ASSERT_TRUE(outsider_->Connect(2, "loop://b").ok());
    a_->MarkColocated(2, getpid());
    b_->MarkColocated(1, getpid());
    a_->PeersComplete();
    b_->PeersComplete();
  }

  // A message from a through the socket, after which b maps a's segment and
  // reads its header ring; then small messages until at least 3 went
  // through the ring. `*ring_sent`: how many did.
  void SendThroughTheRing(uint64_t* ring_sent) {
    ASSERT_TRUE(a_->Send(2, Push(1, 0, 64 << 10), Soon()).ok());
    ASSERT_TRUE(b_in_.WaitFor(1));
    ASSERT_TRUE(Eventually([&] {
      (void)a_->Send(2, Push(1, 1, 64), Soon());
      return a_->shm_stats().ring_messages_sent >= 3;
    }));
    *ring_sent = a_->shm_stats().ring_messages_sent;
  }

  LoopbackNetwork net_;
  std::shared_ptr<KeyRing> a_keys_, b_keys_;
  std::unique_ptr<ShmEndpoint> a_, b_;
  std::unique_ptr<Endpoint> outsider_;
  Collector a_in_, b_in_, outsider_in_;
};

TEST_F(AuthenticatedShmTest, GenuineTrafficMovesThroughTheSegmentAndTheRingIntact) {
  Start();
  // Through the socket until b has mapped a's segment and reads its ring; then through the ring.
  int sent = 0;
  ASSERT_TRUE(Eventually([&] {
    EXPECT_TRUE(a_->Send(2, Push(1, sent, 64 << 10), Soon()).ok());
    ++sent;
    return a_->shm_stats().ring_messages_sent >= 5;
  })) << "b never attached a's header ring";
  ASSERT_TRUE(b_in_.WaitFor(sent));
  std::vector<Message> got = b_in_.TakeAll();
  ASSERT_EQ(got.size(), size_t(sent));
  for (int n = 0; n < sent; ++n) {
    ASSERT_EQ(got[n].header.request_id(), uint64_t(n));
    ASSERT_EQ(got[n].payloads.size(), 1u);
    const std::vector<uint8_t> want = Bytes(64 << 10, uint8_t(n));
    EXPECT_EQ(std::memcmp(got[n].payloads[0].data(), want.data(), want.size()), 0) << "message " << n;
  }
  EXPECT_EQ(b_->shm_stats().ring_messages_received, a_->shm_stats().ring_messages_sent);
  EXPECT_EQ(b_->stats().messages_unauthenticated, 0u);
}

TEST_F(AuthenticatedShmTest, AnOutsidersReferenceToAPeersSegmentOpensNothing) {
  Start();
  // A real segment of this process (the pid b accepts for node 1), with a
  // payload in slot 0, as an outsider listing node 1's descriptors finds it.
  auto box = Outbox::Create(size_t{1} << 20);
  ASSERT_TRUE(box.ok()) << box.status().ToString();
  const std::vector<uint8_t> bytes = Bytes(64, 1);
  auto placed = (*box)->Place({Buffer::Copy(bytes.data(), bytes.size())}, bytes.size());
  ASSERT_TRUE(placed.has_value());
  auto forge = [&](uint64_t offset) {
    Message m = MakeMessage(proto::PUSH, 1);  // in node 1's name
    m.header.set_dtype(proto::FLOAT32);
    m.header.set_byte_length(8);
    proto::ShmRef* ref = m.header.mutable_shm();
    ref->set_pid(getpid());
    ref->set_fd((*box)->fd());
    ref->set_segment_bytes((*box)->segment_bytes());
    ref->set_slot(placed->slot);
    ref->set_offset(offset);
    ref->add_frame_lengths(8);
    return m;
  };
  // Without any proof; with a proof under a key of its own; and one whose
  // offset is out of range (which a reader would answer by releasing the slot).
  ASSERT_TRUE(outsider_->Send(2, forge(placed->offset), Soon()).ok());
  KeyRing outsider_keys;
  outsider_keys.SetPeerKey(2, RandomKey());
  Message signed_forgery = forge(uint64_t{1} << 40);
  ASSERT_TRUE(outsider_keys.Sign(2, &signed_forgery.header).ok());
  ASSERT_TRUE(outsider_->Send(2, std::move(signed_forgery), Soon()).ok());
  ASSERT_TRUE(Eventually([&] { return b_->stats().messages_unauthenticated == 2; }))
      << b_->stats().messages_unauthenticated;
  EXPECT_FALSE((*box)->ring_attached()) << "b mapped the segment and started a reader for an unproven message";
  EXPECT_EQ(b_->shm_stats().messages_received, 0u);
  EXPECT_EQ(b_in_.size(), 0u);

  // The proof covers the reference: node 1's own signed message, its
  // reference rewritten on the way, is refused too.
  Message real = forge(placed->offset);
  ASSERT_TRUE(a_keys_->Sign(2, &real.header).ok());
  real.header.mutable_shm()->set_offset(uint64_t{1} << 40);
  ASSERT_TRUE(outsider_->Send(2, std::move(real), Soon()).ok());
  ASSERT_TRUE(Eventually([&] { return b_->stats().messages_unauthenticated == 3; }));
  EXPECT_FALSE((*box)->ring_attached());

  // And the pair's own traffic is untouched.
  ASSERT_TRUE(a_->Send(2, Push(1, 8, 64 << 10), Soon()).ok());
  ASSERT_TRUE(b_in_.WaitFor(1));
  EXPECT_EQ(b_in_.at(0).header.request_id(), 8u);
}

TEST_F(AuthenticatedShmTest, HeaderRingRecordsWithoutTheKeyAreDroppedAndCounted) {
  ForgingAuthenticator forger;
  Start(&forger);  // a's socket messages carry its real proof; its ring records a forged one
  uint64_t ring_sent = 0;
  ASSERT_NO_FATAL_FAILURE(SendThroughTheRing(&ring_sent));
  ASSERT_TRUE(Eventually([&] { return b_->stats().messages_unauthenticated >= ring_sent; }))
      << b_->stats().messages_unauthenticated << " of " << ring_sent;
  EXPECT_EQ(b_->shm_stats().ring_messages_received, 0u);
  // Everything else a sent came through the socket, with its real proof, and arrived.
  EXPECT_TRUE(Eventually([&] { return b_in_.size() + ring_sent == a_->stats().messages_sent; }))
      << b_in_.size() << " + " << ring_sent << " != " << a_->stats().messages_sent;
}

TEST_F(AuthenticatedShmTest, AReplayedHeaderRingRecordIsDroppedAndCounted) {
  ReplayingAuthenticator replayer;
  Start(&replayer);  // a's first ring record is genuine; every later one repeats its proof
  replayer.Bind(a_keys_.get());
  uint64_t ring_sent = 0;
  ASSERT_NO_FATAL_FAILURE(SendThroughTheRing(&ring_sent));
  ASSERT_TRUE(Eventually([&] { return b_->stats().messages_unauthenticated >= ring_sent - 1; }))
      << b_->stats().messages_unauthenticated << " of " << ring_sent - 1;
  EXPECT_EQ(b_->shm_stats().ring_messages_received, 1u);
  EXPECT_TRUE(Eventually([&] { return b_in_.size() + ring_sent - 1 == a_->stats().messages_sent; }))
      << b_in_.size() << " + " << ring_sent - 1 << " != " << a_->stats().messages_sent;
}

}  // namespace
}  // namespace syncline
