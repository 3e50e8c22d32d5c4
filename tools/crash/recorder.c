// recorder: an LD_PRELOAD library that logs what a process does to the files under one directory,
// so that tools/crash/PowerLoss can rebuild the disk as a power cut at any moment could leave it.
//
//   HOARD_RECORD_ROOT  an absolute directory: calls on paths under it (and on the directory) are logged
//   HOARD_RECORD_LOG   the log file (outside the root), written in the format below
//
// Logged, in one order across threads (one lock is held across each call and its record, so the
// log's order is the order in which the calls took effect): opens (the flags, and whether the
// call created the file), writes with their offset and bytes (pwrite, pwritev, and write and
// writev at the descriptor's offset), size changes (ftruncate, fallocate), syncs (fsync,
// fdatasync, sync_file_range, msync of a mapping of a logged file), name changes (mkdir, link,
// rename, unlink, rmdir), closes, and the workload's acknowledgements: a write to standard output
// that starts with "ack ". A writable shared mapping of a logged file (other than an LMDB lock
// file) aborts the process: its writes would reach the disk without passing through the log.
//
// The log is a sequence of records, integers little-endian:
//   u8 kind, u8 flags, u16 zero, u32 handle, u64 a, u64 b, u32 length, then `length` bytes
// kind  1 open      handle: new id; a: the open flags; flags bit 0: created, bit 1: a directory; bytes: path
//       2 write     a: file offset; bytes: what was written (the count the call returned)
//       3 truncate  a: the new size
//       4 sync      (fsync, fdatasync, sync_file_range, msync)
//       5 close
//       6 mkdir     bytes: path
//       7 link      bytes: old path, NUL, new path
//       8 rename    bytes: old path, NUL, new path
//       9 unlink    bytes: path (also rmdir)
//      10 ack       bytes: the line, without its newline
//      11 allocate  a: offset; b: length (fallocate without flags, posix_fallocate: the size may grow)
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

enum { K_OPEN = 1, K_WRITE, K_TRUNCATE, K_SYNC, K_CLOSE, K_MKDIR, K_LINK, K_RENAME, K_UNLINK, K_ACK, K_ALLOCATE };
enum { MAX_FDS = 4096, MAX_MAPS = 64 };

static pthread_mutex_t lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static int log_fd = -2;  // -2: not set up yet; -1: recording is off
static char root[4096];
static size_t root_length;
static uint32_t handles[MAX_FDS];  // descriptor -> handle (0: not logged)
static uint32_t next_handle = 1;
static struct { void *start; size_t length; uint32_t handle; } maps[MAX_MAPS];

// The next definition of `name` (libc's), looked up once.
#define REAL(name) \
    static __typeof__(name) *real_##name; \
    if (real_##name == NULL) real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

static void die(const char *what) {
    char line[512];
    int n = snprintf(line, sizeof line, "hoard recorder: %s\n", what);
    syscall(SYS_write, 2, line, (size_t)n);
    abort();
}

// The log is written with raw system calls, so that it never passes through these wrappers.
static void put_bytes(const void *bytes, size_t count) {
    const char *p = bytes;
    while (count > 0) {
        long n = syscall(SYS_write, log_fd, p, count);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) die("cannot write the log (HOARD_RECORD_LOG)");
        p += n;
        count -= (size_t)n;
    }
}

static void setup(void) {
    if (log_fd != -2) return;
    const char *r = getenv("HOARD_RECORD_ROOT");
    const char *l = getenv("HOARD_RECORD_LOG");
    if (r == NULL || l == NULL || r[0] != '/') {
        log_fd = -1;
        return;
    }
    root_length = strlen(r);
    while (root_length > 1 && r[root_length - 1] == '/') root_length--;
    if (root_length >= sizeof root) die("HOARD_RECORD_ROOT is too long");
    memcpy(root, r, root_length);
    root[root_length] = 0;
    int fd = (int)syscall(SYS_openat, AT_FDCWD, l, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) die("cannot open HOARD_RECORD_LOG");
    log_fd = fd;
}

