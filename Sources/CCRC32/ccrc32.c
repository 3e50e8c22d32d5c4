// Folding CRC-32 with PCLMULQDQ (x86-64), after Intel's "Fast CRC Computation for Generic
// Polynomials Using PCLMULQDQ Instruction" (Gopal et al., 2009): the message is kept as one
// 128-bit remainder that each 16-byte block is folded into with two carry-less multiplies, then
// reduced from 128 to 96 to 64 bits, and to 32 by Barrett reduction. The constants are powers of
// x modulo the reflected polynomial 0x1DB710641, as that paper derives them. One lane: records
// are short (tens to hundreds of bytes), so the four-lane loop of long-buffer implementations
// would not pay.
#include "ccrc32.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

int hoard_crc32_accelerated(void) {
    static int known = -1;
    if (known < 0) {
        __builtin_cpu_init();
        known = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    }
    return known;
}

// x^(128+32) and x^(128-32) mod P, reflected: folding the remainder 128 bits further on.
#define FOLD128 _mm_set_epi64x(0x00ccaa009eLL, 0x01751997d0LL)

/// The remainder of everything so far, with `block` (the next 16 bytes) folded in.
__attribute__((target("pclmul,sse4.1")))
static inline __m128i fold(__m128i remainder, __m128i block) {
    __m128i low = _mm_clmulepi64_si128(remainder, FOLD128, 0x00);
    __m128i high = _mm_clmulepi64_si128(remainder, FOLD128, 0x11);
    return _mm_xor_si128(_mm_xor_si128(low, high), block);
}

/// The 32-bit CRC register of a 128-bit remainder.
__attribute__((target("pclmul,sse4.1")))
static uint32_t reduce(__m128i remainder) {
    const __m128i fold128 = FOLD128;
    // x^64 mod P, reflected: 96 bits down to 64.
    const __m128i fold64 = _mm_set_epi64x(0, 0x0163cd6124LL);
    // Barrett: the polynomial P and mu = floor(x^64 / P), reflected.
    const __m128i barrett = _mm_set_epi64x(0x01f7011641LL, 0x01db710641LL);
    const __m128i low32 = _mm_setr_epi32(-1, 0, -1, 0);

    // 128 bits to 96: the low half times x^(128-32), added to the high half.
    __m128i product = _mm_clmulepi64_si128(remainder, fold128, 0x10);
    remainder = _mm_xor_si128(_mm_srli_si128(remainder, 8), product);
    // 96 bits to 64: the low 32 bits times x^64, added to the rest.
    __m128i rest = _mm_srli_si128(remainder, 4);
    remainder = _mm_clmulepi64_si128(_mm_and_si128(remainder, low32), fold64, 0x00);
    remainder = _mm_xor_si128(remainder, rest);
    // Barrett reduction to 32 bits.
    __m128i quotient = _mm_clmulepi64_si128(_mm_and_si128(remainder, low32), barrett, 0x10);
    quotient = _mm_clmulepi64_si128(_mm_and_si128(quotient, low32), barrett, 0x00);
    remainder = _mm_xor_si128(remainder, quotient);
    return (uint32_t)_mm_extract_epi32(remainder, 1);
}

__attribute__((target("pclmul,sse4.1")))
uint32_t hoard_crc32_fold(uint32_t state, const uint8_t *data, size_t length) {
    __m128i remainder = _mm_xor_si128(_mm_loadu_si128((const __m128i *)data), _mm_cvtsi32_si128((int)state));
    for (size_t offset = 16; offset < length; offset += 16) {
        remainder = fold(remainder, _mm_loadu_si128((const __m128i *)(data + offset)));
    }
    return reduce(remainder);
}

__attribute__((target("pclmul,sse4.1")))
uint32_t hoard_crc32_fold_record(uint32_t state, const uint8_t *head, const uint8_t *data, size_t blocks) {
    __m128i remainder = _mm_xor_si128(_mm_loadu_si128((const __m128i *)head), _mm_cvtsi32_si128((int)state));
    // The block that straddles: the header's last 8 bytes, then the payload's first 8.
    remainder = fold(remainder, _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)(head + 16)), _mm_loadl_epi64((const __m128i *)data)));
    for (size_t block = 0; block < blocks; block++) {
        remainder = fold(remainder, _mm_loadu_si128((const __m128i *)(data + 8 + 16 * block)));
    }
    return reduce(remainder);
}

#else

int hoard_crc32_accelerated(void) { return 0; }

uint32_t hoard_crc32_fold(uint32_t state, const uint8_t *data, size_t length) {
    (void)data;
    (void)length;
    return state;  // never called: hoard_crc32_accelerated() is 0
}

uint32_t hoard_crc32_fold_record(uint32_t state, const uint8_t *head, const uint8_t *data, size_t blocks) {
    (void)head;
    (void)data;
    (void)blocks;
    return state;  // never called: hoard_crc32_accelerated() is 0
}

#endif
