#define _GNU_SOURCE
#include "SyncCounter.h"
#include <dlfcn.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static _Atomic int64_t fsyncs, fsyncNanos, syncedWrites, syncedWriteNanos, fileWrites, fileWriteBytes;

// Every write call to a descriptor past the standard ones (the stores' files: the bench writes to
// no socket or pipe of its own), and the bytes it wrote: what a commit hands the kernel.
static void noteWrite(int fd, ssize_t written) {
    if (fd <= 2 || written < 0) return;
    atomic_fetch_add_explicit(&fileWrites, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&fileWriteBytes, written, memory_order_relaxed);
}

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
    if (!synced(fd)) {
        ssize_t result = write(fd, buffer, count, offset);
        noteWrite(fd, result);
        return result;
    }
    int64_t start = nanos();
    ssize_t result = write(fd, buffer, count, offset);
    atomic_fetch_add(&syncedWriteNanos, nanos() - start);
    atomic_fetch_add(&syncedWrites, 1);
    noteWrite(fd, result);
    return result;
}

// LMDB writes a commit's runs of pages with writev after a seek, a single page with pwrite;
// SQLite writes with pwrite64 (or write). None of these writes through O_DSYNC but LMDB's meta page.
ssize_t write(int fd, const void *buffer, size_t count) {
    REAL(write);
    ssize_t result = real_write(fd, buffer, count);
    noteWrite(fd, result);
    return result;
}

ssize_t writev(int fd, const struct iovec *iov, int count) {
    REAL(writev);
    ssize_t result = real_writev(fd, iov, count);
    noteWrite(fd, result);
    return result;
}

ssize_t pwritev(int fd, const struct iovec *iov, int count, off_t offset) {
    REAL(pwritev);
    ssize_t result = real_pwritev(fd, iov, count, offset);
    noteWrite(fd, result);
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
    SyncCounts counts = {atomic_load(&fsyncs),       atomic_load(&fsyncNanos), atomic_load(&syncedWrites),
                         atomic_load(&syncedWriteNanos), atomic_load(&fileWrites), atomic_load(&fileWriteBytes)};
    return counts;
}
