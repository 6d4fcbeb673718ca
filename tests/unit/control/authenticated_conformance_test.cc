// The Endpoint conformance suite (tests/unit/transport) again, with every
// endpoint wrapped in AuthenticatedEndpoint: over every backend, signed
// traffic arrives as the suite expects, and a node speaking in another's
// name is dropped and counted. ctest runs the forged-sender case and the
// payload-lifetime one (CMakeLists.txt says which backends); most other cases
// send as node 1 from either end, or compare whole headers (which now carry
// their proof, Header.auth), so they do not apply unchanged.
#include "control/authenticated_endpoint.h"
#include "tests/unit/transport/endpoint_conformance.h"

namespace syncline::testing {
namespace {

class Authenticate : public ::testing::Environment {
 public:
  void SetUp() override {
    const SecretKey secret = RandomKey();
    g_authenticate = [secret](PeerId self, std::unique_ptr<Endpoint> inner) -> std::unique_ptr<Endpoint> {
      // The keys a scheduler would hand node `self`: one per pair of the
      // suite's nodes (ids 1 to 9).
      auto keys = std::make_shared<KeyRing>();
      for (PeerId peer = 1; peer < 10; ++peer)
        if (peer != self) keys->SetPeerKey(peer, PairKey(secret, self, peer));
      keys->MarkComplete();
      return std::make_unique<AuthenticatedEndpoint>(std::move(inner), std::move(keys));
    };
  }
  void TearDown() override { g_authenticate = nullptr; }
};

[[maybe_unused]] ::testing::Environment* const kAuthenticate = ::testing::AddGlobalTestEnvironment(new Authenticate);

}  // namespace
}  // namespace syncline::testing
