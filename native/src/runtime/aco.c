/* ACO for the single machine total weighted tardiness problem (SMTWTP), the
 * papers' benchmark: a pthreads farm, ants split evenly over threads.
 * The result depends only on the seed: each ant has its own RNG seeded from
 * (seed, iteration, ant), the pheromone matrix is read-only while ants run,
 * and the reduction (lowest cost, then lowest ant index) and the pheromone
 * update are done by one thread after a barrier.
 *
 * usage: aco [-t threads] [-a ants] [-i iterations] [-n jobs] [-s seed]
 * stdout: the instance, the best tardiness and a hash of the best schedule;
 * stderr: the elapsed time. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    uint64_t s;
} rng_t;

static uint64_t rng_next(rng_t *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static double rng_unif(rng_t *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

static struct {
    int n, ants, iters, threads;
    uint64_t seed;
    int *p, *d, *w;
    double *tau;        /* n x n: tau[pos*n + job] */
    int *sched;         /* ants x n */
    long long *cost;    /* ants */
    int iter;
    int done;
    pthread_barrier_t start, end;
} A;

static long long tardiness(const int *s)
{
    long long t = 0, c = 0;
    for (int k = 0; k < A.n; k++) {
        int j = s[k];
        c += A.p[j];
        if (c > A.d[j])
            t += (long long)A.w[j] * (c - A.d[j]);
    }
    return t;
}

/* One ant builds a schedule position by position: with probability q0 the
 * best tau * eta^2 job, otherwise a roulette draw; eta is the modified due
 * date heuristic w / max(C + p, d). */
static void ant(int a, int *s, char *used, double *prob)
{
    rng_t r = {A.seed * 0x100000001b3ULL ^ ((uint64_t)A.iter << 32) ^ (uint64_t)a};
    rng_next(&r);
    memset(used, 0, (size_t)A.n);
    long long c = 0;
    const double q0 = 0.5;
    for (int k = 0; k < A.n; k++) {
        const double *t = A.tau + (size_t)k * (size_t)A.n;
        double tot = 0, best = -1;
        int bj = -1;
        for (int j = 0; j < A.n; j++) {
            if (used[j]) {
                prob[j] = 0;
                continue;
            }
            double mdd = (double)(c + A.p[j] > A.d[j] ? c + A.p[j] : A.d[j]);
            double eta = (double)A.w[j] / mdd;
            double v = t[j] * eta * eta;
            prob[j] = v;
            tot += v;
            if (v > best) {
                best = v;
                bj = j;
            }
        }
        int pick = bj;
        if (rng_unif(&r) >= q0 && tot > 0) {
            double x = rng_unif(&r) * tot, acc = 0;
            for (int j = 0; j < A.n; j++) {
                if (used[j])
                    continue;
                acc += prob[j];
                pick = j;
                if (x < acc)
                    break;
            }
        }
        used[pick] = 1;
        s[k] = pick;
        c += A.p[pick];
    }
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    int lo = (int)((long)A.ants * id / A.threads), hi = (int)((long)A.ants * (id + 1) / A.threads);
    char *used = malloc((size_t)A.n);
    double *prob = malloc((size_t)A.n * sizeof *prob);
    if (!used || !prob) {
        perror("aco: malloc");
        exit(1);
    }
    for (;;) {
        pthread_barrier_wait(&A.start);
        if (A.done)
            break;
        for (int a = lo; a < hi; a++) {
            int *s = A.sched + (size_t)a * (size_t)A.n;
            ant(a, s, used, prob);
            A.cost[a] = tardiness(s);
        }
        pthread_barrier_wait(&A.end);
    }
    free(used);
    free(prob);
    return NULL;
}

static int cmp_edd(const void *x, const void *y)
{
    int a = *(const int *)x, b = *(const int *)y;
    if (A.d[a] != A.d[b])
        return A.d[a] - A.d[b];
    return a - b;
}

static int parse(const char *s, long lo, long hi, const char *what)
{
    char *e;
    long v = strtol(s, &e, 10);
    if (*e || e == s || v < lo || v > hi) {
        fprintf(stderr, "aco: bad %s '%s' (expected %ld..%ld)\n", what, s, lo, hi);
        exit(2);
    }
    return (int)v;
}

