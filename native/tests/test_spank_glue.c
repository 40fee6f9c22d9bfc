/* Tests of cosched_spank.c, the SPANK glue, driven by a FAKE Slurm host:
 * this file defines the spank_* and slurm_* functions slurmstepd would
 * provide (job id, allocated cores, environment, log lines) and calls the
 * plugin's hooks in Slurm's order, each scenario in a forked child (the
 * plugin keeps one step's state, as in one slurmstepd). What it checks: a job
 * without --cosched is untouched; one log line per outcome; all or nothing
 * on error; --cosched=strict fails the task; the resctrl group lives as long
 * as the step that made it. The real daemons are exercised by tests/slurm. */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "check.h"
#include "spank/placement.h"

/* ---- the fake host ---- */
struct spank_handle {
    int remote;
};
static struct {
    spank_context_t ctx;
    struct spank_option *opt;
    uint32_t jobid;
    uint32_t stepid;
    int exit_status;
    char cores[64];
    int nenv;
    char env[16][2][1024];
    int nlog;
    char log[16][1024];
} H;

spank_context_t spank_context(void) { return H.ctx; }
int spank_remote(spank_t sp) { return sp->remote; }
spank_err_t spank_option_register(spank_t sp, struct spank_option *opt)
{
    (void)sp;
    H.opt = opt;
    return ESPANK_SUCCESS;
}
spank_err_t spank_get_item(spank_t sp, spank_item_t item, ...)
{
    (void)sp;
    va_list ap;
    va_start(ap, item);
    spank_err_t rc = ESPANK_SUCCESS;
    if (item == S_JOB_ID)
        *va_arg(ap, uint32_t *) = H.jobid;
    else if (item == S_JOB_STEPID)
        *va_arg(ap, uint32_t *) = H.stepid;
    else if (item == S_JOB_NODEID || item == S_SLURM_RESTART_COUNT)
        *va_arg(ap, uint32_t *) = 0;
    else if (item == S_TASK_EXIT_STATUS)
        *va_arg(ap, int *) = H.exit_status;
    else if (item == S_STEP_ALLOC_CORES)
        *va_arg(ap, char **) = H.cores;
    else if (item == S_TASK_ID)
        *va_arg(ap, int *) = 0;
    else
        rc = ESPANK_ERROR;
    va_end(ap);
    return rc;
}
spank_err_t spank_getenv(spank_t sp, const char *var, char *buf, int len)
{
    (void)sp;
    for (int i = 0; i < H.nenv; i++)
        if (!strcmp(H.env[i][0], var)) {
            snprintf(buf, (size_t)len, "%s", H.env[i][1]);
            return ESPANK_SUCCESS;
        }
    return ESPANK_ENV_NOEXIST;
}
spank_err_t spank_setenv(spank_t sp, const char *var, const char *val, int overwrite)
{
    (void)sp, (void)overwrite;
    int i = 0;
    while (i < H.nenv && strcmp(H.env[i][0], var))
        i++;
    if (i == 16)
        return ESPANK_ERROR;
    snprintf(H.env[i][0], sizeof H.env[i][0], "%s", var);
    snprintf(H.env[i][1], sizeof H.env[i][1], "%s", val);
    H.nenv += i == H.nenv;
    return ESPANK_SUCCESS;
}
static void logv(const char *prefix, const char *fmt, va_list ap)
{
    if (H.nlog == 16)
        return;
    int n = snprintf(H.log[H.nlog], sizeof H.log[0], "%s", prefix);
    vsnprintf(H.log[H.nlog] + n, sizeof H.log[0] - (size_t)n, fmt, ap);
    H.nlog++;
}
void slurm_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    logv("error: ", fmt, ap);
    va_end(ap);
}
void slurm_info(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    logv("", fmt, ap);
    va_end(ap);
}

/* ---- scenarios ---- */
static char tmpdir[256], lib[300];
static int cpu_a = -1;          /* a CPU of Slurm's core 0 we may use */
static char start_cpus[256];    /* our affinity at start */

