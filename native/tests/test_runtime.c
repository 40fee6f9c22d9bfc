/* Runtime tests: this binary links the runtime in (no LD_PRELOAD), so it can
 * be built with AddressSanitizer and ThreadSanitizer. Without arguments it
 * runs every scenario as a child process of itself (fresh environment per
 * scenario, since the runtime reads PINRT_* at load) and checks the child's
 * exit status, stderr, summary and trace. Prints "N passed, N failed". */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

/* ---------------- child side ---------------- */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void burn(double secs)
{
    double end = now() + secs;
    volatile unsigned long x = 0;
    while (now() < end)
        for (int i = 0; i < 10000; i++)
            x += (unsigned long)i;
}

static cpu_set_t start_mask;
static atomic_int outside;

/* Runs before the runtime's constructor (priority 101 < default), so this
 * is the mask the process was given, before any pinning. */
__attribute__((constructor(101))) static void capture_mask(void) { sched_getaffinity(0, sizeof start_mask, &start_mask); }

/* Every thread checks its own mask often: it must stay in the start mask. */
static void check_mask(void)
{
    cpu_set_t cs;
    if (sched_getaffinity(0, sizeof cs, &cs) == 0) {
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &cs) && !CPU_ISSET(c, &start_mask))
                atomic_store(&outside, 1);
    }
}

static void *w_return(void *a)
{
    for (int i = 0; i < 40; i++) {
        burn(0.01);
        check_mask();
    }
    return a;
}

static void *w_exit(void *a)
{
    burn(0.2);
    check_mask();
    pthread_exit(a);
}

static void *w_cancel(void *a)
{
    for (;;) {
        burn(0.01);
        check_mask();
        pthread_testcancel();
    }
    return a;
}

static int live_tasks(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

/* Threads that return, call pthread_exit and get cancelled. */
static int child_threads(void)
{
    pthread_t t[6];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, w_return, (void *)(long)(i + 1));
    pthread_create(&t[3], NULL, w_exit, (void *)4L);
    pthread_create(&t[4], NULL, w_cancel, NULL);
    pthread_create(&t[5], NULL, w_cancel, NULL);
    burn(0.2);
    pthread_cancel(t[4]);
    pthread_cancel(t[5]);
    long sum = 0;
    for (int i = 0; i < 6; i++) {
        void *r;
        pthread_join(t[i], &r);
        if (r != PTHREAD_CANCELED)
            sum += (long)r;
    }
    burn(0.1);
    check_mask();
    printf("sum=%ld outside=%d\n", sum, atomic_load(&outside));
    return atomic_load(&outside) ? 1 : 0;
}

/* fork from a (pinned) worker while threads run: the child starts from the
 * process's original mask and creates threads of its own. */
static void *w_fork(void *arg)
{
    (void)arg;
    burn(0.3); /* several epochs: this thread is pinned by now */
    pid_t p = fork();
    if (p == 0) {
        cpu_set_t cs;
        sched_getaffinity(0, sizeof cs, &cs);
        if (!CPU_EQUAL(&cs, &start_mask))
            _exit(2);
        pthread_t c[2];
        for (int i = 0; i < 2; i++)
            pthread_create(&c[i], NULL, w_return, (void *)3L);
        long s = 0;
        for (int i = 0; i < 2; i++) {
            void *r;
            pthread_join(c[i], &r);
            s += (long)r;
        }
        _exit(s == 6 ? 0 : 1);
    }
    int st = -1;
    waitpid(p, &st, 0);
    return (void *)(long)(WIFEXITED(st) ? WEXITSTATUS(st) : 100);
}

static int child_fork(void)
{
    pthread_t t[3];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, w_return, NULL);
    pthread_create(&t[2], NULL, w_fork, NULL);
    void *st;
    pthread_join(t[2], &st);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("fork child status=%ld\n", (long)st);
    return st == NULL ? 0 : 1;
}

static atomic_int got_sig;
static atomic_int sig_on_mgr;

static int is_manager(pid_t tid)
{
    char path[64], buf[64] = "";
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)tid);
    FILE *f = fopen(path, "r");
    if (f) {
        if (!fgets(buf, sizeof buf, f))
            buf[0] = '\0';
        fclose(f);
    }
    return !strncmp(buf, "pinrt-mgr", 9);
}

