/* cache_bench.h - shared body of cache-thrash.c and cache-scratch.c (Hoard's
 * false-sharing benchmarks), written from shared/BENCHMARKS.md.
 *
 * usage: cache-thrash  [threads iterations objsize repetitions]
 *        cache-scratch [threads iterations objsize repetitions]
 *        canonical: T 1000 1 2000000
 *
 * Each thread, for each of `iterations` iterations (per thread, not divided),
 * mallocs one object of `objsize` bytes, writes every byte of it and reads it
 * back (through a volatile pointer, summing into a register) repetitions/threads
 * times, then frees it.
 * The total amount of writing is therefore fixed, and an allocator that
 * keeps different threads' objects on different cache lines gets a T-fold
 * speedup from T threads.
 *
 * CACHE_SCRATCH=1 (passive false sharing): before the threads start, the main
 * thread mallocs `threads` adjacent objects of `objsize` bytes and hands one
 * to each thread, which frees it as the first thing it does. An allocator
 * that keeps a remotely freed object in the freeing thread's cache hands it
 * straight back to that thread - on a cache line shared with the neighbours.
 *
 * Set CACHE_BENCH_ADDRS=1 to print (on stderr) the address and cache line of
 * each thread's first object and, for scratch, of the handed objects.
 *
 * Metric: elapsed wall time in seconds (lower is better); the T=2 vs T=1
 * speedup is computed by run.sh.
 */
#include "common.h"

#include <pthread.h>

#ifndef CACHE_SCRATCH
#error define CACHE_SCRATCH to 0 or 1
#endif

typedef struct {
    _Alignas(CACHE_LINE) void *handed; /* scratch only: object to free first */
    long index;
    unsigned long sink; /* keeps the read-back sum alive */
    char pad[CACHE_LINE];
} arg_t;

static long g_iterations, g_objsize, g_reps_per_thread;
static int g_show_addrs; /* env CACHE_BENCH_ADDRS=1: print object addresses */

static void *run(void *varg) {
    arg_t *a = varg;
    unsigned long sum = 0;
    gate_wait();
    if (a->handed != NULL)
        free(a->handed);
    for (long it = 0; it < g_iterations; it++) {
        volatile char *obj = malloc((size_t)g_objsize);
        if (obj == NULL) {
            fprintf(stderr, "cache bench: out of memory\n");
            exit(1);
        }
        if (it == 0 && g_show_addrs)
            fprintf(stderr, "thread %ld: first object %p (cache line %#lx)\n", a->index,
                    (void *)obj, (unsigned long)((uintptr_t)obj / CACHE_LINE));
        for (long r = 0; r < g_reps_per_thread; r++) {
            for (long k = 0; k < g_objsize; k++) {
                obj[k] = (char)k;
                sum += (unsigned char)obj[k];
            }
        }
        free((void *)obj);
    }
    a->sink = sum;
    return NULL;
}

int main(int argc, char **argv) {
    const char *name = CACHE_SCRATCH ? "cache-scratch" : "cache-thrash";
    if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        printf("usage: %s [threads iterations objsize repetitions]\n"
               "canonical: T 1000 1 2000000\n",
               argv[0]);
        return 0;
    }
    long threads = arg_long(argc, argv, 1, 2);
    g_iterations = arg_long(argc, argv, 2, 1000);
    g_objsize = arg_long(argc, argv, 3, 1);
    long reps = arg_long(argc, argv, 4, 2000000);
    if (threads < 1 || threads > 1024 || g_iterations < 1 || g_objsize < 1 || reps < threads) {
        fprintf(stderr, "%s: bad arguments\n", name);
        return 2;
    }
    g_reps_per_thread = reps / threads;

    arg_t *args = aligned_alloc(CACHE_LINE, sizeof(arg_t) * (size_t)threads);
    if (args == NULL) {
        fprintf(stderr, "%s: out of memory\n", name);
        return 1;
    }
    memset(args, 0, sizeof(arg_t) * (size_t)threads);
    g_show_addrs = getenv("CACHE_BENCH_ADDRS") != NULL;
    for (long t = 0; t < threads; t++)
        args[t].index = t;
    if (CACHE_SCRATCH) {
        /* T adjacent small objects, allocated back to back by main. */
        for (long t = 0; t < threads; t++) {
            char *p = xmalloc_or_die((size_t)g_objsize);
            memset(p, 0, (size_t)g_objsize);
            args[t].handed = p;
            if (g_show_addrs)
                fprintf(stderr, "main: object handed to thread %ld: %p (cache line %#lx)\n", t,
                        (void *)p, (unsigned long)((uintptr_t)p / CACHE_LINE));
        }
    }

    double elapsed = run_timed(name, threads, run, args, sizeof args[0]);
    free(args);

    printf("%s: threads=%ld iterations=%ld objsize=%ld repetitions=%ld: %.4f s\n", name, threads,
           g_iterations, g_objsize, reps, elapsed);
    print_result(name, threads, "s", elapsed);
    return 0;
}