static void cpus_now(char *buf, size_t len)
{
    cpu_set_t s;
    cm_cpuset p;
    sched_getaffinity(0, sizeof s, &s);
    cm_set_zero(&p);
    for (int c = 0; c < CPU_SETSIZE && c < CM_MAX_CPUS; c++)
        if (CPU_ISSET(c, &s))
            cm_set_add(&p, c);
    cm_format_cpulist(&p, buf, len);
}

static int mempolicy_now(void)
{
    int mode = -1;
    unsigned long mask[16] = {0};
    syscall(SYS_get_mempolicy, &mode, mask, 1025UL, NULL, 0UL);
    return mode;
}

static const char *env_of(const char *name)
{
    for (int i = 0; i < H.nenv; i++)
        if (!strcmp(H.env[i][0], name))
            return H.env[i][1];
    return NULL;
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

typedef struct {
    const char *optarg; /* NULL: no --cosched; "" : a bare --cosched */
    const char *resctrl_root;
    int rc_priv, rc_task; /* what the task hooks return */
} scenario;

/* Runs the hooks of one step with one task, as slurmstepd would. */
static void run_hooks(const scenario *sc)
{
    struct spank_handle h = {1};
    char pd[300], rr[300], pl[320];
    snprintf(pd, sizeof pd, "placement_dir=%s/placements", tmpdir);
    snprintf(rr, sizeof rr, "resctrl_root=%s", sc->resctrl_root);
    snprintf(pl, sizeof pl, "pinrt_lib=%s", lib);
    char *av[] = {pd, rr, pl};
    H.ctx = S_CTX_REMOTE;
    CHECK(slurm_spank_init(&h, 3, av) == 0 && H.opt && !strcmp(H.opt->name, "cosched") && H.opt->has_arg == 2);
    if (sc->optarg)
        CHECK(H.opt->cb(H.opt->val, *sc->optarg ? sc->optarg : NULL, 1) == 0);
    CHECK(slurm_spank_init_post_opt(&h, 3, av) == 0);
    CHECK(slurm_spank_task_init_privileged(&h, 3, av) == sc->rc_priv);
    CHECK(slurm_spank_task_init(&h, 3, av) == sc->rc_task);
}

static void write_placement(const char *text)
{
    char path[320], tmp[330];
    snprintf(path, sizeof path, "%s/placements/%u.placement", tmpdir, H.jobid);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
        rename(tmp, path);
    }
}

/* Each scenario runs in a child (fresh plugin state); the child's counts
 * come back through a pipe. */
static void in_child(void (*fn)(void), const char *name)
{
    int fd[2];
    if (pipe(fd))
        return;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        n_pass = n_fail = 0;
        fn();
        for (int i = 0; n_fail && i < H.nlog; i++)
            printf("  [%s] log: %s\n", name, H.log[i]);
        int c[2] = {n_pass, n_fail};
        if (write(fd[1], c, sizeof c) < 0)
            _exit(2);
        fflush(stdout);
        _exit(0);
    }
    close(fd[1]);
    int c[2] = {0, 1};
    if (read(fd[0], c, sizeof c) != (ssize_t)sizeof c)
        printf("FAIL scenario %s: the child died\n", name);
    close(fd[0]);
    waitpid(pid, NULL, 0);
    n_pass += c[0];
    n_fail += c[1];
    if (c[1])
        printf("FAIL scenario %s\n", name);
}

static char fake_resctrl[300];

static void no_option(void)
{
    H.jobid = 100;
    write_placement("version=1\ncpus=0\nmempolicy=bind\nmems=0\n");
    run_hooks(&(scenario){NULL, fake_resctrl, 0, 0});
    char now[256];
    cpus_now(now, sizeof now);
    CHECK(H.nlog == 0 && H.nenv == 0 && !strcmp(now, start_cpus) && mempolicy_now() == 0);
}

static void no_placement_file(void)
{
    H.jobid = 101;
    run_hooks(&(scenario){"", fake_resctrl, 0, 0});
    CHECK(H.nlog == 1 && strstr(H.log[0], "cosched: job 101: no placement file ") &&
          strstr(H.log[0], "101.placement; running unchanged"));
    CHECK(H.nenv == 0 && mempolicy_now() == 0);
}

