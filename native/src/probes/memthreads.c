#include "memthreads.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "memkern.h"

typedef struct {
    uint64_t *buf;
    size_t bytes;
    double busy;
    atomic_int *stop;
    uint64_t lines;
    uint64_t sink;
} bubble_worker;

static void *bubble_thread(void *arg)
{
    bubble_worker *w = arg;
    const size_t chunk = (size_t)64 << 10;
    size_t off = 0;
    while (!atomic_load_explicit(w->stop, memory_order_relaxed)) {
        double t0 = cs_now();
        double busy_until = t0 + w->busy * CS_PERIOD_S;
        if (w->bytes) {
            do {  /* stream in chunks, checking the clock between them */
                size_t n = w->bytes - off < chunk ? w->bytes - off : chunk;
                w->sink += cs_stream_pass((uint64_t *)((char *)w->buf + off), n);
                w->lines += n / CS_LINE;
                off = (off + n) % w->bytes;
            } while (cs_now() < busy_until && !atomic_load_explicit(w->stop, memory_order_relaxed));
        }
        double rest = t0 + CS_PERIOD_S - cs_now();
        if (rest > 0) {
            struct timespec ts = {0, (long)(rest * 1e9)};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

typedef struct {
    atomic_int *stop;
    void (*wait)(void *);
    void *arg;
} waiter;

int cs_bubble_run(double level, size_t max_ws, int threads, void (*wait)(void *), void *arg, cs_bubble_stats *out)
{
    memset(out, 0, sizeof *out);
    size_t ws;
    double busy;
    cs_bubble_map(level, max_ws, &ws, &busy);
    atomic_int stop = 0;
    bubble_worker *w = calloc((size_t)threads, sizeof *w);
    pthread_t *tids = calloc((size_t)threads, sizeof *tids);
    int rc = 0, started = 0;
    if (!w || !tids) {
        rc = -1;
        goto done;
    }
    size_t share = ws / (size_t)threads / CS_LINE * CS_LINE;
    if (ws && share < CS_LINE)
        share = CS_LINE;
    for (int i = 0; i < threads; i++) {
        w[i].bytes = ws ? share : 0;
        w[i].busy = busy;
        w[i].stop = &stop;
        if (w[i].bytes) {
            w[i].buf = aligned_alloc(CS_LINE, w[i].bytes);
            if (!w[i].buf) {
                rc = -1;
                goto done;
            }
            memset(w[i].buf, 0, w[i].bytes);
        }
    }
    double t0 = cs_now();
    for (; started < threads; started++)
        if (pthread_create(&tids[started], NULL, bubble_thread, &w[started]) != 0) {
            rc = -1;
            break;
        }
    if (rc == 0)
        wait(arg);
    atomic_store(&stop, 1);
    for (int i = 0; i < started; i++) {
        pthread_join(tids[i], NULL);
        out->bytes += (double)w[i].lines * CS_LINE;
    }
    out->seconds = cs_now() - t0;
    out->ws_bytes = ws;
    out->busy = busy;
    out->threads = started;
done:
    if (w)
        for (int i = 0; i < threads; i++)
            free(w[i].buf);
    free(w);
    free(tids);
    return rc;
}

typedef struct {
    double *a, *b, *c;
    size_t lo, hi;
    int reps;
    pthread_barrier_t *bar;
    double *best;  /* written by thread 0 only */
} triad_arg;

static void *triad_thread(void *arg)
{
    triad_arg *t = arg;
    for (size_t i = t->lo; i < t->hi; i++) {  /* first touch by the thread that uses the range */
        t->a[i] = 0.0;
        t->b[i] = 1.0;
        t->c[i] = 2.0;
    }
    for (int r = 0; r < t->reps; r++) {
        pthread_barrier_wait(t->bar);
        double t0 = cs_now();
        cs_triad(t->a, t->b, t->c, 3.0, t->lo, t->hi);
        pthread_barrier_wait(t->bar);  /* every thread's part done: thread 0 reads the clock */
        if (t->best) {
            double el = cs_now() - t0;
            if (*t->best <= 0 || el < *t->best)
                *t->best = el;
        }
    }
    return NULL;
}

double cs_triad_threads(size_t n, int threads, int reps, double *check)
{
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    triad_arg *args = calloc((size_t)threads, sizeof *args);
    pthread_t *tids = calloc((size_t)threads, sizeof *tids);
    double best = -1.0;
    if (!a || !b || !c || !args || !tids)
        goto done;
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)threads);
    best = 0.0;
    int started = 0;
    for (; started < threads; started++) {
        args[started] = (triad_arg){a, b, c, n * (size_t)started / (size_t)threads,
                                    n * (size_t)(started + 1) / (size_t)threads, reps, &bar, started == 0 ? &best : NULL};
        if (pthread_create(&tids[started], NULL, triad_thread, &args[started]) != 0)
            break;
    }
    if (started < threads) {  /* the started threads wait at a barrier for `threads`: nothing to rejoin */
        fprintf(stderr, "cosched-membench: cannot create thread %d\n", started);
        exit(1);
    }
    for (int i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    pthread_barrier_destroy(&bar);
    *check = a[n / 2];
done:
    free(a);
    free(b);
    free(c);
    free(args);
    free(tids);
    return best;
}
