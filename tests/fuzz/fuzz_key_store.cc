// libFuzzer target: a server's key store (the sums, round bookkeeping and
// replies) taking a sequence of pushes and pulls built from the input, from
// workers of any rank, in sync or async and deterministic modes, with keys
// unplaced or placed (some of them compressed, so pushes in a compressed form
// or posing as one are decoded into sums). Checks, beside ASan/UBSan: every
// reply goes to the node that asked and passes the wire.
#include "compression/compressor.h"
#include "server/key_store.h"

#include "tests/fuzz/fuzz_input.h"

using namespace syncline;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  static SummationEngine engine(1);
  BufferPool pool(1 << 20);
  const int workers = in.ConsumeIntegralInRange(1, 4);
  KeyStoreOptions options{workers, in.ConsumeBool(), in.ConsumeBool(), nullptr, nullptr};
  options.on_orphaned_round = [](uint64_t, uint64_t, int, Absence) {};
  options.require_placement = in.ConsumeBool();
  KeyStore store(options, &engine, &pool);
  if (options.require_placement) {
    // Keys 0-3 (the small keys the messages name most): fp32 values, each in one form.
    static const char* const kForms[] = {"none", "fp16", "bf16", "int8", "onebit", "topk:0.1", "randomk:0.3"};
    for (uint64_t key = 0; key < 4; ++key) {
      const size_t values = in.ConsumeIntegralInRange<size_t>(1, 700);
      auto form = compression::ParseSpec(kForms[in.ConsumeIntegralInRange<size_t>(0, std::size(kForms) - 1)]);
      store.Place(key, values * sizeof(float), *form);
    }
  }
  fuzz::CaptureEndpoint wire;  // checks each reply as a peer would receive it
  for (int i = 0; i < 64 && in.remaining_bytes() > 0; ++i) {
    if (in.ConsumeIntegralInRange(0, 15) == 0) {
      store.MarkFinished(in.ConsumeIntegralInRange(0, workers));
      for (uint64_t key : store.keys()) store.CheckOrphanedRounds(key);
      continue;
    }
    std::optional<Message> m = fuzz::NextMessage(in);
    if (!m || (m->header.op() != proto::PUSH && m->header.op() != proto::PULL)) continue;
    const int rank = in.ConsumeIntegralInRange(-1, workers);  // -1 and `workers`: not a member
    std::vector<Reply> replies;
    if (m->header.op() == proto::PUSH)
      store.Push(*m, rank, &replies);
    else
      store.Pull(*m, rank, &replies);
    for (Reply& r : replies) {
      if (r.to != m->header.sender() && r.message.header.op() != proto::PULL_REPLY) __builtin_trap();
      (void)wire.Send(r.to, std::move(r.message), Deadline::AfterMs(1000));
    }
  }
  return 0;
}
