// Per-layer profiles of real models for the layered benchmark: each layer's
// parameter count and its share of the forward compute (multiply-adds), in
// forward order. VGG-16 and ResNet-50 at 224x224 (ImageNet), from their
// architectures; gradients are one fp32 tensor per layer (biases folded in).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace syncline::bench {

struct LayerProfile {
  std::string name;
  uint64_t params = 0;
  double macs = 0;  // forward multiply-adds
};

// "vgg16" or "resnet50"; an error naming the known ones otherwise.
Result<std::vector<LayerProfile>> ModelProfile(const std::string& name);

}  // namespace syncline::bench
