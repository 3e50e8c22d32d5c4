// faultshim: an LD_PRELOAD library that makes one I/O call of a process fail, for Hoard's fault
// tests (Tests/HoardTests/FaultTests.swift builds it with `cc -shared -fPIC`).
//
//   HOARD_FAULT_CALL   pwrite | writev | write | fdatasync  the call to break (LMDB's data, copy and sync calls)
//   HOARD_FAULT_AT     N        the N-th such call (from 1) on a descriptor above 2 fails ...
//   HOARD_FAULT_ERRNO  EIO | ENOSPC                          ... with this error, and every later one
//
// Calls on standard input, output and error pass through, so the workload can still report.
// Later calls keep failing: a device that failed once is not trusted by the process any more.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

static long fault_count;

static int fault_now(const char *call, int fd) {
    const char *wanted = getenv("HOARD_FAULT_CALL");
    const char *at = getenv("HOARD_FAULT_AT");
    if (fd <= 2 || wanted == NULL || at == NULL || strcmp(wanted, call) != 0) return 0;
    fault_count += 1;
    if (fault_count < atol(at)) return 0;
    const char *code = getenv("HOARD_FAULT_ERRNO");
    errno = (code != NULL && strcmp(code, "ENOSPC") == 0) ? ENOSPC : EIO;
    return 1;
}

ssize_t pwrite(int fd, const void *buffer, size_t count, off_t offset) {
    static ssize_t (*real)(int, const void *, size_t, off_t);
    if (real == NULL) real = (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
    if (fault_now("pwrite", fd)) return -1;
    return real(fd, buffer, count, offset);
}

ssize_t writev(int fd, const struct iovec *vector, int count) {
    static ssize_t (*real)(int, const struct iovec *, int);
    if (real == NULL) real = (ssize_t (*)(int, const struct iovec *, int))dlsym(RTLD_NEXT, "writev");
    if (fault_now("writev", fd)) return -1;
    return real(fd, vector, count);
}

ssize_t write(int fd, const void *buffer, size_t count) {
    static ssize_t (*real)(int, const void *, size_t);
    if (real == NULL) real = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    if (fault_now("write", fd)) return -1;
    return real(fd, buffer, count);
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    if (fault_now("fdatasync", fd)) return -1;
    return real(fd);
}