static void record(int kind, int flags, uint32_t handle, uint64_t a, uint64_t b, const void *bytes, uint32_t length) {
    unsigned char header[28];
    header[0] = (unsigned char)kind;
    header[1] = (unsigned char)flags;
    header[2] = header[3] = 0;
    memcpy(header + 4, &handle, 4);
    memcpy(header + 8, &a, 8);
    memcpy(header + 16, &b, 8);
    memcpy(header + 24, &length, 4);
    put_bytes(header, sizeof header);
    if (length > 0) put_bytes(bytes, length);
}

// Makes `path` (relative to `dirfd`, as the *at calls take it) absolute into `out`; returns whether
// it is the root or under it. Paths are compared as written: the workload names its store by an
// absolute path.
static int under_root(int dirfd, const char *path, char *out, size_t size) {
    if (path == NULL) return 0;
    int written;
    if (path[0] == '/') {
        written = snprintf(out, size, "%s", path);
    } else {
        char base[4096];
        if (dirfd == AT_FDCWD) {
            if (getcwd(base, sizeof base) == NULL) return 0;
        } else {
            char link[64];
            snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
            ssize_t n = readlink(link, base, sizeof base - 1);
            if (n <= 0) return 0;
            base[n] = 0;
        }
        written = snprintf(out, size, "%s/%s", base, path);
    }
    if (written < 0 || (size_t)written >= size) return 0;  // longer than PATH_MAX: no file of ours
    size_t n = strlen(out);
    while (n > 1 && out[n - 1] == '/') out[--n] = 0;
    return strncmp(out, root, root_length) == 0 && (out[root_length] == 0 || out[root_length] == '/');
}

static uint32_t handle_of(int fd) { return (fd >= 0 && fd < MAX_FDS) ? handles[fd] : 0; }

static int is_lock_file(const char *path) {
    size_t n = strlen(path);
    return (n >= 9 && strcmp(path + n - 9, "/lock.mdb") == 0) || (n >= 5 && strcmp(path + n - 5, "-lock") == 0);
}

static int do_open(int dirfd, const char *path, int flags, mode_t mode) {
    REAL(openat);
    setup();
    char full[4096];
    if (log_fd < 0 || !under_root(dirfd, path, full, sizeof full)) {
        return real_openat(dirfd, path, flags, mode);
    }
    pthread_mutex_lock(&lock);
    struct stat before;
    int existed = stat(full, &before) == 0;
    int fd = real_openat(dirfd, path, flags, mode);
    if (fd >= MAX_FDS) die("a recorded file got a descriptor above 4095: its calls would not be logged");
    if (fd >= 0) {
        struct stat st;
        int directory = fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
        handles[fd] = next_handle++;
        record(K_OPEN, (!existed ? 1 : 0) | (directory ? 2 : 0), handles[fd], (uint64_t)flags, 0, full,
               (uint32_t)strlen(full));
    }
    pthread_mutex_unlock(&lock);
    return fd;
}

