/* permute.h — a pseudo-random permutation of 0..n-1 that needs no memory: element i of
 * the permutation chosen by `key` is computed on its own, in O(1) expected time, for any
 * n up to 2^62. The data order of --shuffle (one permutation per epoch, keyed by the
 * seed and the epoch) is built on it, so that it depends on nothing else: not on the
 * number of ranks or micro-batches, nor on where a run was resumed.
 *
 * How: a 4-round Feistel network on the smallest power of 4 >= n (a bijection of that
 * range, whatever its round function), restricted to 0..n-1 by cycle walking (apply it
 * again while the result is >= n; it stays a bijection of 0..n-1 and, the range being
 * less than 4n, takes under 4 applications on average). */
#ifndef PPDL_CORE_PERMUTE_H
#define PPDL_CORE_PERMUTE_H

#include <stdint.h>

/* element i (< n) of the permutation of 0..n-1 keyed by key */
uint64_t ppdl_permute(uint64_t key, uint64_t n, uint64_t i);
/* the key of one epoch of a shuffle seed */
uint64_t ppdl_permute_key(uint64_t seed, uint64_t epoch);

#endif
