/* The simulated node's group run (env/sim/model.py: run_group, solve, _cache_mb,
 * traffic_gb, miss_ratio) in C, for the planners' inner loop: the search
 * spends most of its time simulating groups. The Python module stays the
 * definition of the model (its docstring gives the equations); this is the
 * same arithmetic in the same order, so both give the same doubles (a test
 * compares them bit for bit over random groups on several node shapes).
 *
 * Inputs are flat double records (integers and way masks are exact in a
 * double below 2^53), packed once in Python:
 *
 *   node: nd, nl3, link_gbs, overlap, iterations, bw[nd], way_mb[nl3]
 *   job:  size (of this record, in doubles), tc, bmax, core_cap, ins_stream,
 *         ins_reuse, stream_gb, reuse_gb, ws_mb, ws2_mb, ws2_share, n,
 *         n_routes, n_comm, n_l3[nl3], masks[nl3], routes (s, m, f) x
 *         n_routes, comm (a, b, gb) x n_comm
 *
 * The jobs of a group are their records one after another. Pure: no state,
 * no allocation, safe from any thread. */
#ifndef COSCHED_SIMGROUP_H
#define COSCHED_SIMGROUP_H

#define SG_MAX_DOMAINS 16 /* NUMA domains */
#define SG_MAX_L3 64      /* L3 domains */
#define SG_MAX_JOBS 8     /* a group (the way-sharing patterns are 2^jobs) */
#define SG_HEAD 14        /* a job record's fixed part, in doubles */

/* Each job's end time (seconds from the group's start) in ends[k]; factors
 * (NULL: none) multiply each job's time, as the model's noise does. Returns 0,
 * or -1 when a record is malformed or over the limits above (nothing written
 * then: the caller runs the Python model). */
int sg_run_group(const double *node, int node_len, const double *jobs, int jobs_len, int k, const double *factors,
                 double *ends);

/* model.solve: each job's time for its whole work when the k jobs run together
 * from now on (times[k]). Returns 0, or -1 as sg_run_group does. */
int sg_solve(const double *node, int node_len, const double *jobs, int jobs_len, int k, double *times);

#endif