static void applied(void)
{
    H.jobid = 102;
    char text[512], group[320], tasks[340], buf[64] = "";
    snprintf(text, sizeof text,
             "version=1\ncpus=%d\nmempolicy=bind\nmems=0\nresctrl_group=job102\nl3_schemata=L3:0=3\npinrt=1\n"
             "PINRT_SEED=4\n",
             cpu_a);
    write_placement(text);
    H.nenv = 1; /* what the job had already */
    strcpy(H.env[0][0], "LD_PRELOAD");
    strcpy(H.env[0][1], "/usr/lib/other.so");
    run_hooks(&(scenario){"(null)", fake_resctrl, 0, 0}); /* a bare --cosched read back from the job */
    char now[256], want[400];
    cpus_now(now, sizeof now);
    CHECK(atoi(now) == cpu_a && !strchr(now, ',') && !strchr(now, '-') && mempolicy_now() == 2);
    snprintf(want, sizeof want, "%s:/usr/lib/other.so", lib);
    CHECK(env_of("PINRT_SEED") && !strcmp(env_of("PINRT_SEED"), "4") && !strcmp(env_of("LD_PRELOAD"), want));
    CHECK(H.nlog == 1 && strstr(H.log[0], "cosched: job 102 task 0 pid ") &&
          strstr(H.log[0], "applied cpus=") && strstr(H.log[0], "mempolicy=bind mems=0 resctrl_group=job102 pinrt=1"));
    snprintf(group, sizeof group, "%s/job102", fake_resctrl);
    snprintf(tasks, sizeof tasks, "%s/tasks", group);
    FILE *f = fopen(tasks, "r");
    CHECK(f && fgets(buf, sizeof buf, f) && atol(buf) == (long)getpid());
    if (f)
        fclose(f);
    struct spank_handle h = {1};
    CHECK(slurm_spank_exit(&h, 0, NULL) == 0 && !exists(group) && H.nlog == 1);
}

static void outside_allocation(void)
{
    H.jobid = 103;
    write_placement("version=1\ncpus=1000\nmempolicy=bind\nmems=0\n");
    run_hooks(&(scenario){"pinrt", fake_resctrl, 0, 0});
    char now[256];
    cpus_now(now, sizeof now);
    CHECK(H.nlog == 1 && strstr(H.log[0], "error: cosched: job 103: cpus=1000: CPU 1000 is outside the CPUs Slurm "
                                          "allocated to the step") &&
          strstr(H.log[0], "; the task runs without cosched's placement"));
    CHECK(!strcmp(now, start_cpus) && mempolicy_now() == 0 && H.nenv == 0);
}

static void strict_fails(void)
{
    H.jobid = 104;
    write_placement("version=1\ncpus=1000\n");
    run_hooks(&(scenario){"strict", fake_resctrl, -1, -1});
    CHECK(H.nlog == 1 && strstr(H.log[0], "CPU 1000 is outside") &&
          strstr(H.log[0], "; failing the task (--cosched=strict)"));
}

static void no_resctrl(void)
{
    H.jobid = 105;
    char text[256], missing[300];
    snprintf(text, sizeof text, "version=1\ncpus=%d\nresctrl_group=job105\nmb_schemata=MB:0=20\n", cpu_a);
    write_placement(text);
    snprintf(missing, sizeof missing, "%s/not-mounted", tmpdir);
    run_hooks(&(scenario){"", missing, 0, 0});
    char now[256];
    cpus_now(now, sizeof now);
    CHECK(H.nlog == 1 && strstr(H.log[0], "error: cosched: job 105: resctrl is not mounted at ") &&
          !strcmp(now, start_cpus));
}

static void bad_file(void)
{
    H.jobid = 106;
    write_placement("version=1\ncpus=0\nspeed=fast\n");
    run_hooks(&(scenario){"", fake_resctrl, 0, 0});
    CHECK(H.nlog == 1 && strstr(H.log[0], "106.placement: line 3: unknown key 'speed'"));
}