static mode_t mode_argument(int flags, va_list arguments) {
    return (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(arguments, int) : 0;
}

int open(const char *path, int flags, ...) {
    va_list v;
    va_start(v, flags);
    mode_t mode = mode_argument(flags, v);
    va_end(v);
    return do_open(AT_FDCWD, path, flags, mode);
}

int open64(const char *path, int flags, ...) {
    va_list v;
    va_start(v, flags);
    mode_t mode = mode_argument(flags, v);
    va_end(v);
    return do_open(AT_FDCWD, path, flags, mode);
}

int openat(int dirfd, const char *path, int flags, ...) {
    va_list v;
    va_start(v, flags);
    mode_t mode = mode_argument(flags, v);
    va_end(v);
    return do_open(dirfd, path, flags, mode);
}

int openat64(int dirfd, const char *path, int flags, ...) {
    va_list v;
    va_start(v, flags);
    mode_t mode = mode_argument(flags, v);
    va_end(v);
    return do_open(dirfd, path, flags, mode);
}

int creat(const char *path, mode_t mode) { return do_open(AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC, mode); }

int close(int fd) {
    REAL(close);
    uint32_t handle = handle_of(fd);
    if (handle == 0) return real_close(fd);
    // Forgotten before the call: once closed, the number may be reused by another thread at once.
    pthread_mutex_lock(&lock);
    handles[fd] = 0;
    record(K_CLOSE, 0, handle, 0, 0, NULL, 0);
    int result = real_close(fd);
    pthread_mutex_unlock(&lock);
    return result;
}

// One write call, so that a single logging path serves them all.
struct write_call {
    int fd;
    const struct iovec *vector;
    int count;
    off_t offset;  // -1: at the descriptor's offset (write, writev)
};

static ssize_t perform(const struct write_call *c) {
    REAL(pwrite);
    REAL(write);
    REAL(writev);
    REAL(pwritev);
    if (c->count == 1) {
        return c->offset >= 0 ? real_pwrite(c->fd, c->vector[0].iov_base, c->vector[0].iov_len, c->offset)
                              : real_write(c->fd, c->vector[0].iov_base, c->vector[0].iov_len);
    }
    return c->offset >= 0 ? real_pwritev(c->fd, c->vector, c->count, c->offset)
                          : real_writev(c->fd, c->vector, c->count);
}

static ssize_t logged_write(const struct write_call *c) {
    setup();
    uint32_t handle = handle_of(c->fd);
    int ack = handle == 0 && c->fd == 1 && log_fd >= 0 && c->count > 0 && c->vector[0].iov_len >= 4 &&
              memcmp(c->vector[0].iov_base, "ack ", 4) == 0;
    if (handle == 0 && !ack) return perform(c);
    pthread_mutex_lock(&lock);
    off_t at = c->offset >= 0 ? c->offset : (ack ? 0 : lseek(c->fd, 0, SEEK_CUR));
    ssize_t written = perform(c);
    int saved = errno;
    if (written > 0) {
        size_t total = (size_t)written;
        char *bytes = malloc(total);
        if (bytes == NULL) die("out of memory");
        size_t copied = 0;
        for (int i = 0; i < c->count && copied < total; i++) {
            size_t n = c->vector[i].iov_len < total - copied ? c->vector[i].iov_len : total - copied;
            memcpy(bytes + copied, c->vector[i].iov_base, n);
            copied += n;
        }
        if (ack) {
            size_t n = total;
            while (n > 0 && bytes[n - 1] == '\n') n--;
            record(K_ACK, 0, 0, 0, 0, bytes, (uint32_t)n);
        } else {
            record(K_WRITE, 0, handle, (uint64_t)at, 0, bytes, (uint32_t)total);
        }
        free(bytes);
    }
    pthread_mutex_unlock(&lock);
    errno = saved;
    return written;
}

ssize_t pwrite(int fd, const void *buffer, size_t size, off_t offset) {
    struct iovec one = {(void *)buffer, size};
    return logged_write(&(struct write_call){fd, &one, 1, offset});
}
ssize_t pwrite64(int fd, const void *buffer, size_t size, off_t offset) { return pwrite(fd, buffer, size, offset); }

ssize_t write(int fd, const void *buffer, size_t size) {
    struct iovec one = {(void *)buffer, size};
    return logged_write(&(struct write_call){fd, &one, 1, -1});
}

ssize_t writev(int fd, const struct iovec *vector, int count) {
    return logged_write(&(struct write_call){fd, vector, count, -1});
}

ssize_t pwritev(int fd, const struct iovec *vector, int count, off_t offset) {
    return logged_write(&(struct write_call){fd, vector, count, offset});
}
ssize_t pwritev64(int fd, const struct iovec *vector, int count, off_t offset) {
    return pwritev(fd, vector, count, offset);
}

static int logged_sync(int fd, int result) {
    uint32_t handle = handle_of(fd);
    if (handle != 0 && result == 0) record(K_SYNC, 0, handle, 0, 0, NULL, 0);
    return result;
}

int fsync(int fd) {
    REAL(fsync);
    if (handle_of(fd) == 0) return real_fsync(fd);
    pthread_mutex_lock(&lock);
    int result = logged_sync(fd, real_fsync(fd));
    pthread_mutex_unlock(&lock);
    return result;
}

int fdatasync(int fd) {
    REAL(fdatasync);
    if (handle_of(fd) == 0) return real_fdatasync(fd);
    pthread_mutex_lock(&lock);
    int result = logged_sync(fd, real_fdatasync(fd));
    pthread_mutex_unlock(&lock);
    return result;
}

int sync_file_range(int fd, off64_t offset, off64_t count, unsigned int flags) {
    REAL(sync_file_range);
    if (handle_of(fd) == 0) return real_sync_file_range(fd, offset, count, flags);
    // Only a range sync that waits for the writes counts; the model treats any as a whole-file
    // sync, which LMDB never relies on (it does not call it).
    pthread_mutex_lock(&lock);
    int result = real_sync_file_range(fd, offset, count, flags);
    if (result == 0 && (flags & SYNC_FILE_RANGE_WAIT_AFTER)) logged_sync(fd, 0);
    pthread_mutex_unlock(&lock);
    return result;
}

int ftruncate(int fd, off_t size) {
    REAL(ftruncate);
    uint32_t handle = handle_of(fd);
    if (handle == 0) return real_ftruncate(fd, size);
    pthread_mutex_lock(&lock);
    int result = real_ftruncate(fd, size);
    if (result == 0) record(K_TRUNCATE, 0, handle, (uint64_t)size, 0, NULL, 0);
    pthread_mutex_unlock(&lock);
    return result;
}
int ftruncate64(int fd, off_t size) { return ftruncate(fd, size); }

int fallocate(int fd, int mode, off_t offset, off_t length) {
    REAL(fallocate);
    uint32_t handle = handle_of(fd);
    if (handle == 0) return real_fallocate(fd, mode, offset, length);
    pthread_mutex_lock(&lock);
    int result = real_fallocate(fd, mode, offset, length);
    if (result == 0 && mode == 0) record(K_ALLOCATE, 0, handle, (uint64_t)offset, (uint64_t)length, NULL, 0);
    if (result == 0 && mode != 0) die("fallocate with flags on a recorded file: the model has no such change");
    pthread_mutex_unlock(&lock);
    return result;
}

int posix_fallocate(int fd, off_t offset, off_t length) {
    REAL(posix_fallocate);
    uint32_t handle = handle_of(fd);
    if (handle == 0) return real_posix_fallocate(fd, offset, length);
    pthread_mutex_lock(&lock);
    int result = real_posix_fallocate(fd, offset, length);
    if (result == 0) record(K_ALLOCATE, 0, handle, (uint64_t)offset, (uint64_t)length, NULL, 0);
    pthread_mutex_unlock(&lock);
    return result;
}

static void *do_mmap(void *address, size_t length, int protection, int flags, int fd, off_t offset) {
    REAL(mmap);
    uint32_t handle = handle_of(fd);
    if (handle == 0) return real_mmap(address, length, protection, flags, fd, offset);
    pthread_mutex_lock(&lock);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    char target[4096];
    ssize_t n = readlink(path, target, sizeof target - 1);
    target[n > 0 ? n : 0] = 0;
    if ((protection & PROT_WRITE) && (flags & MAP_SHARED) && !is_lock_file(target)) {
        die("a writable shared mapping of a recorded file (MDB_WRITEMAP?): its writes would not be in the log");
    }
    void *result = real_mmap(address, length, protection, flags, fd, offset);
    if (result != MAP_FAILED) {
        for (int i = 0; i < MAX_MAPS; i++) {
            if (maps[i].handle == 0) {
                maps[i].start = result, maps[i].length = length, maps[i].handle = handle;
                break;
            }
        }
    }
    pthread_mutex_unlock(&lock);
    return result;
}

void *mmap(void *address, size_t length, int protection, int flags, int fd, off_t offset) {
    return do_mmap(address, length, protection, flags, fd, offset);
}
void *mmap64(void *address, size_t length, int protection, int flags, int fd, off_t offset) {
    return do_mmap(address, length, protection, flags, fd, offset);
}

int munmap(void *address, size_t length) {
    REAL(munmap);
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_MAPS; i++) {
        if (maps[i].handle != 0 && maps[i].start == address) maps[i].handle = 0;
    }
    int result = real_munmap(address, length);
    pthread_mutex_unlock(&lock);
    return result;
}

