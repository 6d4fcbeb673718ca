// KeyRing: a signed header verifies once at its receiver; any change, the
// wrong key, a replay or a missing proof is refused; nodes without an id are
// checked by their nonce at the scheduler only.
#include "control/key_ring.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "transport/wire.h"

namespace syncline {
namespace {

using ::testing::HasSubstr;
using Verdict = KeyRing::Verdict;

proto::Header Push(int32_t sender, uint64_t key) {
  Message m = MakeMessage(proto::PUSH, sender);
  m.header.set_key(key);
  m.header.set_round(4);
  m.header.set_dtype(proto::FLOAT32);
  return m.header;
}

// Two nodes, 1 and 2, that share a key.
class KeyRingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const SecretKey k = RandomKey();
    a_.SetPeerKey(2, k);
    b_.SetPeerKey(1, k);
    b_.MarkComplete();
  }
  Verdict Check(proto::Header h, std::string* why = nullptr) {
    std::string ignored;
    return b_.Verify(&h, why ? why : &ignored);
  }
  KeyRing a_, b_;
};

TEST_F(KeyRingTest, SignedHeaderVerifiesOnceAndItsReplayIsRefused) {
  proto::Header h = Push(1, 7);
  ASSERT_TRUE(a_.Sign(2, &h).ok());
  EXPECT_EQ(h.auth().seq(), 1u);
  EXPECT_EQ(h.auth().mac().size(), kMacBytes);
  EXPECT_EQ(Check(h), Verdict::kAccepted);
  std::string why;
  EXPECT_EQ(Check(h, &why), Verdict::kRejected);
  EXPECT_THAT(why, HasSubstr("replay"));
}

TEST_F(KeyRingTest, AnyChangedFieldFailsTheMac) {
  auto tampered = [&](auto change) {
    proto::Header h = Push(1, 7);
    EXPECT_TRUE(a_.Sign(2, &h).ok());
    change(h);
    std::string why;
    EXPECT_EQ(Check(h, &why), Verdict::kRejected);
    return why;
  };
  EXPECT_THAT(tampered([](proto::Header& h) { h.set_key(8); }), HasSubstr("MAC"));
  EXPECT_THAT(tampered([](proto::Header& h) { h.set_round(5); }), HasSubstr("MAC"));
  EXPECT_THAT(tampered([](proto::Header& h) { h.set_byte_length(4); }), HasSubstr("MAC"));
  EXPECT_THAT(tampered([](proto::Header& h) { h.mutable_auth()->set_seq(99); }), HasSubstr("MAC"));
  // Claiming another sender: the key of that sender is unknown here.
  EXPECT_THAT(tampered([](proto::Header& h) { h.set_sender(3); }), HasSubstr("no key"));
}

TEST_F(KeyRingTest, WrongKeyOrNoProofIsRefused) {
  KeyRing outsider;
  outsider.SetPeerKey(2, RandomKey());
  proto::Header forged = Push(1, 7);
  ASSERT_TRUE(outsider.Sign(2, &forged).ok());
  std::string why;
  EXPECT_EQ(Check(forged, &why), Verdict::kRejected);
  EXPECT_THAT(why, HasSubstr("forged"));
  EXPECT_EQ(Check(Push(1, 7), &why), Verdict::kRejected);
  EXPECT_THAT(why, HasSubstr("no proof"));
  // A header with no sender field reads as node 0 (the scheduler): it needs
  // the scheduler's key like any other.
  proto::Header no_sender = Push(1, 7);
  no_sender.clear_sender();
  ASSERT_TRUE(outsider.Sign(2, &no_sender).ok());
  EXPECT_EQ(Check(no_sender), Verdict::kRejected);
}

TEST_F(KeyRingTest, ReorderingWithinTheWindowIsAcceptedOnceAndOlderIsRefused) {
  std::vector<proto::Header> sent;
  for (int i = 0; i < 10; ++i) {
    sent.push_back(Push(1, i));
    ASSERT_TRUE(a_.Sign(2, &sent.back()).ok());
  }
  for (int i : {3, 1, 0, 9, 2, 8, 4, 5, 7, 6}) EXPECT_EQ(Check(sent[i]), Verdict::kAccepted) << i;
  for (int i = 0; i < 10; ++i) EXPECT_EQ(Check(sent[i]), Verdict::kRejected) << i;
  // A message more than a window behind the newest is refused even if new.
  proto::Header old = Push(1, 0);
  ASSERT_TRUE(a_.Sign(2, &old).ok());  // seq 11
  for (uint64_t i = 0; i < KeyRing::kReplayWindow + 1; ++i) {
    proto::Header h = Push(1, 0);
    ASSERT_TRUE(a_.Sign(2, &h).ok());
    if (i == KeyRing::kReplayWindow) {
      EXPECT_EQ(Check(h), Verdict::kAccepted);
    }
  }
  EXPECT_EQ(Check(old), Verdict::kRejected);
}

TEST_F(KeyRingTest, UnknownSenderIsHeldUntilTheRingIsCompleteThenRefused) {
  KeyRing c;  // a node before its address book
  c.SetPeerKey(0, RandomKey());
  proto::Header h = Push(1, 7);
  KeyRing sender;
  sender.SetPeerKey(5, RandomKey());
  ASSERT_TRUE(sender.Sign(5, &h).ok());
  std::string why;
  proto::Header copy = h;
  EXPECT_EQ(c.Verify(&copy, &why), Verdict::kUnknownSender);
  c.MarkComplete();
  copy = h;
  EXPECT_EQ(c.Verify(&copy, &why), Verdict::kRejected);
  EXPECT_FALSE(sender.Sign(9, &h).ok()) << "signing for a peer without a key fails";
}

TEST(KeyRingSchedulerTest, NodesWithoutAnIdAreCheckedByTheirNonceAtTheSchedulerOnly) {
  const SecretKey job = JobKey("job token");
  KeyRing scheduler(job);
  const std::string nonce(kRegistrationNonceBytes, 'n');
  KeyRing node;
  node.SetOwnNonce(nonce);
  node.SetPeerKey(0, NodeKey(job, nonce));
  Message reg = MakeMessage(proto::REGISTER, -1);
  reg.header.mutable_register_body()->set_role(proto::WORKER);
  ASSERT_TRUE(node.Sign(0, &reg.header).ok());
  EXPECT_EQ(reg.header.auth().nonce(), nonce);
  std::string why;
  proto::Header replay = reg.header;
  EXPECT_EQ(scheduler.Verify(&reg.header, &why), Verdict::kAccepted) << why;
  EXPECT_EQ(scheduler.Verify(&replay, &why), Verdict::kRejected);
  EXPECT_THAT(why, HasSubstr("replay"));

  // The same registration from a node with another token.
  KeyRing intruder;
  intruder.SetOwnNonce(nonce);
  intruder.SetPeerKey(0, NodeKey(JobKey("guess"), nonce));
  Message forged = MakeMessage(proto::REGISTER, -1);
  ASSERT_TRUE(intruder.Sign(0, &forged.header).ok());
  EXPECT_EQ(scheduler.Verify(&forged.header, &why), Verdict::kRejected);
  EXPECT_THAT(why, HasSubstr("job token"));

  // A node does not take id-less messages at all.
  KeyRing other_node;
  other_node.MarkComplete();
  Message again = MakeMessage(proto::REGISTER, -1);
  ASSERT_TRUE(node.Sign(0, &again.header).ok());
  EXPECT_EQ(other_node.Verify(&again.header, &why), Verdict::kRejected);
}

}  // namespace
}  // namespace syncline
