// Helpers of the KeyStore tests: hand-made PUSH/PULL messages, reading replies,
// and a fixture that drives a KeyStore directly (no network).
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "server/key_store.h"
#include "summation/kernels.h"
#include "transport/wire.h"

namespace syncline::keystore_testing {

using ::testing::HasSubstr;

constexpr uint64_t kKey = (uint64_t{3} << 32) | 1;
// Worker of rank r has node id kNodeBase + r.
constexpr int32_t kNodeBase = 100;

inline int32_t NodeOf(int rank) { return kNodeBase + rank; }

template <typename T>
proto::DType WireOf();
template <>
inline proto::DType WireOf<float>() { return proto::FLOAT32; }
template <>
inline proto::DType WireOf<double>() { return proto::FLOAT64; }

inline Message PushBytes(uint64_t key, uint64_t round, int rank, proto::DType dtype, const void* data, size_t bytes,
                  uint32_t flags = 0, uint64_t request_id = 0) {
  Message m = MakeMessage(proto::PUSH, NodeOf(rank));
  m.header.set_key(key);
  m.header.set_round(round);
  m.header.set_dtype(dtype);
  m.header.set_flags(flags);
  m.header.set_request_id(request_id);
  m.payloads.push_back(Buffer::Copy(data, bytes));
  m.header.set_byte_length(bytes);
  EXPECT_TRUE(ValidateMessage(m).ok()) << "test bug: malformed push";
  return m;
}

template <typename T>
Message Push(uint64_t round, int rank, const std::vector<T>& values, uint32_t flags = 0, uint64_t key = kKey,
             uint64_t request_id = 0) {
  return PushBytes(key, round, rank, WireOf<T>(), values.data(), values.size() * sizeof(T), flags, request_id);
}

inline Message Pull(uint64_t round, int rank, proto::DType dtype = proto::FLOAT32, uint64_t key = kKey,
             uint64_t request_id = 0) {
  Message m = MakeMessage(proto::PULL, NodeOf(rank));
  m.header.set_key(key);
  m.header.set_round(round);
  m.header.set_dtype(dtype);
  m.header.set_request_id(request_id);
  EXPECT_TRUE(ValidateMessage(m).ok());
  return m;
}

template <typename T>
inline std::vector<T> ValuesOf(const Message& reply) {
  EXPECT_EQ(reply.payloads.size(), 1u);
  if (reply.payloads.size() != 1) return {};
  const Buffer& b = reply.payloads[0];
  EXPECT_EQ(b.size() % sizeof(T), 0u);
  std::vector<T> out(b.size() / sizeof(T));
  std::memcpy(out.data(), b.data(), b.size());
  return out;
}

inline std::vector<Reply> OfOp(const std::vector<Reply>& replies, proto::Op op) {
  std::vector<Reply> out;
  for (const Reply& r : replies)
    if (r.message.header.op() == op) out.push_back(r);
  return out;
}

class KeyStoreTest : public ::testing::Test {
 protected:
  void Make(int workers, bool async = false, bool deterministic = false) {
    store_ = std::make_unique<KeyStore>(KeyStoreOptions{workers, async, deterministic, nullptr, nullptr}, &engine_, &pool_);
  }
  std::vector<Reply> DoPush(const Message& m, int rank) {
    std::vector<Reply> out;
    store_->Push(m, rank, &out);
    return out;
  }
  std::vector<Reply> DoPull(const Message& m, int rank) {
    std::vector<Reply> out;
    store_->Pull(m, rank, &out);
    return out;
  }
  // Expects exactly one ERROR reply, to `rank`'s node, whose message holds every `parts`.
  void ExpectError(const std::vector<Reply>& out, int rank, const std::vector<std::string>& parts) {
    ASSERT_EQ(out.size(), 1u);
    const Reply& r = out[0];
    EXPECT_EQ(r.to, NodeOf(rank));
    ASSERT_EQ(r.message.header.op(), proto::ERROR);
    EXPECT_TRUE(ValidateMessage(r.message).ok()) << "error replies must be valid on the wire";
    for (const auto& p : parts) EXPECT_THAT(r.message.header.error().message(), HasSubstr(p));
  }

  SummationEngine engine_{1};
  BufferPool pool_;
  std::unique_ptr<KeyStore> store_;
};
}  // namespace syncline::keystore_testing
