/* Learner of the pinning runtime: pure C, no threads, no syscalls.
 * Given per-thread speeds each epoch it returns (domain, unit) assignments.
 * Level 1: aspiration learning over NUMA domains (every numa_every epochs).
 * Level 2: perturbed reinforcement learning over the units (a CPU or a group
 * of g CPUs) of the thread's current domain. */
#ifndef PINRT_LEARNER_H
#define PINRT_LEARNER_H

#include <stddef.h>
#include <stdint.h>

enum { PL_O1 = 1, PL_O2 = 2 };
enum { PL_UTIL_SHARED = 0, PL_UTIL_OWN = 1 };

/* xoshiro256** seeded through splitmix64: small, fast, reproducible. */
typedef struct {
    uint64_t s[4];
} pl_rng;
void pl_rng_seed(pl_rng *r, uint64_t seed);
uint64_t pl_rng_next(pl_rng *r);
double pl_rng_unif(pl_rng *r);           /* in [0, 1) */
int pl_rng_below(pl_rng *r, int n);      /* in [0, n) */

typedef struct {
    int objective;   /* PL_O1 or PL_O2 */
    double gamma;    /* O2 imbalance weight, >= 0 */
    int utility;     /* PL_UTIL_SHARED (identical interest) or PL_UTIL_OWN */
    int core_rl;     /* 1: RL over units; 0: thread gets its whole domain */
    int domain_al;   /* 1: aspiration learning over domains; 0: one flat domain */
    double eps;      /* RL step size */
    double nu;       /* RL running-average rate */
    double lambda;   /* RL perturbation */
    double eps_a;    /* AL running-average rate */
    double lambda_a; /* AL experimentation probability */
    double eta;      /* AL benchmark ratio, > 1 */
    int numa_every;  /* AL decision period in epochs, >= 1 */
    uint64_t seed;
} pl_params;

void pl_params_default(pl_params *p);

typedef struct {
    int domain; /* index of the domain */
    int unit;   /* unit index, or -1 when the thread may use its whole domain */
} pl_assign;

typedef struct pl_learner pl_learner;

/* unit_domain[u] gives the domain of unit u; it must be non-decreasing and
 * cover domains 0..ndomains-1 with at least one unit each. Returns NULL on
 * bad arguments or allocation failure. All memory is allocated here. */
pl_learner *pl_create(const pl_params *p, int nunits, const int *unit_domain,
                      int max_threads);
void pl_destroy(pl_learner *L);

/* Adds a thread; its first assignment is round-robin over units.
 * Returns its slot (>= 0) or -1 when full. */
int pl_add_thread(pl_learner *L);
/* Removes a thread; the remaining threads are rebalanced round-robin and their
 * strategies restart uniform (their old pure strategies would undo it). */
void pl_remove_thread(pl_learner *L, int slot);
/* Forces a thread's domain (tests, or a thread found already pinned). */
void pl_set_domain(pl_learner *L, int slot, int domain);

/* One epoch. speed[slot] is read for used slots (any unit, >= 0; a negative
 * speed means "not measured": the thread is left out and keeps its action).
 * out[slot] receives the next assignment of used slots. Returns how many
 * threads changed unit or domain. */
int pl_epoch(pl_learner *L, const double *speed, pl_assign *out);

pl_assign pl_current(const pl_learner *L, int slot);
int pl_used(const pl_learner *L, int slot);
int pl_nthreads(const pl_learner *L);
int pl_max_threads(const pl_learner *L);
long pl_epochs(const pl_learner *L);
double pl_last_objective(const pl_learner *L);
double pl_last_utility(const pl_learner *L, int slot);
/* Nominal strategy weight of unit u for the thread (within its domain). */
double pl_strategy(const pl_learner *L, int slot, int unit);

/* The objective over n speeds (O1 mean; O2 mean penalised by imbalance). */
double pl_objective_of(int objective, double gamma, const double *v, int n);

#endif
