/* xmalloc-test.c - producer/consumer benchmark (after Lever & Boreham's
 * xmalloc-test), written from shared/BENCHMARKS.md.
 *
 * usage: xmalloc-test [-w N] [-t seconds] [-s size] [-b batch] [-q queue]
 *        defaults: -w 2 -t 5 -s 64 -b 4096 -q 100
 *
 * N producer threads malloc `size`-byte objects (writing the first byte),
 * `batch` objects at a time, and push each full batch onto a bounded FIFO
 * holding at most `queue` batches (a producer blocks while it is full).
 * N consumer threads pop batches and free every object in them, so every
 * free is a remote free (a different thread from the one that allocated).
 * So -w N runs 2N threads. The batch containers themselves come from a
 * preallocated pool, not from malloc, so only the objects touch the
 * allocator under test.
 *
 * The run lasts `seconds`; at the end the main thread reads the consumers'
 * counters. Metric: frees per second, in millions (M/s).
 */
#include "common.h"

#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>

typedef struct batch {
    struct batch *next;
    long n;
    void *obj[];
} batch_t;

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t not_empty;
    pthread_cond_t not_full;
    batch_t *head, *tail;
    long count, cap;
} queue_t;

typedef struct {
    _Alignas(CACHE_LINE) _Atomic uint64_t frees;
    char pad[CACHE_LINE];
} counter_t;

static queue_t g_full;  /* batches of live objects, bounded by -q */
static queue_t g_empty; /* pool of empty containers */
static atomic_int g_stop;
static long g_size, g_batch;
static counter_t *g_counters;

static void q_init(queue_t *q, long cap) {
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->not_empty, NULL);
    pthread_cond_init(&q->not_full, NULL);
    q->head = q->tail = NULL;
    q->count = 0;
    q->cap = cap;
}

/* Returns 0 when stopped before the batch could be queued. */
static int q_push(queue_t *q, batch_t *b, int honour_stop) {
    pthread_mutex_lock(&q->mu);
    while (q->count >= q->cap && !(honour_stop && atomic_load(&g_stop)))
        pthread_cond_wait(&q->not_full, &q->mu);
    if (q->count >= q->cap) {
        pthread_mutex_unlock(&q->mu);
        return 0;
    }
    b->next = NULL;
    if (q->tail)
        q->tail->next = b;
    else
        q->head = b;
    q->tail = b;
    q->count++;
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->mu);
    return 1;
}

/* Returns NULL when the queue is empty and the run is stopping. */
static batch_t *q_pop(queue_t *q) {
    pthread_mutex_lock(&q->mu);
    while (q->count == 0 && !atomic_load(&g_stop))
        pthread_cond_wait(&q->not_empty, &q->mu);
    batch_t *b = q->head;
    if (b != NULL) {
        q->head = b->next;
        if (q->head == NULL)
            q->tail = NULL;
        q->count--;
        pthread_cond_signal(&q->not_full);
    }
    pthread_mutex_unlock(&q->mu);
    return b;
}

static void q_wake_all(queue_t *q) {
    pthread_mutex_lock(&q->mu);
    pthread_cond_broadcast(&q->not_empty);
    pthread_cond_broadcast(&q->not_full);
    pthread_mutex_unlock(&q->mu);
}

static void *producer(void *arg) {
    (void)arg;
    const size_t size = (size_t)g_size;
    while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
        batch_t *b = q_pop(&g_empty);
        if (b == NULL)
            break;
        for (long i = 0; i < g_batch; i++) {
            char *p = malloc(size);
            if (p == NULL) {
                fprintf(stderr, "xmalloc-test: out of memory\n");
                exit(1);
            }
            p[0] = (char)i;
            b->obj[i] = p;
        }
        b->n = g_batch;
        if (!q_push(&g_full, b, 1)) {
            /* Stopping and the queue is full: clean up (untimed). */
            for (long i = 0; i < b->n; i++)
                free(b->obj[i]);
            b->n = 0;
            q_push(&g_empty, b, 0);
            break;
        }
    }
    return NULL;
}

static void *consumer(void *arg) {
    counter_t *c = arg;
    uint64_t frees = 0;
    for (;;) {
        batch_t *b = q_pop(&g_full);
        if (b == NULL)
            break; /* stopped and drained */
        for (long i = 0; i < b->n; i++)
            free(b->obj[i]);
        frees += (uint64_t)b->n;
        atomic_store_explicit(&c->frees, frees, memory_order_relaxed);
        b->n = 0;
        q_push(&g_empty, b, 0);
    }
    return NULL;
}

