/* pair.c - single-threaded malloc+free latency.
 *
 * usage: pair [-m keep1|batch1000] [-s size] [-n pairs]
 *        defaults: -m keep1 -s 64 -n 20000000
 *
 * keep1:     one other block of the same size stays live for the whole run
 *            (so the loop does not hit "page became empty" paths, e.g. in
 *            mimalloc), then loop: p = malloc(size); write p[0]; free(p).
 * batch1000: repeat: malloc 1000 blocks of `size` (writing the first byte of
 *            each), then free them all in allocation order.
 *
 * An untimed warm-up of n/10 pairs (at least one batch) runs first.
 * Metric: nanoseconds per malloc+free pair (lower is better).
 */
#include "common.h"

#include <getopt.h>

#define BATCH 1000

static void run_keep1(size_t size, long n) {
    for (long i = 0; i < n; i++) {
        volatile char *p = malloc(size);
        if (p == NULL)
            exit(1);
        p[0] = (char)i;
        free((void *)p);
    }
}

static void run_batch(size_t size, long n, void **a) {
    for (long r = 0; r < n / BATCH; r++) {
        for (long i = 0; i < BATCH; i++) {
            volatile char *p = malloc(size);
            if (p == NULL)
                exit(1);
            p[0] = (char)i;
            a[i] = (void *)p;
        }
        escape(a);
        for (long i = 0; i < BATCH; i++)
            free(a[i]);
    }
}

int main(int argc, char **argv) {
    const char *mode = "keep1";
    long size = 64, n = 20000000;
    int opt;
    while ((opt = getopt(argc, argv, "m:s:n:h")) != -1) {
        switch (opt) {
        case 'm': mode = optarg; break;
        case 's': size = strtol(optarg, NULL, 10); break;
        case 'n': n = strtol(optarg, NULL, 10); break;
        case 'h':
            printf("usage: %s [-m keep1|batch1000] [-s size] [-n pairs]\n"
                   "defaults: -m keep1 -s 64 -n 20000000\n",
                   argv[0]);
            return 0;
        default: return 2;
        }
    }
    int batch = strcmp(mode, "batch1000") == 0;
    if ((!batch && strcmp(mode, "keep1") != 0) || size < 1 || n < BATCH) {
        fprintf(stderr, "pair: bad arguments (mode keep1|batch1000, size>=1, n>=%d)\n", BATCH);
        return 2;
    }
    if (batch)
        n = n / BATCH * BATCH;

    void **a = xmalloc_or_die(sizeof(void *) * BATCH);
    volatile char *keep = xmalloc_or_die((size_t)size);
    keep[0] = 1;

    long warm = n / 10 < BATCH ? BATCH : n / 10 / BATCH * BATCH;
    if (batch)
        run_batch((size_t)size, warm, a);
    else
        run_keep1((size_t)size, warm);

    double t0 = now_sec();
    if (batch)
        run_batch((size_t)size, n, a);
    else
        run_keep1((size_t)size, n);
    double elapsed = now_sec() - t0;

    free((void *)keep);
    free(a);
    double ns = elapsed * 1e9 / (double)n;
    printf("pair: mode=%s size=%ld pairs=%ld: %.3f s, %.2f ns per malloc+free\n", mode, size, n,
           elapsed, ns);
    char name[64];
    snprintf(name, sizeof name, "pair-%ld-%s", size, mode);
    print_result(name, 1, "ns", ns);
    return 0;
}
