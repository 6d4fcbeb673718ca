// libFuzzer target: compressed chunks from a peer (compression/compressor.h).
// Input layout: one byte choosing the form, two bytes (little-endian) giving
// the number of values the receiver expects (mod 4096), then the chunk's
// bytes, decoded into a sum as a server would. The same bytes, read as fp32
// values, must also encode and decode back without an error, and the
// decoded sum of a chunk that was accepted must not have written out of
// bounds (the sanitizers check that).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "compression/compressor.h"

using namespace syncline::compression;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const char* const kForms[] = {"fp16", "bf16", "int8", "onebit", "topk:0.1", "randomk:0.3", "topk:1"};
  if (size < 3) return 0;
  const Spec spec = *ParseSpec(kForms[data[0] % (sizeof kForms / sizeof kForms[0])]);
  const size_t n = (data[1] | (size_t{data[2]} << 8)) % 4096;
  data += 3, size -= 3;

  std::vector<uint32_t> chunk((size + 3) / 4);  // aligned, as a pool buffer
  if (size > 0) std::memcpy(chunk.data(), data, size);
  std::vector<float> sum(n, 0.0f);
  (void)DecompressAdd(spec, reinterpret_cast<const std::byte*>(chunk.data()), size, 1.0f, sum.data(), n);

  const size_t m = size / 4;
  std::vector<float> values(m);
  if (m > 0) std::memcpy(values.data(), data, 4 * m);
  std::vector<uint32_t> encoded((CompressedBytes(spec, m) + 3) / 4);
  std::byte* bytes = reinterpret_cast<std::byte*>(encoded.data());
  if (!Compress(spec, values.data(), m, m, bytes).ok()) std::abort();
  std::vector<float> back(m);
  if (!Decompress(spec, bytes, CompressedBytes(spec, m), back.data(), m).ok()) std::abort();
  return 0;
}
