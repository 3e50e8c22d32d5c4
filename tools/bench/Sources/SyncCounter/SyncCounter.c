#define _GNU_SOURCE
#include "SyncCounter.h"
#include <dlfcn.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

static _Atomic int64_t fsyncs, fsyncNanos, syncedWrites, syncedWriteNanos;

static int64_t nanos(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

// The C library's own function, looked up once (a race looks it up twice, to the same address).
#define REAL(name) \
    static __typeof__(name) *real_##name; \
    if (!real_##name) real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

int fsync(int fd) {
    REAL(fsync);
    int64_t start = nanos();
    int result = real_fsync(fd);
    atomic_fetch_add(&fsyncNanos, nanos() - start);
    atomic_fetch_add(&fsyncs, 1);
    return result;
}

int fdatasync(int fd) {
    REAL(fdatasync);
    int64_t start = nanos();
    int result = real_fdatasync(fd);
    atomic_fetch_add(&fsyncNanos, nanos() - start);
    atomic_fetch_add(&fsyncs, 1);
    return result;
}

// Whether a descriptor writes through (O_DSYNC or O_SYNC), asked of the kernel once per
// descriptor and remembered until it is closed, so that SQLite's many plain writes do not each
// pay a system call more than they would (0: not asked yet, 1: plain, 2: synced).
static _Atomic signed char kinds[4096];

static int synced(int fd) {
    if (fd < 0 || fd >= 4096) {
        int flags = fcntl(fd, F_GETFL);
        return flags >= 0 && (flags & (O_DSYNC | O_SYNC)) != 0;
    }
    signed char kind = atomic_load_explicit(&kinds[fd], memory_order_relaxed);
    if (kind == 0) {
        int flags = fcntl(fd, F_GETFL);
        kind = flags >= 0 && (flags & (O_DSYNC | O_SYNC)) != 0 ? 2 : 1;
        atomic_store_explicit(&kinds[fd], kind, memory_order_relaxed);
    }
    return kind == 2;
}

int close(int fd) {
    REAL(close);
    if (fd >= 0 && fd < 4096) atomic_store_explicit(&kinds[fd], 0, memory_order_relaxed);
    return real_close(fd);
}

// A write through `write`, timed and counted when its descriptor writes through.
static ssize_t counted(ssize_t (*write)(int, const void *, size_t, off_t), int fd, const void *buffer, size_t count,
                       off_t offset) {
    if (!synced(fd)) return write(fd, buffer, count, offset);
    int64_t start = nanos();
    ssize_t result = write(fd, buffer, count, offset);
    atomic_fetch_add(&syncedWriteNanos, nanos() - start);
    atomic_fetch_add(&syncedWrites, 1);
    return result;
}

ssize_t pwrite(int fd, const void *buffer, size_t count, off_t offset) {
    REAL(pwrite);
    return counted(real_pwrite, fd, buffer, count, offset);
}

ssize_t pwrite64(int fd, const void *buffer, size_t count, off_t offset) {
    REAL(pwrite64);
    return counted(real_pwrite64, fd, buffer, count, offset);
}

SyncCounts sync_counts(void) {
    SyncCounts counts = {
        atomic_load(&fsyncs), atomic_load(&fsyncNanos), atomic_load(&syncedWrites), atomic_load(&syncedWriteNanos)};
    return counts;
}
