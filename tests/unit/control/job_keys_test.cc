// control/job_keys.h: derivations are stable and separate, MACs and sealed
// keys fail on any change.
#include "control/job_keys.h"

#include <gtest/gtest.h>

namespace syncline {
namespace {

TEST(JobKeysTest, DerivedKeysDependOnEveryInput) {
  const SecretKey job = JobKey("token");
  EXPECT_EQ(job, JobKey("token"));
  EXPECT_NE(job, JobKey("token2"));
  const std::string nonce_a(kRegistrationNonceBytes, 'a'), nonce_b(kRegistrationNonceBytes, 'b');
  EXPECT_EQ(NodeKey(job, nonce_a), NodeKey(job, nonce_a));
  EXPECT_NE(NodeKey(job, nonce_a), NodeKey(job, nonce_b));
  EXPECT_NE(NodeKey(job, nonce_a), NodeKey(JobKey("other"), nonce_a));
  const SecretKey secret = RandomKey();
  EXPECT_EQ(PairKey(secret, 3, 7), PairKey(secret, 7, 3)) << "both ends derive the same key";
  EXPECT_NE(PairKey(secret, 3, 7), PairKey(secret, 3, 8));
  EXPECT_NE(PairKey(secret, 3, 7), PairKey(RandomKey(), 3, 7));
  EXPECT_NE(RandomBytes(24), RandomBytes(24));
}

TEST(JobKeysTest, MacMatchesOnlyTheSameBytesAndKey) {
  const SecretKey key = RandomKey();
  const std::string tag = Mac(key, "header bytes");
  ASSERT_EQ(tag.size(), kMacBytes);
  EXPECT_TRUE(MacMatches(key, "header bytes", tag));
  EXPECT_FALSE(MacMatches(key, "header bytez", tag));
  EXPECT_FALSE(MacMatches(RandomKey(), "header bytes", tag));
  EXPECT_FALSE(MacMatches(key, "header bytes", tag.substr(1))) << "a short tag is refused, not compared";
  std::string flipped = tag;
  flipped[5] ^= 1;
  EXPECT_FALSE(MacMatches(key, "header bytes", flipped));
}

TEST(JobKeysTest, SealedBytesOpenOnlyWithTheirKeyAndUnaltered) {
  const SecretKey key = RandomKey();
  const std::string sealed = Seal(key, "peer keys");
  EXPECT_EQ(sealed.find("peer keys"), std::string::npos) << "sealed bytes are encrypted";
  auto opened = Open(key, sealed);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(*opened, "peer keys");
  EXPECT_FALSE(Open(RandomKey(), sealed).ok());
  std::string altered = sealed;
  altered.back() ^= 1;
  EXPECT_FALSE(Open(key, altered).ok());
  EXPECT_FALSE(Open(key, "short").ok());
  EXPECT_NE(Seal(key, "peer keys"), sealed) << "each seal has its own nonce";
}

}  // namespace
}  // namespace syncline
