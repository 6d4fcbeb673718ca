// How the UCX backend lays a Message out as one UCP Active Message: a small
// fixed preamble, the size of every payload frame and the encoded protobuf
// header travel as the AM header; the payload frames travel as the AM data,
// back to back, so UCX can send large ones zero-copy (rendezvous) and the
// receiver can cut the data back into frames. When the frame sizes and header
// do not fit UCX's AM header limit they travel at the head of the data.
// Everything here is pure (no UCX calls), so it is tested without a network.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/buffer.h"
#include "common/status.h"

namespace syncline::ucx {

// The Active Message id every Syncline message is sent under.
constexpr unsigned kAmId = 0x53;
// First bytes of every AM header ("SYN1"), and its version.
constexpr uint32_t kMagic = 0x314e5953;
// Most payload frames one message may carry.
constexpr uint32_t kMaxFrames = 1 << 16;

// The fixed start of every AM header; integers are little-endian on the wire.
struct Preamble {
  static constexpr size_t kBytes = 16;
  enum Flags : uint16_t { kMetaInData = 1 };  // sizes + header lead the data
  uint16_t flags = 0;
  uint32_t num_frames = 0;
  uint32_t header_bytes = 0;
};

// What the sender hands to UCX for one message.
struct EncodedFrames {
  std::string am_header;    // preamble [+ frame sizes + encoded header]
  std::string data_prefix;  // frame sizes + encoded header when they do not fit the AM header; else empty
};

// Lays out a message whose encoded header is `header` and whose payload frames
// have `frame_sizes`, for an AM header of at most `max_am_header` bytes.
EncodedFrames EncodeFrames(const std::string& header, const std::vector<size_t>& frame_sizes,
                           size_t max_am_header);

// A received message cut back into its parts: the encoded header's bytes and
// the payload frames, which are slices of the data Buffer (no copies).
struct DecodedFrames {
  const uint8_t* header = nullptr;  // valid while the AM header bytes and `data` live
  size_t header_size = 0;
  std::vector<Buffer> payloads;
};

// Checks `am_header` against the data that arrived with it and cuts the data
// into frames. Any inconsistency (bad magic, sizes that do not add up to the
// data's length, too many frames) is an InvalidArgument saying what.
Result<DecodedFrames> DecodeFrames(const uint8_t* am_header, size_t am_header_size, const Buffer& data);

// Cheap check of the preamble alone, before any data is received: whether
// `am_header` can start a valid message carrying `data_length` bytes.
Status CheckPreamble(const uint8_t* am_header, size_t am_header_size, size_t data_length);

}  // namespace syncline::ucx
