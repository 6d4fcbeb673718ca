#include "worker/chunk.h"

namespace syncline {

void SendAtOnce::Post(std::vector<ChunkTask> chunks) {
  for (ChunkTask& c : chunks) admit_(std::move(c));
}

}  // namespace syncline