static atomic_int sig_tids[64];

/* Async-signal-safe: only records which thread took the signal. */
static void on_sig(int s)
{
    (void)s;
    int i = atomic_fetch_add(&got_sig, 1);
    if (i < 64)
        atomic_store(&sig_tids[i], (int)gettid());
}

/* The manager blocks every signal: find it and read SigBlk. */
static int child_signals(void)
{
    signal(SIGUSR1, on_sig);
    pthread_t t; /* the manager starts with the first thread */
    pthread_create(&t, NULL, w_return, NULL);
    burn(0.1);
    for (int i = 0; i < 50; i++) {
        kill(getpid(), SIGUSR1);
        burn(0.002);
    }
    for (int i = 0; i < 50 && i < 64; i++)
        if (is_manager((pid_t)atomic_load(&sig_tids[i])))
            atomic_store(&sig_on_mgr, 1);
    int found = 0, blocked_all = 0;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.' || !is_manager((pid_t)atoi(e->d_name)))
            continue;
        found = 1;
        char path[320], line[256];
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        FILE *f = fopen(path, "r");
        while (f && fgets(line, sizeof line, f))
            if (!strncmp(line, "SigBlk:", 7)) {
                /* All blocked but SIGKILL, SIGSTOP and glibc's two internal
                 * signals (32, 33), which cannot be blocked. */
                unsigned long long m = strtoull(line + 7, NULL, 16);
                unsigned long long may_miss = (1ULL << 8) | (1ULL << 18) | (1ULL << 31) | (1ULL << 32);
                blocked_all = (m | may_miss) == ~0ULL;
            }
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    pthread_join(t, NULL);
    printf("manager=%d blocked_all=%d signals=%d on_manager=%d\n", found, blocked_all, atomic_load(&got_sig),
           atomic_load(&sig_on_mgr));
    return found && blocked_all && atomic_load(&got_sig) == 50 && !atomic_load(&sig_on_mgr) ? 0 : 1;
}

/* Stack binding (zeta): the worker's stack ends up with a preferred policy. */
static atomic_int policy_seen = -1;
static void *w_policy(void *a)
{
    (void)a;
    volatile char pad[4096];
    pad[0] = 1;
    double end = now() + 1.5;
    while (now() < end && atomic_load(&policy_seen) <= 0) {
        burn(0.02);
        int mode = -1;
        unsigned long mask[16] = {0};
        if (syscall(SYS_get_mempolicy, &mode, mask, 8 * sizeof mask, (void *)pad, 2 /* MPOL_F_ADDR */) == 0)
            atomic_store(&policy_seen, mode);
    }
    return NULL;
}

static int child_zeta(void)
{
    pthread_t t;
    pthread_create(&t, NULL, w_policy, NULL);
    pthread_join(t, NULL);
    printf("stack policy=%d\n", atomic_load(&policy_seen));
    return atomic_load(&policy_seen) > 0 ? 0 : 1; /* MPOL_PREFERRED = 1 */
}

/* A thread made with clone(2), not pthread_create: found through
 * /proc/self/task reconciliation. It only spins on the vDSO clock (no TLS). */
static atomic_int raw_tid, raw_done;
static int raw_thread(void *arg)
{
    (void)arg;
    atomic_store(&raw_tid, (int)syscall(SYS_gettid));
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do
        clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < 600000000L);
    atomic_store(&raw_done, 1);
    return 0;
}

static int child_clone(void)
{
    pthread_t t; /* starts the manager */
    pthread_create(&t, NULL, w_return, NULL);
    size_t sz = 256 * 1024;
    char *stack = malloc(sz);
    int flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM;
    if (!stack || clone(raw_thread, stack + sz, flags, NULL) < 0)
        return 1;
    while (!atomic_load(&raw_done))
        burn(0.01);
    burn(0.1); /* let the raw thread exit before its stack goes */
    pthread_join(t, NULL);
    printf("raw_tid=%d\n", atomic_load(&raw_tid));
    return 0;
}

