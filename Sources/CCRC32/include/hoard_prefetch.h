// A software prefetch, for the eviction policy's counts (Sources/Hoard/Capacity): Swift has no
// way to ask for the instruction. The counts of a batch of gets are in random cache lines of
// tables of megabytes; asking for all of them first lets their misses overlap.
#ifndef HOARD_PREFETCH_H
#define HOARD_PREFETCH_H

/// Asks the processor to bring the cache line at `address` into cache for a write soon, without
/// waiting for it.
static inline void hoard_prefetch(const void *address) { __builtin_prefetch(address, 1, 3); }

#endif
