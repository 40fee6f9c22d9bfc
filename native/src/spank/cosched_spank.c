/* cosched_spank.so: Slurm's side of cosched on a node (SPANK plugin).
 * The logic lives in the files placement.h lists (no Slurm in them); this one wires it to Slurm's hooks:
 *
 *   slurm_spank_init               registers --cosched[=strict,pinrt] (srun, sbatch, salloc, slurmstepd)
 *   slurm_spank_init_post_opt      slurmstepd, once per step, as root: records the step's start under
 *                                  DIR/started/ (once: a second start of the step is refused), reads
 *                                  DIR/<jobid>.placement, checks it against the step's allocated cores,
 *                                  creates the resctrl group
 *   slurm_spank_task_init_privileged  each task, as root, after fork: joins the resctrl group
 *   slurm_spank_task_init          each task, just before execve (after Slurm's task plugin bound it):
 *                                  CPU affinity, memory policy, PINRT_* and LD_PRELOAD
 *   slurm_spank_task_exit          slurmstepd, each task's end: keeps its exit status
 *   slurm_spank_exit               slurmstepd: records the step's end under DIR/ended/, removes the
 *                                  resctrl group this step created
 *
 * A job without --cosched is not touched. A step of a --cosched job that
 * already started once (on any node sharing DIR: slurmctld restarted from
 * older state, or requeued the job) is refused: one line, and its tasks fail
 * before they run. On any other error one line is logged (slurmd's log) and
 * the task runs as Slurm would, unless --cosched=strict.
 * SPANK gives a plugin no handle for its own data: the state of this step
 * lives in the one static `S` (one slurmstepd per step; tasks are forked
 * children with their own copy). */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h> /* SLURM_EXTERN_CONT */
#include <slurm/spank.h>

#include "placement.h"

#pragma GCC visibility push(default)
SPANK_PLUGIN(cosched, 1);
#pragma GCC visibility pop

enum { ST_OFF, ST_APPLY, ST_SKIP, ST_FAIL, ST_AGAIN /* a second start: refused */ };

static struct {
    int asked;   /* --cosched given */
    int state;   /* ST_* */
    cp_opts opts;
    cp_conf conf;
    char conf_err[256]; /* a bad plugstack.conf line, reported to jobs that ask */
    cp_placement p;
    unsigned jobid;
    int group_created;
    int task_failed; /* in a task's process: its resctrl join failed */
    char step[64];   /* the step's record name, JOB.STEP.NODEID (marker.c) */
    int claimed;     /* this step recorded its start: it records its end */
    int exit_status; /* the last task's wait status (slurm_spank_task_exit) */
} S;

static int opt_cb(int val, const char *optarg, int remote)
{
    (void)val;
    char err[256];
    /* sbatch/srun export a bare --cosched to the job's environment as the
     * text "(null)", and a step started inside the job reads it back. */
    if (optarg && !strcmp(optarg, "(null)"))
        optarg = NULL;
    if (cp_opts_parse(&S.opts, optarg, err, sizeof err)) {
        slurm_error("cosched: %s", err);
        return remote ? 0 : -1; /* refuse the submission; never fail a step on the node for it */
    }
    S.asked = 1;
    return 0;
}

static struct spank_option cosched_option = {
    "cosched", "[strict,pinrt]",
    "Co-schedule this job with cosched: apply the placement cosched decided (CPUs, memory policy, resctrl "
    "group, pinning runtime). strict: fail the task if it cannot be applied; pinrt: load the pinning runtime.",
    2, 0, opt_cb};

__attribute__((visibility("default"))) int slurm_spank_init(spank_t sp, int ac, char **av)
{
    spank_context_t ctx = spank_context();
    if (ctx != S_CTX_LOCAL && ctx != S_CTX_REMOTE && ctx != S_CTX_ALLOCATOR)
        return 0;
    if (spank_option_register(sp, &cosched_option) != ESPANK_SUCCESS)
        slurm_error("cosched: cannot register the --cosched option");
    if (ctx == S_CTX_REMOTE) {
        if (cp_conf_parse(&S.conf, ac, av, S.conf_err, sizeof S.conf_err))
            S.conf.placement_dir[0] = '\0';
    }
    return 0;
}

enum { NO_TASK = INT_MIN }; /* an error of the whole step, not of one task */

/* The one error line of a --cosched job (slurmd's log): what failed, for the
 * step or one task, and what happens to the task. Returns the hook's result:
 * -1 fails the task, under --cosched=strict only. */
