// The keys of a job with a token, and the libsodium calls that use them.
// Every key is derived from the job token or drawn at random; nothing here is
// hand-made cryptography: BLAKE2b (crypto_generichash) derives keys and MACs
// headers, XSalsa20-Poly1305 (crypto_secretbox) seals keys for one node.
//
//   job key      = BLAKE2b("syncline job key", token)        known to token holders
//   node key     = BLAKE2b_{job key}("node" | nonce)          a node and the scheduler;
//                                                             nonce: the node's random
//                                                             registration nonce
//   pair key     = BLAKE2b_{scheduler secret}(a | b)          nodes a and b (random secret
//                                                             of the scheduler: no token
//                                                             holder can compute it)
//   CURVE secret = BLAKE2b_{job key}("curve scheduler")       the scheduler's ZeroMQ CURVE
//                                                             key (SYNCLINE_ENCRYPT)
//
// docs/security.md says what this protects and what it does not.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace syncline {

using SecretKey = std::array<uint8_t, 32>;

constexpr size_t kRegistrationNonceBytes = 24;
// The scheduler's fresh challenge to each registration (proto Register.challenge).
constexpr size_t kRegistrationChallengeBytes = 24;
constexpr size_t kMacBytes = 16;

// Derives the job key from the token (any length, not empty).
SecretKey JobKey(std::string_view token);
// The key a node that registered with `nonce` shares with the scheduler.
SecretKey NodeKey(const SecretKey& job_key, std::string_view nonce);
// The key nodes `a` and `b` share, from the scheduler's random secret.
SecretKey PairKey(const SecretKey& scheduler_secret, int32_t a, int32_t b);

// The scheduler's CURVE key pair (SYNCLINE_ENCRYPT), 32 raw bytes each,
// derived from the job key: nodes know its public key before they join.
std::string SchedulerCurveSecretKey(const SecretKey& job_key);
std::string SchedulerCurvePublicKey(const SecretKey& job_key);

// Random bytes from the OS (libsodium's randombytes).
std::string RandomBytes(size_t n);
SecretKey RandomKey();

// A kMacBytes tag of `bytes` under `key`, and its constant-time check.
std::string Mac(const SecretKey& key, std::string_view bytes);
bool MacMatches(const SecretKey& key, std::string_view bytes, std::string_view mac);

// Whether `a` and `b` hold the same bytes, in time independent of where they differ.
bool SameSecret(std::string_view a, std::string_view b);

// Encrypts and authenticates `plain` for the holder of `key` (a random
// nonce travels in front of the ciphertext); Open undoes it or fails.
std::string Seal(const SecretKey& key, std::string_view plain);
Result<std::string> Open(const SecretKey& key, std::string_view sealed);

}  // namespace syncline