/* A thread that pins itself after the runtime pinned it keeps its own mask. */
static void *w_selfpin(void *arg)
{
    int *ok = arg;
    cpu_set_t cs;
    double end = now() + 2;
    do { /* wait to be pinned by the runtime */
        burn(0.01);
        sched_getaffinity(0, sizeof cs, &cs);
    } while (CPU_COUNT(&cs) != 1 && now() < end);
    int mine = -1;
    for (int c = 0; c < CPU_SETSIZE && mine < 0; c++)
        if (CPU_ISSET(c, &start_mask) && !CPU_ISSET(c, &cs))
            mine = c;
    for (int c = 0; c < CPU_SETSIZE && mine < 0; c++) /* never pinned: any CPU */
        if (CPU_ISSET(c, &start_mask))
            mine = c;
    CPU_ZERO(&cs);
    CPU_SET(mine, &cs);
    sched_setaffinity(0, sizeof cs, &cs);
    *ok = 1;
    for (int k = 0; k < 60; k++) {
        burn(0.01);
        cpu_set_t now_cs;
        sched_getaffinity(0, sizeof now_cs, &now_cs);
        if (!CPU_EQUAL(&now_cs, &cs))
            *ok = 0;
    }
    return NULL;
}

static int child_selfpin(void)
{
    pthread_t t[3];
    int ok = 0;
    pthread_create(&t[0], NULL, w_return, NULL);
    pthread_create(&t[1], NULL, w_return, NULL);
    pthread_create(&t[2], NULL, w_selfpin, &ok);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    printf("selfpin ok=%d\n", ok);
    return ok ? 0 : 1;
}

static int child_main(const char *what)
{
    int rc = 1;
    if (!strcmp(what, "threads"))
        rc = child_threads();
    else if (!strcmp(what, "fork"))
        rc = child_fork();
    else if (!strcmp(what, "signals"))
        rc = child_signals();
    else if (!strcmp(what, "zeta"))
        rc = child_zeta();
    else if (!strcmp(what, "clone"))
        rc = child_clone();
    else if (!strcmp(what, "selfpin"))
        rc = child_selfpin();
    else if (!strcmp(what, "single")) {
        burn(0.2);
        printf("single\n");
        rc = 0;
    } else if (!strcmp(what, "exit7")) {
        child_threads();
        rc = 7;
    }
    fflush(stdout);
    (void)live_tasks;
    return rc;
}

/* ---------------- parent side ---------------- */

static char self_path[4096];
static char tmpdir[256];

struct result {
    int status;
    char out[4096], err[4096], summary[1024];
    char *trace;
};

static void slurp(const char *path, char *buf, size_t len)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
}

static char *slurp_all(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    size_t r;
    while (b && (r = fread(b + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (cap - n < 2) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) {
                free(b);
                b = NULL;
                break;
            }
            b = nb;
        }
    }
    if (b)
        b[n] = '\0';
    fclose(f);
    return b;
}