int msync(void *address, size_t length, int flags) {
    REAL(msync);
    pthread_mutex_lock(&lock);
    int result = real_msync(address, length, flags);
    for (int i = 0; i < MAX_MAPS && result == 0 && (flags & MS_SYNC); i++) {
        char *start = maps[i].start;
        if (maps[i].handle != 0 && (char *)address >= start && (char *)address < start + maps[i].length) {
            record(K_SYNC, 0, maps[i].handle, 0, 0, NULL, 0);
        }
    }
    pthread_mutex_unlock(&lock);
    return result;
}

// Name changes: logged when the call succeeded and a path is under the root.
static void record_names(int kind, int first_dir, const char *first, int second_dir, const char *second) {
    char a[4096], b[4096];
    int in_a = under_root(first_dir, first, a, sizeof a);
    int in_b = second != NULL && under_root(second_dir, second, b, sizeof b);
    if (!in_a && !in_b) return;
    if (second == NULL) {
        record(kind, 0, 0, 0, 0, a, (uint32_t)strlen(a));
        return;
    }
    if (!in_a || !in_b) die("a name moved into or out of the recorded directory: the model has no such change");
    size_t la = strlen(a), lb = strlen(b);
    char *both = malloc(la + 1 + lb);
    if (both == NULL) die("out of memory");
    memcpy(both, a, la);
    both[la] = 0;
    memcpy(both + la + 1, b, lb);
    record(kind, 0, 0, 0, 0, both, (uint32_t)(la + 1 + lb));
    free(both);
}

