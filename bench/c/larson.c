/* larson.c - server-simulation benchmark (after Larson & Krishnan), written
 * from the description in shared/BENCHMARKS.md.
 *
 * usage: larson [seconds min max chunks_per_thread rounds seed threads]
 *        defaults: 5 8 1000 5000 100 4141 2
 *
 * Setup (untimed): the main thread allocates threads*chunks objects of size
 * min + rand % (max-min), then shuffles the whole pointer array and deals it
 * out to the threads, so objects that are neighbours in memory end up in
 * different threads' arrays.
 *
 * Timed window: `threads` workers run concurrently. Each loops: pick a random
 * slot of its own array, free the object there (often allocated by another
 * thread - the main thread or a predecessor), malloc a new object of random
 * size into it and write its first byte. After rounds*chunks such operations
 * the worker starts a successor thread that inherits the array (and so frees
 * the predecessor's objects) and exits: thread churn plus cross-thread frees.
 * After `seconds` the main thread reads all counters and stops the workers.
 *
 * Random numbers: a per-thread xorshift64* generator (common.h); the slot is
 * next() % chunks and the size is min + next() % (max-min), as in the
 * description (the modulo is kept on purpose: it is part of the per-op cost
 * that a Go port should reproduce).
 *
 * One operation = one free + one malloc. Metric: Mops/s (millions of such
 * operations per second, summed over all workers).
 */
#include "common.h"

#include <pthread.h>
#include <stdatomic.h>

typedef struct {
    _Alignas(CACHE_LINE) void **array; /* this worker's objects */
    long n;                            /* chunks_per_thread */
    long ops_per_life;                 /* rounds * chunks: ops before hand-over */
    rng_t rng;                         /* travels with the array to the successor */
    _Atomic uint64_t ops;              /* ops done by this slot, all generations */
    _Atomic int done;                  /* set by the last generation on exit */
    long generations;                  /* threads that ran this slot */
    int create_failed;
    char pad[CACHE_LINE];
} slot_t;

static atomic_int stop_flag;
static long g_min, g_range;

static void *worker(void *arg);

static int spawn(slot_t *s) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, worker, s);
    pthread_attr_destroy(&attr);
    return rc;
}

static void *worker(void *arg) {
    slot_t *s = arg;
    void **a = s->array;
    const uint32_t n = (uint32_t)s->n;
    const long life = s->ops_per_life;
    const long min = g_min;
    const uint32_t range = (uint32_t)g_range;
    rng_t rng = s->rng;
    uint64_t ops = atomic_load_explicit(&s->ops, memory_order_relaxed);
    long i;

    for (i = 0; i < life; i++) {
        if (atomic_load_explicit(&stop_flag, memory_order_relaxed))
            break;
        uint32_t victim = (uint32_t)(rng_next(&rng) % n);
        free(a[victim]);
        size_t sz = (size_t)min + (range ? rng_next(&rng) % range : 0);
        volatile char *p = malloc(sz);
        if (p == NULL) {
            fprintf(stderr, "larson: malloc(%zu) failed\n", sz);
            exit(1);
        }
        p[0] = 'a';
        a[victim] = (void *)p;
        ops++;
        atomic_store_explicit(&s->ops, ops, memory_order_relaxed);
    }
    s->rng = rng;

    if (i == life && !atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
        /* Hand the array over to a new thread and exit. */
        s->generations++;
        if (spawn(s) == 0)
            return NULL;
        s->create_failed = 1; /* fall through: report and stop this slot */
    }
    atomic_store_explicit(&s->done, 1, memory_order_release);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        printf("usage: %s [seconds min max chunks_per_thread rounds seed threads]\n"
               "defaults: 5 8 1000 5000 100 4141 2\n",
               argv[0]);
        return 0;
    }
    double seconds = arg_double(argc, argv, 1, 5);
    long min = arg_long(argc, argv, 2, 8);
    long max = arg_long(argc, argv, 3, 1000);
    long chunks = arg_long(argc, argv, 4, 5000);
    long rounds = arg_long(argc, argv, 5, 100);
    long seed = arg_long(argc, argv, 6, 4141);
    long threads = arg_long(argc, argv, 7, 2);
    if (seconds <= 0 || min < 1 || max < min || chunks < 1 || chunks > (1L << 30) ||
        rounds < 1 || threads < 1 || threads > 1024) {
        fprintf(stderr, "larson: bad arguments\n");
        return 2;
    }
    g_min = min;
    g_range = max - min;

    /* Setup: allocate every slot of every thread's array, then shuffle. */
    long total = threads * chunks;
    void **all = xmalloc_or_die((size_t)total * sizeof(void *));
    rng_t rng;
    rng_seed(&rng, (uint64_t)seed);
    for (long i = 0; i < total; i++) {
        size_t sz = (size_t)min + (g_range ? rng_below(&rng, (uint32_t)g_range) : 0);
        char *p = xmalloc_or_die(sz);
        p[0] = 'a';
        all[i] = p;
    }
    for (long i = total - 1; i > 0; i--) {
        long j = (long)(rng_next(&rng) % (uint64_t)(i + 1));
        void *t = all[i];
        all[i] = all[j];
        all[j] = t;
    }

    slot_t *slots = aligned_alloc(CACHE_LINE, sizeof(slot_t) * (size_t)threads);
    if (slots == NULL) {
        fprintf(stderr, "larson: out of memory\n");
        return 1;
    }
    memset(slots, 0, sizeof(slot_t) * (size_t)threads);
    for (long t = 0; t < threads; t++) {
        slots[t].array = all + t * chunks;
        slots[t].n = chunks;
        slots[t].ops_per_life = rounds * chunks;
        rng_seed(&slots[t].rng, (uint64_t)seed * 1000003u + (uint64_t)t + 1);
        atomic_init(&slots[t].ops, 0);
        atomic_init(&slots[t].done, 0);
        slots[t].generations = 1;
    }
    atomic_store(&stop_flag, 0);

    /* Timed window. */
    double t0 = now_sec();
    for (long t = 0; t < threads; t++) {
        if (spawn(&slots[t]) != 0) {
            fprintf(stderr, "larson: pthread_create failed\n");
            return 1;
        }
    }
    sleep_sec(seconds);
    uint64_t ops = 0;
    for (long t = 0; t < threads; t++)
        ops += atomic_load_explicit(&slots[t].ops, memory_order_relaxed);
    double t1 = now_sec();
    atomic_store(&stop_flag, 1);

    /* Wait for the last generation of every slot. */
    for (long t = 0; t < threads; t++)
        while (!atomic_load_explicit(&slots[t].done, memory_order_acquire))
            sleep_sec(0.001);

    long gens = 0;
    int failed = 0;
    for (long t = 0; t < threads; t++) {
        gens += slots[t].generations;
        failed |= slots[t].create_failed;
    }
    for (long i = 0; i < total; i++)
        free(all[i]);
    free(all);
    free(slots);
    if (failed) {
        fprintf(stderr, "larson: a successor thread could not be created\n");
        return 1;
    }

    double elapsed = t1 - t0;
    double mops = (double)ops / elapsed / 1e6;
    printf("larson: threads=%ld size=%ld-%ld chunks=%ld rounds=%ld: %llu ops in %.3f s, "
           "%ld thread generations\n",
           threads, min, max, chunks, rounds, (unsigned long long)ops, elapsed, gens);
    char name[64];
    snprintf(name, sizeof name, "larson-%ld-%ld", min, max);
    print_result(name, threads, "Mops/s", mops);
    return 0;
}
