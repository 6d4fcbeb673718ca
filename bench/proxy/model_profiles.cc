#include "bench/proxy/model_profiles.h"

namespace syncline::bench {
namespace {

// A k x k convolution from `in` to `out` channels producing a `hw` x `hw` map.
LayerProfile Conv(std::string name, uint64_t in, uint64_t out, uint64_t k, uint64_t hw, bool bias) {
  const uint64_t weights = in * out * k * k;
  return {std::move(name), weights + (bias ? out : 0), static_cast<double>(weights) * hw * hw};
}

LayerProfile Dense(std::string name, uint64_t in, uint64_t out) {
  return {std::move(name), in * out + out, static_cast<double>(in) * out};
}

std::vector<LayerProfile> Vgg16() {
  std::vector<LayerProfile> layers;
  const struct { int convs; uint64_t channels, hw; } blocks[] = {
      {2, 64, 224}, {2, 128, 112}, {3, 256, 56}, {3, 512, 28}, {3, 512, 14}};
  uint64_t in = 3;
  int b = 1;
  for (const auto& block : blocks) {
    for (int c = 1; c <= block.convs; ++c) {
      layers.push_back(Conv("conv" + std::to_string(b) + "_" + std::to_string(c), in, block.channels, 3, block.hw,
                            true));
      in = block.channels;
    }
    ++b;
  }
  layers.push_back(Dense("fc6", 512 * 7 * 7, 4096));
  layers.push_back(Dense("fc7", 4096, 4096));
  layers.push_back(Dense("fc8", 4096, 1000));
  return layers;
}

std::vector<LayerProfile> Resnet50() {
  // Batch-norm parameters are folded into their convolution's tensor.
  std::vector<LayerProfile> layers;
  auto conv_bn = [&](std::string name, uint64_t in, uint64_t out, uint64_t k, uint64_t hw) {
    LayerProfile l = Conv(std::move(name), in, out, k, hw, false);
    l.params += 2 * out;
    layers.push_back(l);
  };
  conv_bn("conv1", 3, 64, 7, 112);
  const struct { int blocks; uint64_t width, hw; } stages[] = {{3, 64, 56}, {4, 128, 28}, {6, 256, 14}, {3, 512, 7}};
  uint64_t in = 64;
  int s = 2;
  for (const auto& stage : stages) {
    for (int b = 0; b < stage.blocks; ++b) {
      const std::string p = "layer" + std::to_string(s) + "." + std::to_string(b) + ".";
      conv_bn(p + "conv1", in, stage.width, 1, stage.hw);
      conv_bn(p + "conv2", stage.width, stage.width, 3, stage.hw);
      conv_bn(p + "conv3", stage.width, 4 * stage.width, 1, stage.hw);
      if (b == 0) conv_bn(p + "downsample", in, 4 * stage.width, 1, stage.hw);
      in = 4 * stage.width;
    }
    ++s;
  }
  layers.push_back(Dense("fc", 2048, 1000));
  return layers;
}

}  // namespace

Result<std::vector<LayerProfile>> ModelProfile(const std::string& name) {
  if (name == "vgg16") return Vgg16();
  if (name == "resnet50") return Resnet50();
  return InvalidArgument("unknown model '" + name + "' (known: vgg16, resnet50)");
}

}  // namespace syncline::bench