#define NAME_CALL(name, kind, params, args, names) \
    int name params { \
        REAL(name); \
        setup(); \
        if (log_fd < 0) return real_##name args; \
        pthread_mutex_lock(&lock); \
        int result = real_##name args; \
        int saved = errno; \
        if (result == 0) record_names names; \
        pthread_mutex_unlock(&lock); \
        errno = saved; \
        return result; \
    }

NAME_CALL(mkdir, K_MKDIR, (const char *path, mode_t mode), (path, mode), (K_MKDIR, AT_FDCWD, path, 0, NULL))
NAME_CALL(mkdirat, K_MKDIR, (int dir, const char *path, mode_t mode), (dir, path, mode), (K_MKDIR, dir, path, 0, NULL))
NAME_CALL(link, K_LINK, (const char *old, const char *new), (old, new), (K_LINK, AT_FDCWD, old, AT_FDCWD, new))
NAME_CALL(linkat, K_LINK, (int od, const char *old, int nd, const char *new, int flags), (od, old, nd, new, flags),
          (K_LINK, od, old, nd, new))
NAME_CALL(rename, K_RENAME, (const char *old, const char *new), (old, new), (K_RENAME, AT_FDCWD, old, AT_FDCWD, new))
NAME_CALL(renameat, K_RENAME, (int od, const char *old, int nd, const char *new), (od, old, nd, new),
          (K_RENAME, od, old, nd, new))
NAME_CALL(unlink, K_UNLINK, (const char *path), (path), (K_UNLINK, AT_FDCWD, path, 0, NULL))
NAME_CALL(rmdir, K_UNLINK, (const char *path), (path), (K_UNLINK, AT_FDCWD, path, 0, NULL))
NAME_CALL(unlinkat, K_UNLINK, (int dir, const char *path, int flags), (dir, path, flags), (K_UNLINK, dir, path, 0, NULL))
