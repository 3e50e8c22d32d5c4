// CRC-32 (IEEE 802.3, reflected) with the carry-less multiply instruction, for Hoard's record
// checksums. The Swift side (RecordHeader.swift) owns the checksum; this only folds long runs.
#ifndef HOARD_CCRC32_H
#define HOARD_CCRC32_H

#include <stddef.h>
#include <stdint.h>

/// Whether this machine has the instructions `hoard_crc32_fold` needs; when not, it must not be
/// called. Checked once.
int hoard_crc32_accelerated(void);

/// Advances the running CRC register `state` (the value before the final inversion) over
/// `length` bytes at `data`; `length` is a multiple of 16 and at least 32.
uint32_t hoard_crc32_fold(uint32_t state, const uint8_t *data, size_t length);

/// The same over the 24 bytes at `head` followed by the first `8 + 16 * blocks` bytes at `data`:
/// a record's header and payload, which are not adjacent in memory, folded as one run.
uint32_t hoard_crc32_fold_record(uint32_t state, const uint8_t *head, const uint8_t *data, size_t blocks);

#endif
