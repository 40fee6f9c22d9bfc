/* The continuous search's play-out (env/planners/continuous.py: play_out with
 * the base policy Fill) in C. The rollouts play the known jobs forward
 * hundreds of times per event; in Python each step of a play-out costs tens
 * of microseconds of interpreter work around a memoised solve. This is the
 * same loop, the same choices and the same arithmetic in the same order
 * (built with -ffp-contract=off), so its value is the Python play-out's to
 * the last bit (a test compares them over random states).
 *
 * A context holds what does not change between play-outs: the node's record
 * and CPUs by NUMA domain, the job records met so far (a kind of job on a CPU
 * set; added by the caller when a play-out asks for one) and the solves seen
 * (memoised by the records' indices, in order). Records come from
 * env/sim/kernel.py's job_record; the layout is simgroup.h's. One context is
 * used by one thread at a time. */
#ifndef COSCHED_PLAYOUT_H
#define COSCHED_PLAYOUT_H

#include <stdint.h>

#define SP_MAX_CPUS 256 /* CPU ids below this */
#define SP_MASK_WORDS (SP_MAX_CPUS / 64)
#define SP_MAX_QUEUE 4096

typedef struct sp_ctx sp_ctx;

/* A context for a node: its record (simgroup.h), its NUMA domains in the node's
 * order (ids, CPU counts, and their CPUs one domain after another, each in the
 * domain's own order) and its CPU count. NULL when out of memory or over the
 * limits above. */
sp_ctx *sp_new(const double *node, int node_len, int ndom, const int *dom_ids, const int *dom_ncpu,
               const int *dom_cpus, int ncpus);
void sp_delete(sp_ctx *c);

/* Adds a job record; kind >= 0 with mask (SP_MASK_WORDS words) files it as that
 * kind of job on those CPUs (a play-out asks for it), kind < 0 leaves it
 * unfiled (a running job's own allocation). Returns its index, or -1. */
int sp_add_record(sp_ctx *c, int kind, const uint64_t *mask, const double *rec, int len);

/* Sums of floats as Python >= 3.12's sum() makes them (Neumaier's compensation), or as before (on: 0). */
void sp_set_py312(sp_ctx *c, int on);

enum sp_status { SP_DONE = 0, SP_NEED_RECORD = 1, SP_ERROR = -1 };
enum sp_objective { SP_MAKESPAN = 0, SP_TURNAROUND = 1 };

typedef struct {
    int cmax, window, objective;
    double hold_weight, now, held;
    /* the running jobs, in start order */
    int nrun;
    const int *run_rec;
    const double *run_left, *run_factor, *run_solo;
    const uint64_t *run_mask; /* SP_MASK_WORDS words each */
    /* the queue, in order: each job's kind and program (two jobs of one program are one choice) */
    int nq;
    const int *q_kind, *q_name;
    const double *kind_solo;     /* by kind: the job's own time alone (the candidate's term of the rate) */
    const double *kind_run_solo; /* by kind: its program's time alone (its term once it runs) */
    /* the ends since the search's event, in order */
    int nends;
    const double *ends;
} sp_state;

/* Plays the queue forward from the state with Fill deciding (an even share of
 * the free CPUs per place, the last place all of them, compact; the job of the
 * first `window` programs with the highest instantaneous work rate) to the last
 * end. SP_DONE: *value is the objective (continuous.objective_value).
 * SP_NEED_RECORD: the record of kind *need_kind on the CPUs of need_mask is
 * missing: add it and call again. SP_ERROR: something over the limits or a
 * record the solve refuses (the caller plays it in Python). */
int sp_play_fill(sp_ctx *c, const sp_state *s, double *value, int *need_kind, uint64_t *need_mask);

#endif
