/* The threaded parts of the measuring programs, kept out of their main() so the C tests run them
 * (also under ASan and TSan): the bubble's streaming threads and the threaded triad. */
#ifndef COSCHED_MEMTHREADS_H
#define COSCHED_MEMTHREADS_H
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    size_t ws_bytes;  /* total working set (the level mapping's) */
    double busy;      /* busy fraction of each period */
    double seconds;   /* elapsed */
    double bytes;     /* bytes streamed (whole lines) */
    int threads;      /* threads that ran */
} cs_bubble_stats;

/* Starts `threads` streaming threads at `level` (cs_bubble_map with max_ws), each over its share,
 * and returns once `*stop` becomes non-zero (set by the caller: another thread or `wait`), then joins
 * them. `wait(arg)` is called in the calling thread after the start; it returns when the bubble
 * should stop (the caller's signal wait or a sleep). Returns 0, or -1 (out of memory / no thread). */
int cs_bubble_run(double level, size_t max_ws, int threads, void (*wait)(void *), void *arg, cs_bubble_stats *out);

/* Threaded STREAM triad over arrays of n doubles: each thread first-touches and then runs its range;
 * returns the best wall seconds of `reps` (all threads together), or -1 on failure. `check` gets a[n/2]. */
double cs_triad_threads(size_t n, int threads, int reps, double *check);

#endif
