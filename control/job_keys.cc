#include "control/job_keys.h"

#include <sodium.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace syncline {
namespace {

// sodium_init is idempotent and thread-safe; it fails only when the OS has
// no source of randomness, where no key could be made safely.
void EnsureSodium() {
  static const bool ready = [] {
    if (sodium_init() < 0) {
      std::fprintf(stderr, "syncline: libsodium could not initialise (no randomness source)\n");
      std::abort();
    }
    return true;
  }();
  (void)ready;
}

SecretKey Hash(const SecretKey* key, std::string_view a, std::string_view b) {
  EnsureSodium();
  crypto_generichash_state state;
  crypto_generichash_init(&state, key ? key->data() : nullptr, key ? key->size() : 0, 32);
  crypto_generichash_update(&state, reinterpret_cast<const unsigned char*>(a.data()), a.size());
  crypto_generichash_update(&state, reinterpret_cast<const unsigned char*>(b.data()), b.size());
  SecretKey out;
  crypto_generichash_final(&state, out.data(), out.size());
  return out;
}

std::string_view AsBytes(const int32_t& v) { return {reinterpret_cast<const char*>(&v), sizeof(v)}; }

}  // namespace

SecretKey JobKey(std::string_view token) { return Hash(nullptr, "syncline job key\n", token); }

SecretKey NodeKey(const SecretKey& job_key, std::string_view nonce) { return Hash(&job_key, "node\n", nonce); }

SecretKey PairKey(const SecretKey& scheduler_secret, int32_t a, int32_t b) {
  const int32_t lo = std::min(a, b), hi = std::max(a, b);
  return Hash(&scheduler_secret, AsBytes(lo), AsBytes(hi));
}

std::string SchedulerCurveSecretKey(const SecretKey& job_key) {
  const SecretKey secret = Hash(&job_key, "curve scheduler\n", "");
  return std::string(secret.begin(), secret.end());
}

std::string SchedulerCurvePublicKey(const SecretKey& job_key) {
  const std::string secret = SchedulerCurveSecretKey(job_key);
  std::string pub(crypto_scalarmult_BYTES, '\0');
  crypto_scalarmult_base(reinterpret_cast<unsigned char*>(pub.data()),
                         reinterpret_cast<const unsigned char*>(secret.data()));
  return pub;
}

std::string RandomBytes(size_t n) {
  EnsureSodium();
  std::string out(n, '\0');
  randombytes_buf(out.data(), n);
  return out;
}

SecretKey RandomKey() {
  EnsureSodium();
  SecretKey key;
  randombytes_buf(key.data(), key.size());
  return key;
}

std::string Mac(const SecretKey& key, std::string_view bytes) {
  EnsureSodium();
  std::string tag(kMacBytes, '\0');
  crypto_generichash(reinterpret_cast<unsigned char*>(tag.data()), tag.size(),
                     reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), key.data(), key.size());
  return tag;
}

bool MacMatches(const SecretKey& key, std::string_view bytes, std::string_view mac) {
  if (mac.size() != kMacBytes) return false;
  const std::string expected = Mac(key, bytes);
  return crypto_verify_16(reinterpret_cast<const unsigned char*>(expected.data()),
                          reinterpret_cast<const unsigned char*>(mac.data())) == 0;
}

bool SameSecret(std::string_view a, std::string_view b) {
  EnsureSodium();
  return a.size() == b.size() && sodium_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string Seal(const SecretKey& key, std::string_view plain) {
  EnsureSodium();
  std::string out(crypto_secretbox_NONCEBYTES + crypto_secretbox_MACBYTES + plain.size(), '\0');
  auto* nonce = reinterpret_cast<unsigned char*>(out.data());
  randombytes_buf(nonce, crypto_secretbox_NONCEBYTES);
  crypto_secretbox_easy(nonce + crypto_secretbox_NONCEBYTES, reinterpret_cast<const unsigned char*>(plain.data()),
                        plain.size(), nonce, key.data());
  return out;
}

Result<std::string> Open(const SecretKey& key, std::string_view sealed) {
  EnsureSodium();
  if (sealed.size() < crypto_secretbox_NONCEBYTES + crypto_secretbox_MACBYTES)
    return InvalidArgument("sealed keys too short (" + std::to_string(sealed.size()) + " bytes)");
  const auto* nonce = reinterpret_cast<const unsigned char*>(sealed.data());
  const auto* cipher = nonce + crypto_secretbox_NONCEBYTES;
  const size_t cipher_size = sealed.size() - crypto_secretbox_NONCEBYTES;
  std::string plain(cipher_size - crypto_secretbox_MACBYTES, '\0');
  if (crypto_secretbox_open_easy(reinterpret_cast<unsigned char*>(plain.data()), cipher, cipher_size, nonce,
                                 key.data()) != 0)
    return InvalidArgument("sealed keys fail their authentication (not sealed for this node)");
  return plain;
}

}  // namespace syncline
