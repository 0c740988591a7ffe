// Seeded pseudo-randomness for the fixture generator. Everything the generator writes is a pure
// function of (arguments, seed): every stream is keyed by a name ("blk.3.ffn_down_exps.weight", a chunk
// number, a domain) rather than drawn from one global sequence, so a tensor's bytes do not depend on
// which shard it lands in or on the order things are generated.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

namespace gguf_reap::gen {

// splitmix64's finaliser: a bijective 64-bit mix (Steele, Lea, Flood 2014).
inline uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// A stream key from a parent key and a number.
inline uint64_t derive(uint64_t key, uint64_t n) {
    return mix64(key ^ mix64(n + 0x632be59bd9b4e019ULL));
}

// A stream key from a parent key and a string (FNV-1a, then mixed).
inline uint64_t derive(uint64_t key, std::string_view s) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
    return derive(key, h);
}

// xoshiro256** (Blackman, Vigna 2018): ~1 ns per 64 bits, so filling gigabytes is disk-bound.
class Rng {
  public:
    explicit Rng(uint64_t seed) {
        for (auto& s : s_) {
            seed = mix64(seed);
            s = seed;
        }
    }

    uint64_t next() {
        const uint64_t result = rotl(s_[1] * 5, 7) * 9;
        const uint64_t t = s_[1] << 17;
        s_[2] ^= s_[0];
        s_[3] ^= s_[1];
        s_[1] ^= s_[2];
        s_[0] ^= s_[3];
        s_[2] ^= t;
        s_[3] = rotl(s_[3], 45);
        return result;
    }

    // Uniform in [0, 1) with 53 random bits.
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
    double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
    // Uniform integer in [0, n), n > 0 (Lemire's multiply-shift; the bias is < n / 2^64).
    uint64_t below(uint64_t n) {
        return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
    }
    // Standard normal (Box-Muller; one value per call keeps streams simple to reason about).
    double normal() {
        const double u1 = 1.0 - uniform();  // (0, 1]
        const double u2 = uniform();
        return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    }

  private:
    static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    uint64_t s_[4];
};

}  // namespace gguf_reap::gen
