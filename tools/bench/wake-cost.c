// wake-cost: what waking a parked thread costs the thread that wakes it, on this machine. A writer
// that resumes a parked consumer pays this inside its commit; on a virtual machine it can be far
// more than a system call, because the other vCPU is idle and must be sent an interrupt.
//
//   cc -O2 -pthread tools/bench/wake-cost.c -o /tmp/wake-cost && /tmp/wake-cost
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { samples = 2000 };

static _Atomic int word;

static long nanoseconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static void *sleeper(void *unused) {
    (void)unused;
    for (;;) syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
    return NULL;
}

static int ascending(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

// The median time of `call`, each sample after half a millisecond of spinning, long enough for
// the sleeping thread to park again and its vCPU to go idle.
static double median_micros(void (*call)(void)) {
    static long times[samples];
    for (int i = 0; i < samples; i++) {
        long gap = nanoseconds();
        while (nanoseconds() - gap < 500000) {}
        long start = nanoseconds();
        call();
        times[i] = nanoseconds() - start;
    }
    qsort(times, samples, sizeof times[0], ascending);
    return times[samples / 2] / 1000.0;
}

static void plain_call(void) { syscall(SYS_getppid); }
static void wake_parked(void) { syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); }
static int nobody;
static void wake_nobody(void) { syscall(SYS_futex, &nobody, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); }

int main(void) {
    pthread_t thread;
    if (pthread_create(&thread, NULL, sleeper, NULL) != 0) {
        perror("pthread_create");
        return 1;
    }
    printf("a system call (getppid):           %.2f µs\n", median_micros(plain_call));
    printf("futex wake, nobody waiting:        %.2f µs\n", median_micros(wake_nobody));
    printf("futex wake of a parked thread:     %.2f µs\n", median_micros(wake_parked));
    return 0;
}