static int job_error(int task, const char *why)
{
    const char *then =
        S.opts.strict ? "failing the task (--cosched=strict)" : "the task runs without cosched's placement";
    if (task == NO_TASK)
        slurm_error("cosched: job %u: %s; %s", S.jobid, why, then);
    else
        slurm_error("cosched: job %u task %d: %s; %s", S.jobid, task, why, then);
    return S.opts.strict ? -1 : 0;
}

/* An error of the whole step: every task of it runs as Slurm would (or fails). */
static void step_error(const char *why)
{
    S.state = job_error(NO_TASK, why) ? ST_FAIL : ST_SKIP;
}

/* The node's name for the records: slurmd's (SLURMD_NODENAME), else the host's. */
static void node_name(spank_t sp, char *buf, size_t len)
{
    if (spank_getenv(sp, "SLURMD_NODENAME", buf, (int)len) == ESPANK_SUCCESS && buf[0])
        return;
    const char *env = getenv("SLURMD_NODENAME");
    if (env && *env && strlen(env) < len) {
        strcpy(buf, env);
        return;
    }
    if (gethostname(buf, len))
        snprintf(buf, len, "?");
    buf[len - 1] = '\0';
}

/* "node=n1 time=1795685006.123 pid=123 restarts=0": what a record says of now. */
static void record_text(spank_t sp, char *buf, size_t len, const char *extra)
{
    char node[128];
    struct timespec ts;
    uint32_t restarts = 0;
    node_name(sp, node, sizeof node);
    clock_gettime(CLOCK_REALTIME, &ts);
    spank_get_item(sp, S_SLURM_RESTART_COUNT, &restarts);
    snprintf(buf, len, "node=%s time=%lld.%03ld pid=%ld restarts=%u%s\n", node, (long long)ts.tv_sec,
             ts.tv_nsec / 1000000, (long)getpid(), (unsigned)restarts, extra);
}

/* Records the step's start, once for every node sharing the placement
 * directory. Returns -1 when the step must not go on: it started before
 * (S.state ST_AGAIN, refused whatever the options), or the record failed
 * under --cosched=strict (ST_FAIL). Without strict a failed record is one
 * line and the step goes on, unguarded. */
static int claim_start(spank_t sp)
{
    uint32_t stepid = 0, nodeid = 0;
    spank_get_item(sp, S_JOB_STEPID, &stepid);
    spank_get_item(sp, S_JOB_NODEID, &nodeid);
    if (stepid == SLURM_EXTERN_CONT)
        return 0; /* the job's container step runs no task of the job */
    cp_step_name(S.step, sizeof S.step, S.jobid, stepid, nodeid);
    char text[512], prev[512], err[768];
    record_text(sp, text, sizeof text, "");
    int rc = cp_mark(S.conf.placement_dir, "started", S.step, text, prev, sizeof prev, err, sizeof err);
    if (rc == 0) {
        S.claimed = 1;
        return 0;
    }
    if (rc == 1) {
        slurm_error("cosched: job %u: not run again: step %s already started once (%s); Slurm started it a second "
                    "time (slurmctld restarted from older state, or the job was requeued)",
                    S.jobid, S.step, prev);
        /* For the controller's report; the refusal stands whether or not this is kept. */
        struct timespec ts;
        char name[128];
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(name, sizeof name, "%s.%lld%09ld", S.step, (long long)ts.tv_sec, ts.tv_nsec);
        cp_mark(S.conf.placement_dir, "refused", name, text, prev, sizeof prev, err, sizeof err);
        S.state = ST_AGAIN;
        return -1;
    }
    if (S.opts.strict) {
        char why[900];
        snprintf(why, sizeof why, "cannot record its start (%s)", err);
        step_error(why);
        return -1;
    }
    slurm_error("cosched: job %u: cannot record its start, so a second start would not be refused: %s", S.jobid, err);
    return 0;
}

