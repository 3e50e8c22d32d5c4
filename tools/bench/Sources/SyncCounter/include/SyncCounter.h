// Counts the flushes this process makes, for the write benchmark: every fsync and fdatasync,
// and every write to a file opened with O_DSYNC or O_SYNC (LMDB writes its meta page so), with
// the time spent in them; and every write call to a file, with its bytes. The bench defines these
// functions itself, so the calls that liblmdb and libsqlite3 make resolve here first (an
// executable's definitions come before a shared library's), and each passes on to the C library's
// own through dlsym(RTLD_NEXT).
#pragma once
#include <stdint.h>

typedef struct {
    int64_t fsyncs;          // fsync and fdatasync calls
    int64_t fsyncNanos;      // time spent in them
    int64_t syncedWrites;    // pwrite/write calls on a descriptor with O_DSYNC or O_SYNC
    int64_t syncedWriteNanos;
    int64_t fileWrites;      // write calls of any kind to a file past stdin, stdout and stderr
    int64_t fileWriteBytes;  // the bytes they wrote
} SyncCounts;

// The counts so far (add-only; take differences around what you measure).
SyncCounts sync_counts(void);
