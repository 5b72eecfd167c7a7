/* threadtest.c - Hoard's threadtest, written from shared/BENCHMARKS.md.
 *
 * usage: threadtest [threads iterations objects work size]
 *        canonical: T 1000 10000 0 8
 *
 * Each of `threads` threads, for each of `iterations` iterations, allocates
 * objects/threads objects of size*8 bytes (the original allocates arrays of
 * `size` 8-byte objects, so 8 -> 64 B), initialising every 8-byte word, then
 * frees them all in allocation order. `work` is a busy loop of that many
 * steps after each malloc and each free (0 in the canonical run). No
 * cross-thread frees. Metric: elapsed wall time in seconds (lower is better).
 */
#include "common.h"

#include <pthread.h>

static long g_iterations, g_per_thread, g_work, g_words;

static inline void busy(long work) {
    for (volatile long w = 0; w < work; w++) {
    }
}

static void *run(void *arg) {
    (void)arg;
    void **objs = xmalloc_or_die((size_t)g_per_thread * sizeof(void *));
    gate_wait();
    for (long it = 0; it < g_iterations; it++) {
        for (long i = 0; i < g_per_thread; i++) {
            uint64_t *p = malloc((size_t)g_words * 8);
            if (p == NULL) {
                fprintf(stderr, "threadtest: out of memory\n");
                exit(1);
            }
            for (long w = 0; w < g_words; w++)
                p[w] = (uint64_t)w;
            escape(p);
            objs[i] = p;
            busy(g_work);
        }
        for (long i = 0; i < g_per_thread; i++) {
            free(objs[i]);
            busy(g_work);
        }
    }
    free(objs);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        printf("usage: %s [threads iterations objects work size]\n"
               "canonical: T 1000 10000 0 8 (objects of 8*size bytes)\n",
               argv[0]);
        return 0;
    }
    long threads = arg_long(argc, argv, 1, 2);
    g_iterations = arg_long(argc, argv, 2, 1000);
    long objects = arg_long(argc, argv, 3, 10000);
    g_work = arg_long(argc, argv, 4, 0);
    g_words = arg_long(argc, argv, 5, 8);
    if (threads < 1 || threads > 1024 || g_iterations < 1 || objects < threads || g_work < 0 ||
        g_words < 1) {
        fprintf(stderr, "threadtest: bad arguments\n");
        return 2;
    }
    g_per_thread = objects / threads;

    double elapsed = run_timed("threadtest", threads, run, NULL, 0);

    printf("threadtest: threads=%ld iterations=%ld objects=%ld work=%ld size=%ld B: %.4f s\n",
           threads, g_iterations, objects, g_work, g_words * 8, elapsed);
    char name[64];
    snprintf(name, sizeof name, "threadtest-%ld", g_words * 8);
    print_result(name, threads, "s", elapsed);
    return 0;
}
