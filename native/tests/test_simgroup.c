/* Tests of the group run kernel (simgroup.c) on hand-checkable groups, bad
 * records, and calls from several threads at once, and of the play-out
 * (playout.c) on a hand-checkable queue. That they give the Python model's
 * doubles is tested from Python (tests/env/test_sim_kernel.py). */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "check.h"
#include "simkernel/playout.h"
#include "simkernel/simgroup.h"

/* A node of one NUMA domain and one L3 of 8 ways of 2 MB, 50 GB/s. */
static const double NODE1[] = {1, 1, 20.0, 0.75, 8, 50.0, 2.0};

/* A job record on NODE1: n cores, the given ways, compute tc seconds, stream GB, no reuse traffic. */
static int job1(double *r, double tc, double stream_gb, double bmax, double n, double mask) {
    double head[SG_HEAD] = {SG_HEAD + 2 + 3, tc, bmax, bmax / n, stream_gb / 10, 0.0, stream_gb, 0.0, 1.0, 4.0, 0.5,
                            n, 1, 0};
    memcpy(r, head, sizeof head);
    r[SG_HEAD] = n;        /* its cores in the L3 */
    r[SG_HEAD + 1] = mask; /* its ways there */
    r[SG_HEAD + 2] = 0;    /* route: domain 0 -> memory 0, all its traffic */
    r[SG_HEAD + 3] = 0;
    r[SG_HEAD + 4] = 1.0;
    return SG_HEAD + 5;
}

static void test_one_job_alone(void) {
    double r[32], end = 0;
    int len = job1(r, 10.0, 40.0, 20.0, 4, 0xff);
    CHECK(sg_run_group(NODE1, 7, r, len, 1, NULL, &end) == 0);
    /* memory time 40 GB / 20 GB/s = 2 s, under the 50 GB/s controller; compute 10 s; T = 10 + 0.25 * 2 */
    CHECK(fabs(end - 10.5) < 1e-12);
    double twice = 2.0, slow = 0;
    CHECK(sg_run_group(NODE1, 7, r, len, 1, &twice, &slow) == 0);
    CHECK(fabs(slow - 21.0) < 1e-12);
}

static void test_memory_bound_pair_shares_the_controller(void) {
    double r[64], ends[2];
    int a = job1(r, 1.0, 100.0, 40.0, 4, 0xff);
    int b = job1(r + a, 1.0, 100.0, 40.0, 4, 0xff);
    CHECK(sg_run_group(NODE1, 7, r, a + b, 2, NULL, ends) == 0);
    CHECK(ends[0] == ends[1]); /* the same job twice */
    double alone = 0;
    CHECK(sg_run_group(NODE1, 7, r, a, 1, NULL, &alone) == 0);
    CHECK(fabs(alone - (100.0 / 40.0 + 0.25)) < 1e-12);
    /* 73 GB/s of demand on a 50 GB/s controller: each gets about 25 GB/s, 100 GB in about 4 s */
    CHECK(ends[0] > 3.8 && ends[0] < 4.2);
}

static void test_bad_records_are_refused(void) {
    double r[32], end = -7;
    int len = job1(r, 10.0, 40.0, 20.0, 4, 0xff);
    CHECK(sg_run_group(NODE1, 6, r, len, 1, NULL, &end) == -1);     /* node record too short */
    CHECK(sg_run_group(NODE1, 7, r, len - 1, 1, NULL, &end) == -1); /* job record cut */
    CHECK(sg_run_group(NODE1, 7, r, len, 2, NULL, &end) == -1);     /* two jobs announced, one given */
    CHECK(sg_run_group(NODE1, 7, r, len, 0, NULL, &end) == -1);
    CHECK(sg_run_group(NODE1, 7, r, len, SG_MAX_JOBS + 1, NULL, &end) == -1);
    r[SG_HEAD + 3] = 1; /* a route to memory domain 1 of a one-domain node */
    CHECK(sg_run_group(NODE1, 7, r, len, 1, NULL, &end) == -1);
    r[SG_HEAD + 3] = 0;
    r[SG_HEAD] = 5; /* more cores in the L3 than the job has */
    CHECK(sg_run_group(NODE1, 7, r, len, 1, NULL, &end) == -1);
    CHECK(end == -7); /* nothing written on a refusal */
}

static double RECS[64];
static int REC_LEN;

static void *worker(void *arg) {
    double *ends = arg;
    for (int i = 0; i < 200; i++)
        if (sg_run_group(NODE1, 7, RECS, REC_LEN, 2, NULL, ends))
            ends[0] = -1;
    return NULL;
}

static void test_threads_at_once(void) {
    int a = job1(RECS, 3.0, 60.0, 30.0, 4, 0x0f);
    REC_LEN = a + job1(RECS + a, 2.0, 90.0, 30.0, 4, 0xfc); /* overlapping masks: the LRU sharing path */
    double want[2], got[4][2];
    CHECK(sg_run_group(NODE1, 7, RECS, REC_LEN, 2, NULL, want) == 0);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, worker, got[i]);
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        CHECK(got[i][0] == want[0] && got[i][1] == want[1]);
    }
}

/* Two jobs of one kind, Cmax 1, on NODE1 (CPUs 0-7): the play-out asks for the kind's record on all eight CPUs,
 * then plays them one after the other; a bad state is refused. */
static void test_playout_one_after_the_other(void) {
    int ids[] = {0}, ncpu[] = {8}, cpus[] = {0, 1, 2, 3, 4, 5, 6, 7};
    sp_ctx *c = sp_new(NODE1, 7, 1, ids, ncpu, cpus, 8);
    CHECK(c != NULL);
    double r[32], t = 0;
    int len = job1(r, 10.0, 40.0, 20.0, 8, 0xff);
    CHECK(sg_solve(NODE1, 7, r, len, 1, &t) == 0);
    int kinds[] = {0, 0}, names[] = {0, 0}, nk;
    double solo[] = {t}, value = -1;
    uint64_t need[SP_MASK_WORDS] = {0};
    sp_state s = {.cmax = 1, .window = 8, .objective = SP_MAKESPAN, .hold_weight = 1.0, .nq = 2, .q_kind = kinds,
                  .q_name = names, .kind_solo = solo, .kind_run_solo = solo};
    CHECK(sp_play_fill(c, &s, &value, &nk, need) == SP_NEED_RECORD);
    CHECK(nk == 0 && need[0] == 0xff && value == -1);
    CHECK(sp_add_record(c, nk, need, r, len) == 0);
    CHECK(sp_play_fill(c, &s, &value, &nk, need) == SP_DONE);
    CHECK(value == t + t); /* the second starts at the first's end */
    s.objective = SP_TURNAROUND;
    CHECK(sp_play_fill(c, &s, &value, &nk, need) == SP_DONE);
    CHECK(value == (t + (t + t)) + 1.0 * (1.0 * t + 1.0 * t)); /* the ends' sum and the node-seconds held */
    s.cmax = 0;
    CHECK(sp_play_fill(c, &s, &value, &nk, need) == SP_ERROR);
    sp_delete(c);
}

int main(void) {
    test_playout_one_after_the_other();
    test_one_job_alone();
    test_memory_bound_pair_shares_the_controller();
    test_bad_records_are_refused();
    test_threads_at_once();
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail != 0;
}
