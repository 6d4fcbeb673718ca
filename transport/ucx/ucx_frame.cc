#include "transport/ucx/ucx_frame.h"

#include <cstring>

#include "transport/wire.h"

namespace syncline::ucx {
namespace {

void PutLe(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint64_t GetLe(const uint8_t* p, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(p[i]) << (8 * i);
  return value;
}

std::string Meta(const std::string& header, const std::vector<size_t>& frame_sizes) {
  std::string meta;
  meta.reserve(8 * frame_sizes.size() + header.size());
  for (size_t size : frame_sizes) PutLe(meta, size, 8);
  meta += header;
  return meta;
}

// The preamble's fields and where the frame sizes and header are found.
struct Layout {
  Preamble preamble;
  size_t meta_bytes = 0;                 // 8 * num_frames + header_bytes
  const uint8_t* meta = nullptr;         // in the AM header, or null when it leads the data
};

Result<Layout> ParseLayout(const uint8_t* am_header, size_t am_header_size, size_t data_length) {
  if (am_header == nullptr || am_header_size < Preamble::kBytes)
    return InvalidArgument("active message header of " + std::to_string(am_header_size) +
                           " bytes is shorter than a Syncline preamble");
  if (GetLe(am_header, 4) != kMagic) return InvalidArgument("active message header lacks the Syncline magic");
  Layout l;
  l.preamble.flags = static_cast<uint16_t>(GetLe(am_header + 4, 2));
  const uint64_t reserved = GetLe(am_header + 6, 2);
  l.preamble.num_frames = static_cast<uint32_t>(GetLe(am_header + 8, 4));
  l.preamble.header_bytes = static_cast<uint32_t>(GetLe(am_header + 12, 4));
  if (reserved != 0 || (l.preamble.flags & ~Preamble::kMetaInData) != 0)
    return InvalidArgument("preamble has unknown flags");
  if (l.preamble.num_frames > kMaxFrames)
    return InvalidArgument("message claims " + std::to_string(l.preamble.num_frames) + " payload frames");
  if (l.preamble.header_bytes > kMaxHeaderBytes)
    return InvalidArgument("header frame of " + std::to_string(l.preamble.header_bytes) +
                           " bytes exceeds the limit");
  l.meta_bytes = 8 * size_t{l.preamble.num_frames} + l.preamble.header_bytes;
  if (l.preamble.flags & Preamble::kMetaInData) {
    if (am_header_size != Preamble::kBytes) return InvalidArgument("preamble is followed by unexpected bytes");
    if (data_length < l.meta_bytes)
      return InvalidArgument("data of " + std::to_string(data_length) + " bytes is shorter than its frame table");
    return l;
  }
  if (am_header_size != Preamble::kBytes + l.meta_bytes)
    return InvalidArgument("active message header of " + std::to_string(am_header_size) +
                           " bytes disagrees with its preamble");
  l.meta = am_header + Preamble::kBytes;
  return l;
}

// Checks that the frame sizes at `sizes` add up to exactly `payload_bytes`.
Status CheckSizes(const uint8_t* sizes, uint32_t count, size_t payload_bytes) {
  size_t left = payload_bytes;
  for (uint32_t i = 0; i < count; ++i) {
    const uint64_t size = GetLe(sizes + 8 * i, 8);
    if (size > left) return InvalidArgument("payload frames add up to more than the " +
                                            std::to_string(payload_bytes) + " data bytes that arrived");
    left -= size;
  }
  if (left != 0) return InvalidArgument("payload frames leave " + std::to_string(left) + " data bytes unaccounted for");
  return Status::Ok();
}

}  // namespace

EncodedFrames EncodeFrames(const std::string& header, const std::vector<size_t>& frame_sizes,
                           size_t max_am_header) {
  EncodedFrames out;
  std::string meta = Meta(header, frame_sizes);
  const bool in_data = Preamble::kBytes + meta.size() > max_am_header;
  out.am_header.reserve(Preamble::kBytes + (in_data ? 0 : meta.size()));
  PutLe(out.am_header, kMagic, 4);
  PutLe(out.am_header, in_data ? Preamble::kMetaInData : 0, 2);
  PutLe(out.am_header, 0, 2);
  PutLe(out.am_header, frame_sizes.size(), 4);
  PutLe(out.am_header, header.size(), 4);
  if (in_data) {
    out.data_prefix = std::move(meta);
  } else {
    out.am_header += meta;
  }
  return out;
}

Status CheckPreamble(const uint8_t* am_header, size_t am_header_size, size_t data_length) {
  SYNCLINE_ASSIGN_OR_RETURN(Layout l, ParseLayout(am_header, am_header_size, data_length));
  if (l.meta == nullptr) return Status::Ok();  // the frame table arrives with the data
  return CheckSizes(l.meta, l.preamble.num_frames, data_length);
}

Result<DecodedFrames> DecodeFrames(const uint8_t* am_header, size_t am_header_size, const Buffer& data) {
  SYNCLINE_ASSIGN_OR_RETURN(Layout l, ParseLayout(am_header, am_header_size, data.size()));
  const uint8_t* meta = l.meta != nullptr ? l.meta : data.data();
  const size_t payload_start = l.meta != nullptr ? 0 : l.meta_bytes;
  SYNCLINE_RETURN_IF_ERROR(CheckSizes(meta, l.preamble.num_frames, data.size() - payload_start));
  DecodedFrames out;
  out.header = meta + 8 * size_t{l.preamble.num_frames};
  out.header_size = l.preamble.header_bytes;
  out.payloads.reserve(l.preamble.num_frames);
  size_t offset = payload_start;
  for (uint32_t i = 0; i < l.preamble.num_frames; ++i) {
    const size_t size = GetLe(meta + 8 * i, 8);
    out.payloads.push_back(size == 0 ? Buffer() : data.Slice(offset, size));
    offset += size;
  }
  return out;
}

}  // namespace syncline::ucx