int main(int argc, char **argv)
{
    A.threads = 4;
    A.ants = 64;
    A.iters = 200;
    A.n = 120;
    A.seed = 1;
    int o;
    while ((o = getopt(argc, argv, "t:a:i:n:s:h")) != -1) {
        switch (o) {
        case 't': A.threads = parse(optarg, 1, 1024, "threads"); break;
        case 'a': A.ants = parse(optarg, 1, 1 << 20, "ants"); break;
        case 'i': A.iters = parse(optarg, 1, 1 << 24, "iterations"); break;
        case 'n': A.n = parse(optarg, 2, 100000, "jobs"); break;
        case 's': A.seed = (uint64_t)parse(optarg, 0, 0x7fffffff, "seed"); break;
        default:
            fprintf(stderr, "usage: aco [-t threads] [-a ants] [-i iterations] [-n jobs] [-s seed]\n");
            return o == 'h' ? 0 : 2;
        }
    }
    int n = A.n;
    A.p = malloc((size_t)n * sizeof(int));
    A.d = malloc((size_t)n * sizeof(int));
    A.w = malloc((size_t)n * sizeof(int));
    A.tau = malloc((size_t)n * (size_t)n * sizeof(double));
    A.sched = malloc((size_t)A.ants * (size_t)n * sizeof(int));
    A.cost = malloc((size_t)A.ants * sizeof(long long));
    int *best = malloc((size_t)n * sizeof(int)), *edd = malloc((size_t)n * sizeof(int));
    if (!A.p || !A.d || !A.w || !A.tau || !A.sched || !A.cost || !best || !edd) {
        perror("aco: malloc");
        return 1;
    }
    /* Instance: the usual generator with tardiness factor 0.6 and range of
     * due dates 0.6. */
    rng_t r = {A.seed};
    long long P = 0;
    for (int j = 0; j < n; j++) {
        A.p[j] = 1 + (int)(rng_next(&r) % 100);
        A.w[j] = 1 + (int)(rng_next(&r) % 10);
        P += A.p[j];
    }
    for (int j = 0; j < n; j++) {
        double lo = (double)P * (1 - 0.6 - 0.3), hi = (double)P * (1 - 0.6 + 0.3);
        A.d[j] = (int)(lo + rng_unif(&r) * (hi - lo));
    }
    for (int j = 0; j < n; j++)
        edd[j] = j;
    qsort(edd, (size_t)n, sizeof(int), cmp_edd);
    long long best_cost = tardiness(edd);
    memcpy(best, edd, (size_t)n * sizeof(int));
    double tau0 = 1.0 / ((double)n * (double)(best_cost > 0 ? best_cost : 1));
    for (size_t k = 0; k < (size_t)n * (size_t)n; k++)
        A.tau[k] = tau0;

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_barrier_init(&A.start, NULL, (unsigned)A.threads + 1);
    pthread_barrier_init(&A.end, NULL, (unsigned)A.threads + 1);
    pthread_t *th = malloc((size_t)A.threads * sizeof *th);
    for (int i = 0; i < A.threads; i++)
        if (pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i)) {
            perror("aco: pthread_create");
            return 1;
        }
    const double rho = 0.1;
    for (A.iter = 0; A.iter < A.iters; A.iter++) {
        pthread_barrier_wait(&A.start);
        pthread_barrier_wait(&A.end);
        int bi = 0;
        for (int a = 1; a < A.ants; a++)
            if (A.cost[a] < A.cost[bi])
                bi = a;
        if (A.cost[bi] < best_cost) {
            best_cost = A.cost[bi];
            memcpy(best, A.sched + (size_t)bi * (size_t)n, (size_t)n * sizeof(int));
        }
        double dep = 1.0 / (double)(best_cost > 0 ? best_cost : 1);
        /* A floor on tau (as in MAX-MIN ant systems) keeps exploration alive
         * and keeps tau away from denormals, which are very slow. */
        double tmin = dep / (2.0 * n);
        for (size_t k = 0; k < (size_t)n * (size_t)n; k++) {
            A.tau[k] *= 1 - rho;
            if (A.tau[k] < tmin)
                A.tau[k] = tmin;
        }
        for (int k = 0; k < n; k++)
            A.tau[(size_t)k * (size_t)n + (size_t)best[k]] += rho * dep;
    }
    A.done = 1;
    pthread_barrier_wait(&A.start);
    for (int i = 0; i < A.threads; i++)
        pthread_join(th[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    uint64_t h = 1469598103934665603ULL;
    for (int k = 0; k < n; k++)
        h = (h ^ (uint64_t)best[k]) * 1099511628211ULL;
    printf("aco: jobs=%d ants=%d iterations=%d seed=%llu\n", n, A.ants, A.iters, (unsigned long long)A.seed);
    printf("best_tardiness=%lld\n", best_cost);
    printf("best_schedule_hash=%016llx\n", (unsigned long long)h);
    fprintf(stderr, "aco: threads=%d elapsed_s=%.3f\n", A.threads,
            (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    free(th);
    free(A.p);
    free(A.d);
    free(A.w);
    free(A.tau);
    free(A.sched);
    free(A.cost);
    free(best);
    free(edd);
    return 0;
}
