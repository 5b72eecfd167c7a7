/* common.h - small helpers shared by the refalloc C anchor benchmarks.
 *
 * Everything here is header-only (static inline) so each benchmark is a
 * single translation unit that calls plain malloc/free; LD_PRELOAD can then
 * swap the allocator underneath without recompiling.
 */
#ifndef REFALLOC_BENCH_COMMON_H
#define REFALLOC_BENCH_COMMON_H

#define _GNU_SOURCE 1
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Keep the compiler from reasoning about (and eliding) a heap object: the
 * pointer "escapes" into an asm statement that may read or write memory.
 * GCC is otherwise allowed to delete a malloc/free pair whose memory is
 * never observably used. */
static inline void escape(void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }

/* A compiler-only barrier (no instruction emitted). */
static inline void clobber(void) { __asm__ volatile("" : : : "memory"); }

/* Monotonic wall clock in seconds. */
static inline double now_sec(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void sleep_sec(double s) {
    struct timespec ts;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* xorshift64* PRNG: cheap, per-thread state, no locks (unlike rand()). */
typedef struct {
    uint64_t s;
} rng_t;

static inline void rng_seed(rng_t *r, uint64_t seed) {
    /* splitmix64 scramble so that small consecutive seeds diverge. */
    uint64_t z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    r->s = z ? z : 0x2545F4914F6CDD1Dull;
}

static inline uint64_t rng_next(rng_t *r) {
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* Uniform-ish integer in [0, n); n > 0. Uses the high 32 bits. */
static inline uint32_t rng_below(rng_t *r, uint32_t n) {
    return (uint32_t)(((rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

/* Parse a positional integer argument with a default. */
static inline long arg_long(int argc, char **argv, int idx, long def) {
    if (idx < argc) {
        char *end = NULL;
        long v = strtol(argv[idx], &end, 10);
        if (end == argv[idx] || *end != '\0') {
            fprintf(stderr, "bad integer argument %d: '%s'\n", idx, argv[idx]);
            exit(2);
        }
        return v;
    }
    return def;
}

static inline double arg_double(int argc, char **argv, int idx, double def) {
    if (idx < argc) {
        char *end = NULL;
        double v = strtod(argv[idx], &end);
        if (end == argv[idx] || *end != '\0') {
            fprintf(stderr, "bad number argument %d: '%s'\n", idx, argv[idx]);
            exit(2);
        }
        return v;
    }
    return def;
}

static inline void *xmalloc_or_die(size_t n) {
    void *p = malloc(n);
    if (p == NULL) {
        fprintf(stderr, "out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

/* The single machine-readable line every benchmark ends with. */
static inline void print_result(const char *workload, long threads, const char *metric,
                                double value) {
    printf("RESULT workload=%s threads=%ld metric=%s value=%.6g\n", workload, threads, metric,
           value);
    fflush(stdout);
}

#define CACHE_LINE 64


/* The start gate every threaded benchmark shares: workers wait on it so that
 * thread start-up is outside the clock. */
static pthread_barrier_t g_barrier;

static inline void gate_wait(void) { pthread_barrier_wait(&g_barrier); }

/* run_timed starts threads workers run(arg + t*stride), releases them together,
 * joins them, and returns the seconds between the release and the last join.
 * On a failed pthread_create it prints and exits. */
static inline double run_timed(const char *name, long threads, void *(*run)(void *), void *arg, size_t stride) {
    pthread_t *tids = xmalloc_or_die(sizeof(pthread_t) * (size_t)threads);
    pthread_barrier_init(&g_barrier, NULL, (unsigned)threads + 1);
    for (long t = 0; t < threads; t++)
        if (pthread_create(&tids[t], NULL, run, arg ? (char *)arg + (size_t)t * stride : NULL) != 0) {
            fprintf(stderr, "%s: pthread_create failed\n", name);
            exit(1);
        }
    pthread_barrier_wait(&g_barrier);
    double t0 = now_sec();
    for (long t = 0; t < threads; t++)
        pthread_join(tids[t], NULL);
    double elapsed = now_sec() - t0;
    pthread_barrier_destroy(&g_barrier);
    free(tids);
    return elapsed;
}

#endif
