/* Synthetic world for the learner: units of given capacity shared equally by
 * the threads on them, domains with a remote-memory penalty, multiplicative
 * noise. Deterministic for a given seed. */
#ifndef PINRT_HARNESS_H
#define PINRT_HARNESS_H
#include "runtime/learner.h"

#define HX_MAX_UNITS 64
#define HX_MAX_THREADS 256

typedef struct {
    int nunits;
    double cap[HX_MAX_UNITS];
    int unit_domain[HX_MAX_UNITS];
    int ndomains;
    int home[HX_MAX_THREADS];   /* domain holding the thread's memory, -1 none */
    double remote_penalty;      /* speed factor lost when off home */
    double noise;               /* speeds multiplied by 1 + noise*(2U-1) */
    pl_rng rng;
} hx_world;

void hx_init(hx_world *w, int nunits, const double *cap, const int *unit_domain, uint64_t seed);
/* Speeds of the used slots of L under their current assignments. */
void hx_speeds(hx_world *w, const pl_learner *L, double *speed, int noisy);
/* Objective (noise free) of the current assignment. */
double hx_objective(hx_world *w, const pl_learner *L, int objective, double gamma);
/* Best objective over all assignments of n threads to units (exhaustive;
 * n and nunits small), threads on their home domain penalty included. */
double hx_best(const hx_world *w, int n, int objective, double gamma);
#endif

/* Scenario: capacities cap[0..nunits) (one domain), nthreads threads, noise.
 * Returns the first epoch from which the noise-free objective averaged over
 * a window of `win` epochs is >= frac * best, or -1 within max_epochs. */
int hx_epochs_to_reach(const pl_params *p, int nunits, const double *cap, int nthreads,
                       double noise, double frac, int win, int max_epochs);

/* Scenario: two domains of two units each, 4 threads; at epoch drop_at the
 * units of one domain fall to capacity drop_cap. Returns the largest number of
 * epochs any thread that sat on the dropped domain (the one holding most
 * threads at the drop) took to leave it
 * (max_epochs+1 if one never left). */
int hx_drop_response(const pl_params *p, double drop_cap, int drop_at, int max_epochs, double noise);
