// libFuzzer target: the scheduler's message handling. A fresh scheduler of a
// 2-worker, 2-server job takes a sequence of messages from the input
// (registrations, barriers, declarations, heartbeats, finishes, aborts, and
// every other op) through an in-memory endpoint; every message it sends back
// must pass the wire. The input decides, per message, whether it carries a
// valid proof of one of four would-be nodes that hold the job token (so the
// handlers behind the authentication are reached) or none at all, and
// whether a registration echoes the challenge the scheduler sent last.
#include <array>

#include "control/key_ring.h"
#include "scheduler/scheduler.h"

#include "tests/fuzz/fuzz_input.h"

using namespace syncline;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Settings settings;
  settings.role = Role::kScheduler;
  settings.num_workers = 2;
  settings.num_servers = 2;
  settings.job_token = fuzz::kToken;
  settings.partition_bytes = 1024;
  auto owned = std::make_unique<fuzz::CaptureEndpoint>();
  fuzz::CaptureEndpoint* endpoint = owned.get();
  Scheduler scheduler(settings, std::move(owned));
  if (!scheduler.Listen("fuzz://scheduler").ok()) __builtin_trap();
  // The would-be nodes' side of the key exchange with the scheduler.
  std::array<KeyRing, 4> nodes;
  for (size_t k = 0; k < nodes.size(); ++k) {
    const std::string nonce(kRegistrationNonceBytes, static_cast<char>('a' + k));
    nodes[k].SetOwnNonce(nonce);
    nodes[k].SetPeerKey(0, NodeKey(JobKey(fuzz::kToken), nonce));
  }
  for (int i = 0; i < 64 && in.remaining_bytes() > 0; ++i) {
    const int signer = in.ConsumeIntegralInRange(-1, 3);
    std::optional<Message> m = fuzz::NextMessage(in);
    if (!m) continue;
    // A registration may carry back the scheduler's latest challenge, as a
    // node that received it does (the nodes never see it otherwise).
    if (m->header.op() == proto::REGISTER && in.ConsumeBool())
      m->header.mutable_register_body()->set_challenge(endpoint->last_challenge());
    if (signer >= 0) (void)nodes[signer].Sign(0, &m->header);
    endpoint->Deliver(std::move(*m));
  }
  return 0;
}