__attribute__((visibility("default"))) int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    (void)ac, (void)av;
    if (!spank_remote(sp) || !S.asked)
        return 0;
    uint32_t jobid = 0;
    spank_get_item(sp, S_JOB_ID, &jobid);
    S.jobid = jobid;
    if (!S.conf.placement_dir[0]) {
        step_error(S.conf_err);
        return 0;
    }
    if (claim_start(sp))
        return 0;
    char path[CP_PATH + 32], err[768];
    int rc = cp_read(&S.p, S.conf.placement_dir, S.jobid, path, sizeof path, err, sizeof err);
    if (rc == 1) {
        slurm_info("cosched: job %u: no placement file %s; running unchanged", S.jobid, path);
        S.state = ST_OFF;
        return 0;
    }
    if (rc < 0) {
        step_error(err);
        return 0;
    }
    char *cores = NULL;
    cm_cpuset alloc;
    if (spank_get_item(sp, S_STEP_ALLOC_CORES, &cores) != ESPANK_SUCCESS || !cores) {
        step_error("Slurm did not say which cores it allocated to the step");
        return 0;
    }
    if (cp_cores_to_cpus("", cores, &alloc, err, sizeof err) || cp_check(&S.p, &alloc, "", err, sizeof err)) {
        step_error(err);
        return 0;
    }
    if (S.p.resctrl_group[0]) {
        /* Created here, in slurmstepd, so that slurm_spank_exit (same process)
         * knows whether this step made the group; tasks join it after fork. */
        if (cp_resctrl_create(S.conf.resctrl_root, &S.p, &S.group_created, err, sizeof err)) {
            step_error(err);
            return 0;
        }
    }
    S.state = ST_APPLY;
    return 0;
}

__attribute__((visibility("default"))) int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
    (void)sp, (void)ac, (void)av;
    if (S.state == ST_FAIL || S.state == ST_AGAIN)
        return -1;
    if (S.state != ST_APPLY || !S.p.resctrl_group[0])
        return 0;
    char err[768];
    if (cp_resctrl_add(S.conf.resctrl_root, S.p.resctrl_group, getpid(), err, sizeof err)) {
        S.task_failed = 1;
        return job_error(NO_TASK, err);
    }
    return 0;
}

__attribute__((visibility("default"))) int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    (void)ac, (void)av;
    if (S.state == ST_FAIL || S.state == ST_AGAIN)
        return -1;
    if (S.state != ST_APPLY || S.task_failed)
        return 0;
    char old[4096] = "", err[768], what[512];
    if (spank_getenv(sp, "LD_PRELOAD", old, sizeof old) != ESPANK_SUCCESS)
        old[0] = '\0';
    cp_env env;
    int runtime = cp_runtime_wanted(&S.p, &S.opts);
    int rc = cp_build_env(&env, &S.p, &S.opts, S.conf.pinrt_lib, old, err, sizeof err);
    if (!rc)
        rc = cp_apply_self(&S.p, err, sizeof err);
    for (int i = 0; !rc && i < env.n; i++)
        if (spank_setenv(sp, env.name[i], env.value[i], 1) != ESPANK_SUCCESS) {
            snprintf(err, sizeof err, "cannot set %s in the task's environment", env.name[i]);
            rc = -1;
        }
    int task = -1;
    spank_get_item(sp, S_TASK_ID, &task);
    if (rc)
        return job_error(task, err);
    cp_describe(&S.p, runtime, what, sizeof what);
    slurm_info("cosched: job %u task %d pid %ld: applied %s", S.jobid, task, (long)getpid(), what);
    return 0;
}

__attribute__((visibility("default"))) int slurm_spank_task_exit(spank_t sp, int ac, char **av)
{
    (void)ac, (void)av;
    int status = 0;
    if (spank_remote(sp) && S.claimed && spank_get_item(sp, S_TASK_EXIT_STATUS, &status) == ESPANK_SUCCESS)
        S.exit_status = status;
    return 0;
}

__attribute__((visibility("default"))) int slurm_spank_exit(spank_t sp, int ac, char **av)
{
    (void)ac, (void)av;
    if (!spank_remote(sp))
        return 0;
    char err[768];
    if (S.claimed) {
        char text[600], extra[64], prev[512];
        int st = S.exit_status;
        if (WIFSIGNALED(st))
            snprintf(extra, sizeof extra, " signal=%d", WTERMSIG(st));
        else
            snprintf(extra, sizeof extra, " exit=%d", WEXITSTATUS(st));
        record_text(sp, text, sizeof text, extra);
        if (cp_mark(S.conf.placement_dir, "ended", S.step, text, prev, sizeof prev, err, sizeof err) < 0)
            slurm_error("cosched: job %u: cannot record the end of step %s: %s", S.jobid, S.step, err);
        S.claimed = 0;
    }
    if (!S.group_created)
        return 0;
    if (cp_resctrl_remove(S.conf.resctrl_root, S.p.resctrl_group, err, sizeof err))
        slurm_error("cosched: job %u: %s", S.jobid, err);
    S.group_created = 0;
    return 0;
}