/* Runs "self scenario" with env = base PINRT_* cleared + given pairs. */
static void run(const char *scenario, const char **env, struct result *r)
{
    char out[512], err[512], sum[512], tr[512];
    snprintf(out, sizeof out, "%s/out", tmpdir);
    snprintf(err, sizeof err, "%s/err", tmpdir);
    snprintf(sum, sizeof sum, "%s/summary", tmpdir);
    snprintf(tr, sizeof tr, "%s/trace.csv", tmpdir);
    unlink(sum);
    unlink(tr);
    pid_t p = fork();
    if (p == 0) {
        int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fo, 1);
        dup2(fe, 2);
        extern char **environ;
        for (char **e = environ; *e;) { /* drop inherited PINRT_* */
            if (!strncmp(*e, "PINRT_", 6)) {
                char name[128];
                size_t l = strcspn(*e, "=");
                snprintf(name, sizeof name, "%.*s", (int)l, *e);
                unsetenv(name);
            } else
                e++;
        }
        setenv("PINRT_SUMMARY", sum, 1);
        setenv("PINRT_TRACE", tr, 1);
        setenv("PINRT_PERIOD", "0.02", 1);
        for (int i = 0; env && env[i]; i += 2)
            setenv(env[i], env[i + 1], 1);
        alarm(60);
        execl(self_path, self_path, scenario, (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(p, &st, 0);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    slurp(out, r->out, sizeof r->out);
    slurp(err, r->err, sizeof r->err);
    slurp(sum, r->summary, sizeof r->summary);
    free(r->trace);
    r->trace = slurp_all(tr);
}

static long field(const char *s, const char *key)
{
    const char *p = strstr(s, key);
    return p ? atol(p + strlen(key)) : -1;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; s && *s; s++)
        n += *s == '\n';
    return n;
}

static int ncpus_allowed(void)
{
    cpu_set_t cs;
    sched_getaffinity(0, sizeof cs, &cs);
    return CPU_COUNT(&cs);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        return child_main(argv[1]);
    ssize_t n = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (n <= 0)
        return 2;
    self_path[n] = '\0';
    snprintf(tmpdir, sizeof tmpdir, "/tmp/pinrt-test-XXXXXX");
    if (!mkdtemp(tmpdir))
        return 2;
    struct result r = {0};

    /* Threads of every kind; they stay in the start mask; summary and trace. */
    run("threads", NULL, &r);
    printf("threads: status %d, %s", r.status, r.summary);
    CHECK(r.status == 0);
    CHECK(strstr(r.out, "sum=10 outside=0") != NULL);
    CHECK(field(r.summary, "epochs=") >= 10);
    CHECK(field(r.summary, "threads_seen=") >= 6); /* the 6 workers, not main */
    CHECK(strstr(r.summary, "state=full") != NULL);
    CHECK(strstr(r.summary, "speed_source=") != NULL);
    CHECK(r.trace && !strncmp(r.trace, "epoch,time_s,tid,domain,cpus,speed,utility,objective\n", 52));
    CHECK(count_lines(r.trace) > 20);
    CHECK(r.err[0] == '\0');

    /* A program that never creates a thread is left alone: no manager. */
    run("single", NULL, &r);
    CHECK(r.status == 0 && !strcmp(r.out, "single\n") && r.summary[0] == '\0' && r.err[0] == '\0');

    /* The program's exit status is kept. */
    run("exit7", NULL, &r);
    CHECK(r.status == 7);
    CHECK(strstr(r.out, "sum=10") != NULL);

    /* Bad configurations: one line on stderr, runtime off, same result. */
    const char *bad[][2] = {{"PINRT_CORE_METHOD", "XX"}, {"PINRT_PERIOD", "-1"},
                            {"PINRT_TOPOLOGY", "garbage"}, {"PINRT_CPUS", "4095"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *env[] = {bad[i][0], bad[i][1], NULL};
        run("exit7", env, &r);
        CHECK(r.status == 7);
        CHECK(strstr(r.out, "sum=10 outside=0") != NULL);
        CHECK(count_lines(r.err) == 1 && strstr(r.err, bad[i][0]) && strstr(r.err, "runtime disabled"));
        CHECK(r.summary[0] == '\0'); /* no manager ran */
        if (count_lines(r.err) != 1)
            printf("stderr was: %s\n", r.err);
    }
    const char *off[] = {"PINRT_ENABLE", "0", NULL};
    run("exit7", off, &r);
    CHECK(r.status == 7 && r.err[0] == '\0' && r.summary[0] == '\0');

    /* fork() with a live manager: the child runs threads and exits cleanly.
     * ThreadSanitizer does not support threads in the child of a
     * multi-threaded fork ("dup thread with used id"), so not under TSan. */
#ifndef __SANITIZE_THREAD__
    run("fork", NULL, &r);
    CHECK(r.status == 0);
    CHECK(strstr(r.out, "fork child status=0") != NULL);
#else
    printf("fork: skipped under ThreadSanitizer\n");
#endif

    /* Signals never land on the manager. */
    run("signals", NULL, &r);
    printf("signals: %s", r.out);
    if (r.status)
        printf("stderr was: %s\n", r.err);
    CHECK(r.status == 0);

    /* A forced two-domain topology exercises the domain level. */
    if (ncpus_allowed() >= 2) {
        const char *topo[] = {"PINRT_TOPOLOGY", "0:0;1:1", "PINRT_NUMA_EVERY", "1", "PINRT_LAMBDA_A", "0.5",
                              "PINRT_CORE_METHOD", "NULL", NULL};
        run("threads", topo, &r);
        CHECK(r.status == 0);
        int d0 = 0, d1 = 0;
        for (char *l = r.trace ? strchr(r.trace, '\n') : NULL; l && l[1]; l = strchr(l + 1, '\n')) {
            int ep, tid, dom;
            double t;
            if (sscanf(l + 1, "%d,%lf,%d,%d,", &ep, &t, &tid, &dom) == 4) {
                d0 += dom == 0;
                d1 += dom == 1;
            }
        }
        printf("topology: trace rows on domain 0: %d, domain 1: %d\n", d0, d1);
        CHECK(d0 > 0 && d1 > 0);
        CHECK(strstr(r.summary, "state=full") != NULL);

        const char *topo_cpus[] = {"PINRT_TOPOLOGY", "0:0;1:1", "PINRT_CPUS", "1", NULL};
        run("exit7", topo_cpus, &r);
        CHECK(r.status == 7 && count_lines(r.err) == 1 && strstr(r.err, "domain 0 has no CPU inside PINRT_CPUS"));

        const char *group[] = {"PINRT_GROUP", "2", "PINRT_TRACE_FORMAT", "json", NULL};
        run("threads", group, &r);
        CHECK(r.status == 0);
        CHECK(r.trace && strstr(r.trace, "\"cpus\":\"0-1\"") && strstr(r.trace, "{\"epoch\":"));
    }

    /* Other speed sources: schedstat; instructions falls back to CPU time
     * (with one line saying so) where there is no hardware counter. */
    const char *ss[] = {"PINRT_SPEED", "schedstat", NULL};
    run("threads", ss, &r);
    CHECK(r.status == 0 && strstr(r.summary, "speed_source=schedstat") && field(r.summary, "epochs=") >= 10);
    const char *ins[] = {"PINRT_SPEED", "instructions", NULL};
    run("threads", ins, &r);
    CHECK(r.status == 0 && strstr(r.summary, "state=full"));
    CHECK(strstr(r.summary, "speed_source=instructions") ||
          (strstr(r.summary, "speed_source=cputime") && count_lines(r.err) == 1 && strstr(r.err, "using CPU time")));

    /* A thread made without pthread_create is found and pinned too (not
     * under the sanitizers, which cannot follow a raw clone). */
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
    run("clone", NULL, &r);
    CHECK(r.status == 0);
    {
        long raw = field(r.out, "raw_tid=");
        char needle[64];
        snprintf(needle, sizeof needle, ",%ld,", raw);
        int rows = 0, pinned = 0;
        for (char *l = r.trace ? strstr(r.trace, needle) : NULL; l; l = strstr(l + 1, needle)) {
            rows++;
            char *ln = l;
            while (ln > r.trace && ln[-1] != '\n')
                ln--;
            int ep, tid, dom;
            double t;
            if (sscanf(ln, "%d,%lf,%d,%d,", &ep, &t, &tid, &dom) == 4 && tid == raw && dom >= 0)
                pinned++;
        }
        printf("clone: raw thread %ld in %d trace rows, %d pinned\n", raw, rows, pinned);
        CHECK(raw > 0 && rows > 0 && pinned > 0);
    }
#endif

    /* A thread that sets its own affinity is left alone. */
    if (ncpus_allowed() >= 2) {
        const char *sp[] = {"PINRT_LAMBDA", "0.5", "PINRT_LOG", "info", NULL};
        run("selfpin", sp, &r);
        printf("selfpin: %s", r.out);
        CHECK(r.status == 0 && strstr(r.out, "selfpin ok=1"));
    }

    /* Stack binding with zeta = 0 on node 0 (all this machine has). */
    const char *zeta[] = {"PINRT_ZETA", "0", NULL};
    run("zeta", zeta, &r);
    printf("zeta: %s", r.out);
    CHECK(r.status == 0);
    CHECK(r.err[0] == '\0');

    free(r.trace);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        printf("cannot remove %s\n", tmpdir);
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