static void usage(const char *prog) {
    printf("usage: %s [-w N producer/consumer pairs] [-t seconds] [-s size] [-b batch] "
           "[-q max queued batches]\n"
           "defaults: -w 2 -t 5 -s 64 -b 4096 -q 100\n",
           prog);
}

static long parse_pos(const char *s, const char *what) {
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < 1) {
        fprintf(stderr, "xmalloc-test: bad %s '%s'\n", what, s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv) {
    long workers = 2, qcap = 100;
    double seconds = 5;
    g_size = 64;
    g_batch = 4096;
    int opt;
    while ((opt = getopt(argc, argv, "w:t:s:b:q:h")) != -1) {
        switch (opt) {
        case 'w': workers = parse_pos(optarg, "-w"); break;
        case 't': seconds = strtod(optarg, NULL); break;
        case 's': g_size = parse_pos(optarg, "-s"); break;
        case 'b': g_batch = parse_pos(optarg, "-b"); break;
        case 'q': qcap = parse_pos(optarg, "-q"); break;
        case 'h': usage(argv[0]); return 0;
        default: usage(argv[0]); return 2;
        }
    }
    if (seconds <= 0 || workers > 512) {
        fprintf(stderr, "xmalloc-test: bad arguments\n");
        return 2;
    }

    q_init(&g_full, qcap);
    /* Every container is either in the pool, being filled by a producer,
     * queued, or being drained by a consumer: qcap + 2N always suffices. */
    long ncont = qcap + 2 * workers + 1;
    q_init(&g_empty, ncont);
    size_t csize = sizeof(batch_t) + sizeof(void *) * (size_t)g_batch;
    char *pool = xmalloc_or_die(csize * (size_t)ncont);
    memset(pool, 0, csize * (size_t)ncont); /* fault the pool in up front */
    for (long i = 0; i < ncont; i++)
        q_push(&g_empty, (batch_t *)(pool + (size_t)i * csize), 0);

    g_counters = aligned_alloc(CACHE_LINE, sizeof(counter_t) * (size_t)workers);
    pthread_t *prod = xmalloc_or_die(sizeof(pthread_t) * (size_t)workers);
    pthread_t *cons = xmalloc_or_die(sizeof(pthread_t) * (size_t)workers);
    if (g_counters == NULL) {
        fprintf(stderr, "xmalloc-test: out of memory\n");
        return 1;
    }
    for (long i = 0; i < workers; i++)
        atomic_init(&g_counters[i].frees, 0);
    atomic_store(&g_stop, 0);

    double t0 = now_sec();
    for (long i = 0; i < workers; i++) {
        if (pthread_create(&cons[i], NULL, consumer, &g_counters[i]) != 0 ||
            pthread_create(&prod[i], NULL, producer, NULL) != 0) {
            fprintf(stderr, "xmalloc-test: pthread_create failed\n");
            return 1;
        }
    }
    sleep_sec(seconds);
    uint64_t frees = 0;
    for (long i = 0; i < workers; i++)
        frees += atomic_load_explicit(&g_counters[i].frees, memory_order_relaxed);
    double t1 = now_sec();

    atomic_store(&g_stop, 1);
    q_wake_all(&g_full);
    q_wake_all(&g_empty);
    for (long i = 0; i < workers; i++)
        pthread_join(prod[i], NULL);
    q_wake_all(&g_full);
    for (long i = 0; i < workers; i++)
        pthread_join(cons[i], NULL);
    /* A producer may have queued a batch after the consumers saw the queue
     * empty and stopped: free those objects here (untimed). */
    for (batch_t *b = g_full.head; b != NULL; b = b->next)
        for (long i = 0; i < b->n; i++)
            free(b->obj[i]);

    free(prod);
    free(cons);
    free(g_counters);
    free(pool);

    double elapsed = t1 - t0;
    double mps = (double)frees / elapsed / 1e6;
    printf("xmalloc-test: %ld producers + %ld consumers, size=%ld batch=%ld queue<=%ld: "
           "%llu frees in %.3f s\n",
           workers, workers, g_size, g_batch, qcap, (unsigned long long)frees, elapsed);
    char name[64];
    snprintf(name, sizeof name, "xmalloc-test-%ld", g_size);
    print_result(name, workers, "M/s", mps);
    return 0;
}
