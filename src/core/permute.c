/* permute.c — see permute.h */
#include "config.h"

#include "core/permute.h"

/* splitmix64's finaliser: a good 64-bit mixing function */
static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t ppdl_permute_key(uint64_t seed, uint64_t epoch) { return mix64(mix64(seed) ^ (epoch * 0xd1342543de82ef95ULL)); }

/* one pass of the Feistel network over 0 .. 4^half - 1 */
static uint64_t feistel(uint64_t key, int half, uint64_t x)
{
    uint64_t mask = (1ULL << half) - 1, l = x >> half, r = x & mask;
    for (uint64_t round = 0; round < 4; round++) {
        uint64_t f = mix64(r ^ mix64(key + round)) & mask;
        uint64_t t = r;
        r = l ^ f;
        l = t;
    }
    return (l << half) | r;
}

uint64_t ppdl_permute(uint64_t key, uint64_t n, uint64_t i)
{
    if (n <= 1) return 0;
    int half = 1;
    while (half < 31 && (1ULL << (2 * half)) < n) half++;
    uint64_t x = i;
    do x = feistel(key, half, x);
    while (x >= n);
    return x;
}
