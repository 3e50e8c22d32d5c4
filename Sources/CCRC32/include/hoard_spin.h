// A spin-wait hint, for a consumer of changes that looks for the next batch a moment before it
// parks (Sources/Hoard/Observation): Swift has no way to ask for the instruction. It tells the
// processor that the loop waits, so that the loop takes less of a core it may share with the
// writer it waits for.
#ifndef HOARD_SPIN_H
#define HOARD_SPIN_H

/// One pause of a spin-wait loop.
static inline void hoard_spin_hint(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("isb" ::: "memory");
#endif
}

#endif