static void bad_plugstack_line(void)
{
    struct spank_handle h = {1};
    char *av[] = {"placement_dir=/x", "colour=blue"};
    H.ctx = S_CTX_REMOTE;
    H.jobid = 107;
    CHECK(slurm_spank_init(&h, 2, av) == 0 && H.nlog == 0 && H.opt);
    CHECK(H.opt->cb(0, NULL, 1) == 0 && slurm_spank_init_post_opt(&h, 2, av) == 0);
    CHECK(slurm_spank_task_init_privileged(&h, 2, av) == 0 && slurm_spank_task_init(&h, 2, av) == 0);
    CHECK(H.nlog == 1 && strstr(H.log[0], "error: cosched: job 107: plugstack.conf argument 'colour=blue' is unknown"));
}

static void bad_option(void)
{
    struct spank_handle h = {0};
    H.ctx = S_CTX_LOCAL; /* srun: refused before anything runs */
    CHECK(slurm_spank_init(&h, 0, NULL) == 0 && H.opt);
    CHECK(H.opt->cb(0, "fast", 0) == -1 && H.nlog == 1 &&
          !strcmp(H.log[0], "error: cosched: --cosched option 'fast' is unknown (expected a comma list of strict, "
                            "pinrt)"));
    CHECK(H.opt->cb(0, "strict,pinrt", 0) == 0 && H.opt->cb(0, NULL, 0) == 0);
}

/* The once-only records: DIR/started/JOB.STEP.NODEID before the task, DIR/ended/ after. */
static int read_text(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
    return 0;
}

static void start_recorded_once(void)
{
    H.jobid = 110;
    H.stepid = SLURM_BATCH_SCRIPT;
    H.exit_status = 3 << 8; /* exit(3) */
    H.nenv = 1;
    strcpy(H.env[0][0], "SLURMD_NODENAME");
    strcpy(H.env[0][1], "n7");
    char text[256], path[400], rec[512];
    snprintf(text, sizeof text, "version=1\ncpus=%d\n", cpu_a);
    write_placement(text);
    run_hooks(&(scenario){"", fake_resctrl, 0, 0});
    snprintf(path, sizeof path, "%s/placements/started/110.batch.0", tmpdir);
    CHECK(read_text(path, rec, sizeof rec) == 0 && !strncmp(rec, "node=n7 time=", 13) && strstr(rec, " restarts=0\n"));
    snprintf(path, sizeof path, "%s/placements/ended/110.batch.0", tmpdir);
    CHECK(!exists(path));
    struct spank_handle h = {1};
    CHECK(slurm_spank_task_exit(&h, 0, NULL) == 0 && slurm_spank_exit(&h, 0, NULL) == 0);
    CHECK(read_text(path, rec, sizeof rec) == 0 && !strncmp(rec, "node=n7 ", 8) && strstr(rec, " exit=3\n"));
    CHECK(H.nlog == 1 && strstr(H.log[0], "applied cpus="));
}

static void second_start_refused(void)
{
    /* the same job's batch step again (run after start_recorded_once): its tasks fail before they run */
    H.jobid = 110;
    H.stepid = SLURM_BATCH_SCRIPT;
    char text[256], path[400], now[256];
    snprintf(text, sizeof text, "version=1\ncpus=%d\n", cpu_a);
    write_placement(text);
    run_hooks(&(scenario){"", fake_resctrl, -1, -1});
    CHECK(H.nlog == 1 && strstr(H.log[0], "error: cosched: job 110: not run again: step 110.batch.0 already started "
                                          "once (node=") &&
          strstr(H.log[0], "); Slurm started it a second time"));
    cpus_now(now, sizeof now);
    CHECK(!strcmp(now, start_cpus) && H.nenv == 0);
    snprintf(path, sizeof path, "ls %s/placements/refused | grep -q '^110\\.batch\\.0\\.[0-9]*$'", tmpdir);
    CHECK(system(path) == 0);
    struct spank_handle h = {1};
    CHECK(slurm_spank_exit(&h, 0, NULL) == 0 && H.nlog == 1); /* no end recorded for a refused start */
}

static void later_step_runs(void)
{
    /* step 0 of the same job (an srun inside the batch script) is its own first start */
    H.jobid = 110;
    H.stepid = 0;
    run_hooks(&(scenario){"", fake_resctrl, 0, 0});
    char path[400];
    snprintf(path, sizeof path, "%s/placements/started/110.0.0", tmpdir);
    CHECK(exists(path) && H.nlog == 1 && strstr(H.log[0], "applied"));
}

