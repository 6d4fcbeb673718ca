// libFuzzer target: the wire decoder, on raw bytes. Input layout: one byte
// (frame count = 1 + byte % 4), then each frame as a 2-byte little-endian
// length and its bytes; the first frame is the header, the rest payloads.
// A message the decoder accepts must encode and decode again to the same header.
#include <cstdint>
#include <cstring>

#include "transport/wire.h"

namespace {

bool TakeFrame(const uint8_t*& data, size_t& size, std::string* frame) {
  if (size < 2) return false;
  size_t length = data[0] | (size_t{data[1]} << 8);
  data += 2, size -= 2;
  length = std::min(length, size);
  frame->assign(reinterpret_cast<const char*>(data), length);
  data += length, size -= length;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int frames = 1 + data[0] % 4;
  ++data, --size;
  std::string header;
  if (!TakeFrame(data, size, &header)) return 0;
  std::vector<syncline::Buffer> payloads;
  for (int i = 1; i < frames; ++i) {
    std::string payload;
    if (!TakeFrame(data, size, &payload)) break;
    payloads.push_back(syncline::Buffer::Copy(payload.data(), payload.size()));
  }
  auto decoded = syncline::DecodeMessage(header.data(), header.size(), payloads);
  if (!decoded.ok()) return 0;
  if (!syncline::ValidateMessage(*decoded).ok()) __builtin_trap();  // accepted means valid
  const std::string again = syncline::EncodeHeader(decoded->header);
  auto redecoded = syncline::DecodeMessage(again.data(), again.size(), std::move(payloads));
  if (!redecoded.ok() || redecoded->header.SerializeAsString() != decoded->header.SerializeAsString())
    __builtin_trap();
  return 0;
}
