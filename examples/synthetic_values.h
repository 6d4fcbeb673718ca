// The values the synthetic training example pushes, and the sums it expects.
// "exact" values are small integers whose sums every dtype holds exactly, so
// each pulled result must equal the expected sum bit for bit; "random" values
// make sums that depend on the order of addition (for determinism checks).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.h"

namespace syncline::example {

enum class ValueKind { kExact, kRandom };

// Fills `out` (n elements of `t`) with worker `rank`'s gradient for `round`.
void FillGradient(ValueKind kind, DType t, uint64_t n, int rank, uint64_t round, int tensor, uint8_t* out);
// Checks `got` (n elements of `t`) against the sum over `workers` ranks of
// FillGradient's values: bit for bit for exact values, within the dtype's
// rounding for random ones. On a mismatch, says where in `why`.
bool VerifySum(ValueKind kind, DType t, uint64_t n, int workers, uint64_t round, int tensor, const uint8_t* got,
               std::string* why);
// Async mode: checks the final value (every push of every round and rank
// added once, in any order): exact for fp32/fp64 with exact values; within
// the accumulated rounding of the additions otherwise.
bool VerifyAsyncTotal(ValueKind kind, DType t, uint64_t n, int workers, uint64_t rounds, int tensor,
                      const uint8_t* got, std::string* why);
// Element i of `data` as a double.
double ElementAt(DType t, const uint8_t* data, uint64_t i);
// Stores `v` rounded to `t` at element i.
void StoreElement(DType t, uint8_t* data, uint64_t i, double v);

}  // namespace syncline::example