static void no_option_no_record(void)
{
    H.jobid = 111;
    H.stepid = SLURM_BATCH_SCRIPT;
    run_hooks(&(scenario){NULL, fake_resctrl, 0, 0});
    char path[400];
    snprintf(path, sizeof path, "%s/placements/started/111.batch.0", tmpdir);
    CHECK(!exists(path) && H.nlog == 0);
}

static void record_impossible(int strict)
{
    /* placement_dir/started is a file: no record can be made */
    H.jobid = 112;
    H.stepid = SLURM_BATCH_SCRIPT;
    char dir[320], path[340];
    snprintf(dir, sizeof dir, "%s/broken", tmpdir);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/started", dir);
    FILE *f = fopen(path, "w");
    if (f)
        fclose(f);
    struct spank_handle h = {1};
    char pd[340];
    snprintf(pd, sizeof pd, "placement_dir=%s", dir);
    char *av[] = {pd};
    H.ctx = S_CTX_REMOTE;
    CHECK(slurm_spank_init(&h, 1, av) == 0);
    CHECK(H.opt->cb(H.opt->val, strict ? "strict" : NULL, 1) == 0 && slurm_spank_init_post_opt(&h, 1, av) == 0);
    CHECK(slurm_spank_task_init_privileged(&h, 1, av) == (strict ? -1 : 0));
    if (strict)
        CHECK(H.nlog == 1 && strstr(H.log[0], "error: cosched: job 112: cannot record its start (cannot create ") &&
              strstr(H.log[0], "failing the task (--cosched=strict)"));
    else
        CHECK(H.nlog == 2 && strstr(H.log[0], "error: cosched: job 112: cannot record its start, so a second start "
                                              "would not be refused: cannot create ") &&
              strstr(H.log[1], "no placement file"));
}

static void record_impossible_lax(void) { record_impossible(0); }
static void record_impossible_strict(void) { record_impossible(1); }

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "%s/test_spank_glue.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    char path[320];
    snprintf(path, sizeof path, "%s/placements", tmpdir);
    mkdir(path, 0755);
    snprintf(lib, sizeof lib, "%s/libpinrt.so", tmpdir);
    FILE *f = fopen(lib, "w");
    if (f)
        fclose(f);
    /* FAKE resctrl root: a directory holding the root group's files */
    snprintf(fake_resctrl, sizeof fake_resctrl, "%s/resctrl", tmpdir);
    mkdir(fake_resctrl, 0755);
    snprintf(path, sizeof path, "%s/schemata", fake_resctrl);
    if ((f = fopen(path, "w")))
        fclose(f);
    cpus_now(start_cpus, sizeof start_cpus);
    /* A CPU of Slurm's core 0 on this machine that we may run on. */
    cm_cpuset core0, mine;
    char err[256];
    cm_parse_cpulist(start_cpus, &mine);
    if (cp_cores_to_cpus("", "0", &core0, err, sizeof err) == 0)
        for (int c = 0; c < CM_MAX_CPUS && cpu_a < 0; c++)
            if (cm_set_has(&core0, c) && cm_set_has(&mine, c))
                cpu_a = c;
    CHECK(cpu_a >= 0); /* else this machine cannot run the applied scenarios */
    strcpy(H.cores, "0");
    in_child(no_option, "no --cosched");
    in_child(no_placement_file, "no placement file");
    in_child(applied, "applied");
    in_child(outside_allocation, "cpus outside the allocation");
    in_child(strict_fails, "strict");
    in_child(no_resctrl, "no resctrl");
    in_child(bad_file, "bad placement file");
    in_child(bad_option, "bad option");
    in_child(bad_plugstack_line, "bad plugstack.conf line");
    in_child(start_recorded_once, "start and end recorded");
    in_child(second_start_refused, "a second start refused");
    in_child(later_step_runs, "a later step of the job runs");
    in_child(no_option_no_record, "no record without --cosched");
    in_child(record_impossible_lax, "no record possible");
    in_child(record_impossible_strict, "no record possible, strict");
    snprintf(path, sizeof path, "rm -rf '%s'", tmpdir);
    if (system(path))
        printf("could not remove %s\n", tmpdir);
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
