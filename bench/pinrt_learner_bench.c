/* Learner figures: cost per epoch for 64 threads over 64 CPUs (target
 * <= 20 us), epochs to reach 95% of the best objective for capacities
 * (1,1,0.5,0.25) and 8 threads (median of 20 seeds, target <= 300), and
 * epochs for the threads of a dropped domain to move (target <= 10).
 * Built by native/Makefile as native/build/pinrt_learner_bench. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "harness.h"
#include "learner.h"

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

static double now(void)
{
    struct timespec ts;
    /* CPU time of this thread: other load on the node must not count. */
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    int epochs = argc > 1 ? atoi(argv[1]) : 20000;
    pl_params p;
    pl_params_default(&p);

    /* 64 threads over 64 CPUs in 2 domains of 32 (both levels active). */
    int ud[64];
    for (int u = 0; u < 64; u++)
        ud[u] = u / 32;
    pl_learner *L = pl_create(&p, 64, ud, 64);
    for (int i = 0; i < 64; i++)
        pl_add_thread(L);
    double sp[64];
    pl_assign out[64];
    pl_rng r;
    pl_rng_seed(&r, 5);
    for (int k = 0; k < 200; k++) { /* warm-up */
        for (int i = 0; i < 64; i++)
            sp[i] = 0.5 + 0.5 * pl_rng_unif(&r);
        pl_epoch(L, sp, out);
    }
    double t0 = now(), tgen = 0;
    for (int k = 0; k < epochs; k++) {
        double a = now();
        for (int i = 0; i < 64; i++)
            sp[i] = 0.5 + 0.5 * pl_rng_unif(&r);
        tgen += now() - a;
        pl_epoch(L, sp, out);
    }
    double per = (now() - t0 - tgen) / epochs * 1e6;
    pl_destroy(L);
    printf("learner_cost_us_per_epoch_64x64=%.2f (target <= 20)\n", per);

    double cap[4] = {1, 1, 0.5, 0.25};
    int res[20];
    for (int o = PL_O1; o <= PL_O2; o++) {
        p.objective = o;
        for (int s = 0; s < 20; s++) {
            p.seed = (uint64_t)s + 1;
            res[s] = hx_epochs_to_reach(&p, 4, cap, 8, 0.05, 0.95, 10, 300);
            if (res[s] < 0)
                res[s] = 100000;
        }
        qsort(res, 20, sizeof res[0], cmp_int);
        printf("harness_O%d_epochs_to_95pct_median=%d worst=%d (target median <= 300)\n", o, (res[9] + res[10]) / 2,
               res[19]);
    }
    pl_params_default(&p);
    for (int s = 0; s < 20; s++) {
        p.seed = (uint64_t)s + 1;
        res[s] = hx_drop_response(&p, 0.2, 200, 50, 0.05);
    }
    qsort(res, 20, sizeof res[0], cmp_int);
    printf("harness_drop_epochs_to_move_median=%d worst=%d (target <= 10)\n", res[10], res[19]);
    return 0;
}
