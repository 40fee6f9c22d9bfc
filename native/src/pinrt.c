/* libpinrt: the in-process pinning runtime, loaded with LD_PRELOAD.
 *
 * A manager thread wakes every period, reconciles the process's threads
 * (pthread_create interposition + /proc/self/task), measures each thread's
 * speed, runs the learner (learner.c) and re-pins threads with
 * sched_setaffinity. It never pins outside the affinity mask the process had
 * at start, and it never changes what the program computes: every failure is
 * logged once and the runtime degrades (full -> measure only -> off).
 *
 * All state lives in one context struct, G. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/mempolicy.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "learner.h"

#define PR_EXPORT __attribute__((visibility("default")))

enum { LV_OFF = 0, LV_MEASURE = 1, LV_FULL = 2 };

/* Failures reported once each. */
enum {
    F_AFFINITY = 1 << 0,
    F_PROC = 1 << 1,
    F_MBIND = 1 << 2,
    F_TRACE = 1 << 3,
    F_THREADS = 1 << 4,
    F_CLOCK = 1 << 5,
    F_MANAGER = 1 << 6,
    F_ALLOC = 1 << 7,
    F_PERF = 1 << 8,
};

/* A thread seen through pthread_create (gives its stack range). */
struct reg_entry {
    pid_t tid;
    uintptr_t lo, hi;
};

/* A thread followed by the manager. */
struct tracked {
    pid_t tid;
    int slot;            /* learner slot, -1 when untracked (full) */
    int fresh;           /* no speed interval yet */
    uint64_t last;       /* cpu ns or instructions at last sample */
    int perf_fd;
    int ap_domain, ap_unit, applied; /* what is pinned now */
    int ms_domain, ms_unit, ms_valid; /* what was pinned while measured */
    int bound_domain;    /* stack bound to this domain, -1 none */
    uintptr_t lo, hi;
    double speed;
};

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

static struct pinrt_ctx {
    _Atomic(create_fn) real_create;
    atomic_int level;         /* LV_* */
    atomic_int restart;       /* start a manager at the next pthread_create */
    pr_config cfg;
    pid_t pid;                /* process that owns the manager */

    /* registry written by the program's threads */
    pthread_mutex_t reg_lock;
    struct reg_entry *reg;
    int reg_cap;

    /* manager thread */
    pthread_mutex_t mgr_lock;
    pthread_cond_t mgr_cond;
    int stop;
    int mgr_started;
    pthread_t mgr;
    atomic_int mgr_tid;

    /* topology */
    pr_cpuset allowed;
    cpu_set_t start_mask;     /* the process's mask at start, for fork children */
    int ndomains, nunits;
    pr_cpuset dom_cpus[PR_MAX_DOMAINS];
    int dom_node[PR_MAX_DOMAINS];
    pr_cpuset *unit_cpus;
    int *unit_domain;
    cpu_set_t *unit_cs;       /* the same sets as cpu_set_t, for comparisons */
    cpu_set_t dom_cs[PR_MAX_DOMAINS];

    /* manager-private */
    pl_learner *L;
    struct tracked *trk;
    int ntrk;
    pid_t *tids;
    double *speed;
    pl_assign *out;
    int trace_fd;
    int trace_done;           /* the trace was opened (or refused) already */
    char *tbuf;
    size_t tcap;
    int speed_src;
    uint64_t last_wall;
    uint64_t t0;
    int mem_ok;

    /* statistics */
    long epochs, moves, threads_seen;
    double mgr_cpu;
    atomic_uint failed; /* F_* already reported */
} G = {
    .reg_lock = PTHREAD_MUTEX_INITIALIZER,
    .mgr_lock = PTHREAD_MUTEX_INITIALIZER,
    .trace_fd = -1,
};

static void logmsg(int level, const char *fmt, ...)
{
    if (G.cfg.log < level)
        return;
    char buf[512];
    int n = snprintf(buf, sizeof buf, "pinrt[%d]: ", (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = strlen(buf);
    buf[len++] = '\n';
    /* write(2), not stdio: the program's stderr buffering stays untouched. */
    ssize_t w = write(2, buf, len);
    (void)w;
}

static void fail_once(unsigned flag, const char *fmt, ...)
{
    unsigned old = atomic_fetch_or(&G.failed, flag);
    if (old & flag || G.cfg.log < PR_LOG_ERROR)
        return;
    char buf[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    logmsg(PR_LOG_ERROR, "%s", buf);
}

static void degrade(int to, const char *why)
{
    int cur = atomic_load(&G.level);
    if (to < cur) {
        atomic_store(&G.level, to);
        logmsg(PR_LOG_ERROR, "%s; runtime degraded to %s", why, to == LV_MEASURE ? "measuring only" : "off");
    }
}

static uint64_t now_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static create_fn real_create(void)
{
    create_fn f = atomic_load(&G.real_create);
    if (!f) {
        f = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
        atomic_store(&G.real_create, f);
    }
    return f;
}

/* ---- registry -------------------------------------------------------- */

static void reg_add(pid_t tid, uintptr_t lo, uintptr_t hi)
{
    pthread_mutex_lock(&G.reg_lock);
    int i, fr = -1;
    for (i = 0; i < G.reg_cap; i++) {
        if (G.reg[i].tid == tid || (fr < 0 && G.reg[i].tid == 0))
            fr = i;
        if (G.reg[i].tid == tid)
            break;
    }
    if (fr < 0) {
        int ncap = G.reg_cap ? 2 * G.reg_cap : 64;
        struct reg_entry *n = realloc(G.reg, (size_t)ncap * sizeof *n);
        if (n) {
            memset(n + G.reg_cap, 0, (size_t)(ncap - G.reg_cap) * sizeof *n);
            fr = G.reg_cap;
            G.reg = n;
            G.reg_cap = ncap;
        }
    }
    if (fr >= 0) {
        G.reg[fr].tid = tid;
        G.reg[fr].lo = lo;
        G.reg[fr].hi = hi;
    }
    pthread_mutex_unlock(&G.reg_lock);
}

static void reg_del(pid_t tid)
{
    pthread_mutex_lock(&G.reg_lock);
    for (int i = 0; i < G.reg_cap; i++)
        if (G.reg[i].tid == tid)
            G.reg[i].tid = 0;
    pthread_mutex_unlock(&G.reg_lock);
}

static int reg_stack(pid_t tid, uintptr_t *lo, uintptr_t *hi)
{
    int found = 0;
    pthread_mutex_lock(&G.reg_lock);
    for (int i = 0; i < G.reg_cap; i++) {
        if (G.reg[i].tid == tid) {
            *lo = G.reg[i].lo;
            *hi = G.reg[i].hi;
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&G.reg_lock);
    return found;
}

static void self_stack(uintptr_t *lo, uintptr_t *hi)
{
    pthread_attr_t a;
    void *addr = NULL;
    size_t size = 0;
    *lo = *hi = 0;
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
        if (pthread_attr_getstack(&a, &addr, &size) == 0) {
            *lo = (uintptr_t)addr;
            *hi = (uintptr_t)addr + size;
        }
        pthread_attr_destroy(&a);
    }
}

/* ---- pthread_create interposition ---------------------------------------- */

struct start {
    void *(*fn)(void *);
    void *arg;
};

static void thread_gone(void *p) { reg_del((pid_t)(intptr_t)p); }

static void *trampoline(void *p)
{
    struct start st = *(struct start *)p;
    free(p);
    pid_t tid = gettid();
    uintptr_t lo, hi;
    self_stack(&lo, &hi);
    reg_add(tid, lo, hi);
    void *ret;
    /* Runs on return, pthread_exit and cancellation alike. */
    pthread_cleanup_push(thread_gone, (void *)(intptr_t)tid);
    ret = st.fn(st.arg);
    pthread_cleanup_pop(1);
    return ret;
}

static void start_manager(void);

PR_EXPORT int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    create_fn real = real_create();
    if (!real)
        return EAGAIN;
    if (atomic_load(&G.level) == LV_OFF)
        return real(t, attr, fn, arg);
    /* The manager starts with the program's first thread: programs that never
     * create one (shells, numactl, taskset...) are left alone, and nothing a
     * wrapper sets before exec is disturbed. */
    if (atomic_load(&G.restart) && atomic_exchange(&G.restart, 0))
        start_manager();
    struct start *st = malloc(sizeof *st);
    if (!st)
        return real(t, attr, fn, arg);
    st->fn = fn;
    st->arg = arg;
    int rc = real(t, attr, trampoline, st);
    if (rc)
        free(st);
    return rc;
}

/* ---- topology ------------------------------------------------------------- */

static void to_cpuset(const pr_cpuset *s, cpu_set_t *cs);

static int read_file(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *nl = strchr(buf, '\n');
    if (nl)
        *nl = '\0';
    return 0;
}

/* node of each CPU from sysfs; -1 when unknown */
static int cpu_node(int cpu)
{
    char path[128], buf[4096];
    for (int n = 0; n < PR_MAX_DOMAINS; n++) {
        snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", n);
        pr_cpuset s;
        if (read_file(path, buf, sizeof buf) == 0 && pr_parse_cpulist(buf, &s) == 0 && pr_set_has(&s, cpu))
            return n;
    }
    return -1;
}

static int build_topology(void)
{
    G.ndomains = 0;
    if (G.cfg.has_topology) {
        for (int d = 0; d < G.cfg.ndomains; d++) {
            G.dom_cpus[d] = G.cfg.dom_cpus[d];
            for (int i = 0; i < PR_MAX_CPUS / 64; i++) /* inside PINRT_CPUS too */
                G.dom_cpus[d].w[i] &= G.allowed.w[i];
            if (pr_set_count(&G.dom_cpus[d]) == 0) {
                logmsg(PR_LOG_ERROR, "PINRT_TOPOLOGY: domain %d has no CPU inside PINRT_CPUS; runtime disabled", d);
                return -2;
            }
            int first = -1;
            for (int c = 0; c < PR_MAX_CPUS && first < 0; c++)
                if (pr_set_has(&G.dom_cpus[d], c))
                    first = c;
            int node = cpu_node(first);
            G.dom_node[d] = node < 0 ? 0 : node;
        }
        G.ndomains = G.cfg.ndomains;
    } else {
        char path[128], buf[4096];
        for (int n = 0; n < PR_MAX_DOMAINS; n++) {
            snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", n);
            pr_cpuset s, in;
            if (read_file(path, buf, sizeof buf) || pr_parse_cpulist(buf, &s))
                continue;
            pr_set_zero(&in);
            for (int c = 0; c < PR_MAX_CPUS; c++)
                if (pr_set_has(&s, c) && pr_set_has(&G.allowed, c))
                    pr_set_add(&in, c);
            if (pr_set_count(&in) == 0)
                continue;
            G.dom_cpus[G.ndomains] = in;
            G.dom_node[G.ndomains++] = n;
        }
        if (G.ndomains == 0) { /* no sysfs: one domain */
            G.dom_cpus[0] = G.allowed;
            G.dom_node[0] = 0;
            G.ndomains = 1;
        }
    }
    int total = 0;
    for (int d = 0; d < G.ndomains; d++)
        total += pr_set_count(&G.dom_cpus[d]);
    G.unit_cpus = calloc((size_t)total + 1, sizeof *G.unit_cpus);
    G.unit_domain = calloc((size_t)total + 1, sizeof(int));
    if (!G.unit_cpus || !G.unit_domain)
        return -1;
    G.nunits = 0;
    for (int d = 0; d < G.ndomains; d++) {
        int in_group = 0;
        for (int c = 0; c < PR_MAX_CPUS; c++) {
            if (!pr_set_has(&G.dom_cpus[d], c))
                continue;
            if (in_group == 0) {
                pr_set_zero(&G.unit_cpus[G.nunits]);
                G.unit_domain[G.nunits] = d;
                G.nunits++;
            }
            pr_set_add(&G.unit_cpus[G.nunits - 1], c);
            if (++in_group == G.cfg.group)
                in_group = 0;
        }
    }
    G.unit_cs = calloc((size_t)G.nunits, sizeof *G.unit_cs);
    if (!G.unit_cs)
        return -1;
    for (int u = 0; u < G.nunits; u++)
        to_cpuset(&G.unit_cpus[u], &G.unit_cs[u]);
    for (int d = 0; d < G.ndomains; d++)
        to_cpuset(&G.dom_cpus[d], &G.dom_cs[d]);
    return G.nunits > 0 ? 0 : -1;
}

/* ---- measurement ------------------------------------------------------------ */

/* The pthread_getcpuclockid clock, built from the tid (as glibc does) so that
 * threads not created through pthread_create are measured too. */
static clockid_t tid_clock(pid_t tid) { return (clockid_t)((~(unsigned)tid << 3) | 6); }

static int perf_open(pid_t tid)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_HARDWARE;
    a.config = PERF_COUNT_HW_INSTRUCTIONS;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    return (int)syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static const char *speed_name(int s)
{
    switch (s) {
    case PR_SPEED_INSTRUCTIONS:
        return "instructions";
    case PR_SPEED_SCHEDSTAT:
        return "schedstat";
    default:
        return "cputime";
    }
}

/* Cumulative work of a thread: instructions or CPU ns. -1 if it is gone. */
static int64_t sample(struct tracked *t)
{
    if (G.speed_src == PR_SPEED_INSTRUCTIONS && t->perf_fd >= 0) {
        uint64_t v;
        if (read(t->perf_fd, &v, sizeof v) == (ssize_t)sizeof v)
            return (int64_t)v;
        return -1;
    }
    if (G.speed_src == PR_SPEED_SCHEDSTAT) {
        char path[64], buf[128];
        snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", (int)t->tid);
        if (read_file(path, buf, sizeof buf))
            return -1;
        return strtoll(buf, NULL, 10);
    }
    struct timespec ts;
    if (clock_gettime(tid_clock(t->tid), &ts))
        return -1;
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- reconciliation ------------------------------------------------------------ */

static int cmp_pid(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

static int cmp_trk(const void *a, const void *b) { return cmp_pid(&((const struct tracked *)a)->tid, &((const struct tracked *)b)->tid); }

static void drop_tracked(struct tracked *t)
{
    if (t->slot >= 0)
        pl_remove_thread(G.L, t->slot);
    if (t->perf_fd >= 0)
        close(t->perf_fd);
    t->tid = 0;
}

static int reconcile(void)
{
    int n = 0, cap = G.cfg.max_threads * 2;
    pid_t self = (pid_t)atomic_load(&G.mgr_tid);
    DIR *d = opendir("/proc/self/task");
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) && n < cap) {
            if (e->d_name[0] < '0' || e->d_name[0] > '9')
                continue;
            pid_t tid = (pid_t)atoi(e->d_name);
            /* The main thread is left alone unless asked: its mask is what
             * exec'd and posix_spawn'd children inherit. */
            if (tid != self && (G.cfg.pin_main || tid != G.pid))
                G.tids[n++] = tid;
        }
        closedir(d);
    } else {
        fail_once(F_PROC, "cannot read /proc/self/task (%s); only threads from pthread_create are followed",
                  strerror(errno));
        pthread_mutex_lock(&G.reg_lock);
        for (int i = 0; i < G.reg_cap && n < cap; i++)
            if (G.reg[i].tid && G.reg[i].tid != self && (G.cfg.pin_main || G.reg[i].tid != G.pid))
                G.tids[n++] = G.reg[i].tid;
        pthread_mutex_unlock(&G.reg_lock);
    }
    qsort(G.tids, (size_t)n, sizeof(pid_t), cmp_pid);

    /* Merge the sorted lists: drop the dead, add the new. */
    int i = 0, j = 0, keep = 0, nold = G.ntrk;
    while (i < nold || j < n) {
        if (j >= n || (i < nold && G.trk[i].tid < G.tids[j])) {
            drop_tracked(&G.trk[i++]);
        } else if (i >= nold || G.tids[j] < G.trk[i].tid) {
            j++; /* new: added after the merge */
        } else {
            G.trk[keep++] = G.trk[i++];
            j++;
        }
    }
    G.ntrk = keep;
    /* Second pass to add new tids (the list is small and sorted). */
    int k = 0;
    for (j = 0; j < n; j++) {
        while (k < keep && G.trk[k].tid < G.tids[j])
            k++;
        if (k < keep && G.trk[k].tid == G.tids[j])
            continue;
        if (G.ntrk >= G.cfg.max_threads) {
            fail_once(F_THREADS, "more than %d threads; the others are not pinned (PINRT_MAX_THREADS)",
                      G.cfg.max_threads);
            break;
        }
        struct tracked *t = &G.trk[G.ntrk];
        memset(t, 0, sizeof *t);
        t->tid = G.tids[j];
        t->perf_fd = -1;
        t->bound_domain = -1;
        t->fresh = 1;
        t->slot = pl_add_thread(G.L);
        if (t->slot < 0) {
            fail_once(F_THREADS, "learner full; extra threads are not pinned");
            continue;
        }
        if (G.speed_src == PR_SPEED_INSTRUCTIONS) {
            t->perf_fd = perf_open(t->tid);
            if (t->perf_fd < 0) {
                fail_once(F_PERF, "perf_event_open for thread %d failed (%s)", (int)t->tid, strerror(errno));
                pl_remove_thread(G.L, t->slot);
                continue;
            }
        }
        int64_t s = sample(t);
        if (s < 0) { /* already gone */
            drop_tracked(t);
            continue;
        }
        t->last = (uint64_t)s;
        reg_stack(t->tid, &t->lo, &t->hi);
        G.threads_seen++;
        G.ntrk++;
    }
    qsort(G.trk, (size_t)G.ntrk, sizeof *G.trk, cmp_trk);
    return 0;
}

/* ---- pinning ---------------------------------------------------------- */

static void to_cpuset(const pr_cpuset *s, cpu_set_t *cs)
{
    CPU_ZERO(cs);
    for (int c = 0; c < PR_MAX_CPUS && c < CPU_SETSIZE; c++)
        if (pr_set_has(s, c))
            CPU_SET(c, cs);
}

static const pr_cpuset *target_cpus(pl_assign a)
{
    return a.unit >= 0 ? &G.unit_cpus[a.unit] : &G.dom_cpus[a.domain];
}

static void unpin_all(void)
{
    cpu_set_t cs = G.start_mask;
    for (int i = 0; i < G.ntrk; i++)
        if (G.trk[i].applied)
            sched_setaffinity(G.trk[i].tid, sizeof cs, &cs);
}

static const cpu_set_t *target_cs(int domain, int unit) { return unit >= 0 ? &G.unit_cs[unit] : &G.dom_cs[domain]; }

/* Could the runtime have set this mask (or is it the start mask)? */
static int ours(const cpu_set_t *cs)
{
    if (CPU_EQUAL(cs, &G.start_mask))
        return 1;
    for (int u = 0; u < G.nunits; u++)
        if (CPU_EQUAL(cs, &G.unit_cs[u]))
            return 1;
    for (int d = 0; d < G.ndomains; d++)
        if (CPU_EQUAL(cs, &G.dom_cs[d]))
            return 1;
    return 0;
}

/* A thread whose mask is not what the runtime left there pins itself: the
 * program's choice wins, the thread leaves the learner. */
static int foreign(struct tracked *t)
{
    cpu_set_t cur;
    if (sched_getaffinity(t->tid, sizeof cur, &cur))
        return 0;
    if (t->applied ? CPU_EQUAL(&cur, target_cs(t->ap_domain, t->ap_unit)) : ours(&cur))
        return 0;
    logmsg(PR_LOG_INFO, "thread %d sets its own affinity; left alone", (int)t->tid);
    pl_remove_thread(G.L, t->slot);
    t->slot = -1;
    return 1;
}

static void apply(void)
{
    for (int i = 0; i < G.ntrk && atomic_load(&G.level) == LV_FULL; i++) {
        struct tracked *t = &G.trk[i];
        if (t->slot < 0)
            continue;
        pl_assign a = pl_current(G.L, t->slot);
        if (t->applied && a.domain == t->ap_domain && a.unit == t->ap_unit)
            continue;
        if (foreign(t))
            continue;
        cpu_set_t cs = *target_cs(a.domain, a.unit);
        if (sched_setaffinity(t->tid, sizeof cs, &cs) == 0) {
            if (t->applied)
                G.moves++;
            t->applied = 1;
            t->ap_domain = a.domain;
            t->ap_unit = a.unit;
        } else if (errno != ESRCH) {
            char why[160];
            snprintf(why, sizeof why, "sched_setaffinity(%d) failed: %s", (int)t->tid, strerror(errno));
            degrade(LV_MEASURE, why);
            unpin_all();
        }
    }
}

/* Binds the stacks of threads sitting on a domain that holds more than a
 * fraction zeta of the threads; the mask is 1UL << node, never a node number. */
static void bind_memory(void)
{
    if (!G.cfg.mem_on || !G.mem_ok || atomic_load(&G.level) != LV_FULL || G.ntrk == 0)
        return;
    int cnt[PR_MAX_DOMAINS] = {0};
    for (int i = 0; i < G.ntrk; i++)
        if (G.trk[i].slot >= 0 && G.trk[i].applied)
            cnt[G.trk[i].ap_domain]++;
    long page = sysconf(_SC_PAGESIZE);
    for (int i = 0; i < G.ntrk; i++) {
        struct tracked *t = &G.trk[i];
        if (t->slot < 0 || !t->applied)
            continue;
        if (t->hi <= t->lo) /* seen in /proc before it registered */
            reg_stack(t->tid, &t->lo, &t->hi);
        if (t->hi <= t->lo)
            continue;
        int d = t->ap_domain;
        if (t->bound_domain == d || cnt[d] <= G.cfg.zeta * G.ntrk)
            continue;
        uintptr_t lo = (t->lo + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
        if (t->hi <= lo)
            continue;
        unsigned long mask = 1UL << G.dom_node[d];
        int mode = G.cfg.mem_policy == PR_MEM_BIND ? MPOL_BIND : MPOL_PREFERRED;
        long rc = syscall(SYS_mbind, (void *)lo, (unsigned long)(t->hi - lo), mode, &mask,
                          (unsigned long)(8 * sizeof mask), (unsigned)MPOL_MF_MOVE);
        if (rc == 0) {
            t->bound_domain = d;
        } else if (errno == EFAULT || errno == ENOMEM) {
            /* part of the range is not mapped (e.g. the main thread's stack,
             * reported up to its rlimit): skip this thread only */
            t->bound_domain = d;
            logmsg(PR_LOG_DEBUG, "mbind of thread %d's stack: %s", (int)t->tid, strerror(errno));
        } else {
            fail_once(F_MBIND, "mbind of thread %d's stack to node %d failed (%s); memory binding off",
                      (int)t->tid, G.dom_node[d], strerror(errno));
            G.mem_ok = 0;
            return;
        }
    }
}

/* ---- trace ----------------------------------------------------------------- */

static void trace_epoch(double tsec)
{
    if (G.trace_fd < 0)
        return;
    size_t off = 0;
    double f = G.L ? pl_last_objective(G.L) : 0;
    for (int i = 0; i < G.ntrk; i++) {
        struct tracked *t = &G.trk[i];
        if (t->slot < 0)
            continue;
        if (G.tcap - off < 512) {
            size_t ncap = G.tcap * 2 + 4096;
            char *nb = realloc(G.tbuf, ncap);
            if (!nb)
                break;
            G.tbuf = nb;
            G.tcap = ncap;
        }
        pl_assign a = {t->ms_domain, t->ms_unit};
        char cpus[256];
        if (t->ms_valid)
            pr_format_cpulist(target_cpus(a), cpus, sizeof cpus);
        else
            pr_format_cpulist(&G.allowed, cpus, sizeof cpus), a.domain = -1;
        double u = pl_last_utility(G.L, t->slot);
        int n;
        if (G.cfg.trace_fmt == PR_TRACE_JSON)
            n = snprintf(G.tbuf + off, G.tcap - off,
                         "{\"epoch\":%ld,\"time\":%.4f,\"tid\":%d,\"domain\":%d,\"cpus\":\"%s\",\"speed\":%.6g,"
                         "\"utility\":%.6g,\"objective\":%.6g}\n",
                         G.epochs, tsec, (int)t->tid, a.domain, cpus, t->speed, u, f);
        else
            n = snprintf(G.tbuf + off, G.tcap - off, "%ld,%.4f,%d,%d,%s,%.6g,%.6g,%.6g\n", G.epochs, tsec,
                         (int)t->tid, a.domain, cpus, t->speed, u, f);
        if (n > 0 && (size_t)n < G.tcap - off)
            off += (size_t)n;
    }
    /* One write per epoch, no stdio: a fork() child has nothing to re-flush. */
    if (off && write(G.trace_fd, G.tbuf, off) < 0) {
        fail_once(F_TRACE, "trace write failed (%s); trace off", strerror(errno));
        close(G.trace_fd);
        G.trace_fd = -1;
    }
}

/* ---- manager -------------------------------------------------------------- */

static void epoch(void)
{
    uint64_t wall = now_ns(CLOCK_MONOTONIC);
    double dt = (double)(wall - G.last_wall) / 1e9;
    G.last_wall = wall;
    reconcile();
    for (int i = 0; i < G.ntrk; i++) {
        struct tracked *t = &G.trk[i];
        if (t->slot < 0)
            continue;
        int64_t s = sample(t);
        if (s < 0) {
            t->speed = 0; /* gone: dropped at the next reconciliation */
            continue;
        }
        if (!t->fresh && dt > 0) {
            t->speed = (double)((uint64_t)s - t->last) / dt;
            if (G.speed_src != PR_SPEED_INSTRUCTIONS)
                t->speed /= 1e9; /* CPU seconds per wall second */
        }
        t->last = (uint64_t)s;
    }
    /* A thread seen for the first time has no interval yet: it sits this
     * epoch out (negative speed) rather than distort the objective. */
    for (int i = 0; i < G.ntrk; i++) {
        struct tracked *t = &G.trk[i];
        if (t->slot < 0)
            continue;
        if (t->fresh) {
            t->speed = 0;
            t->fresh = 0;
            G.speed[t->slot] = -1;
        } else {
            G.speed[t->slot] = t->speed;
        }
    }
    /* The trace reports each speed with the placement it was measured on. */
    for (int i = 0; i < G.ntrk; i++) {
        struct tracked *t = &G.trk[i];
        t->ms_valid = t->applied;
        t->ms_domain = t->ap_domain;
        t->ms_unit = t->ap_unit;
    }
    if (atomic_load(&G.level) == LV_FULL) {
        pl_epoch(G.L, G.speed, G.out);
        apply();
        bind_memory();
    }
    trace_epoch((double)(wall - G.t0) / 1e9);
    G.epochs++;
}

static void *manager(void *arg)
{
    (void)arg;
    atomic_store(&G.mgr_tid, (int)gettid());
    pthread_setname_np(pthread_self(), "pinrt-mgr");
    G.last_wall = G.t0 = now_ns(CLOCK_MONOTONIC);
    reconcile();
    if (atomic_load(&G.level) == LV_FULL)
        apply(); /* first assignment: round-robin */
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    uint64_t per = (uint64_t)(G.cfg.period * 1e9);
    pthread_mutex_lock(&G.mgr_lock);
    while (!G.stop) {
        uint64_t ns = (uint64_t)next.tv_nsec + per % 1000000000ULL;
        next.tv_sec += (time_t)(per / 1000000000ULL + ns / 1000000000ULL);
        next.tv_nsec = (long)(ns % 1000000000ULL);
        while (!G.stop) {
            int rc = pthread_cond_timedwait(&G.mgr_cond, &G.mgr_lock, &next);
            if (rc == ETIMEDOUT)
                break;
        }
        if (G.stop)
            break;
        pthread_mutex_unlock(&G.mgr_lock);
        if (atomic_load(&G.level) != LV_OFF)
            epoch();
        pthread_mutex_lock(&G.mgr_lock);
        /* After a long stall do not fire a burst of catch-up epochs. */
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > next.tv_sec + 1)
            next = now;
    }
    pthread_mutex_unlock(&G.mgr_lock);
    G.mgr_cpu = (double)now_ns(CLOCK_THREAD_CPUTIME_ID) / 1e9;
    return NULL;
}

static int alloc_manager_state(void)
{
    pl_destroy(G.L); /* after fork: the parent's learner is discarded */
    free(G.trk);
    free(G.tids);
    free(G.speed);
    free(G.out);
    int m = G.cfg.max_threads;
    G.L = pl_create(&G.cfg.lp, G.nunits, G.unit_domain, m);
    G.trk = calloc((size_t)m, sizeof *G.trk);
    G.tids = calloc((size_t)m * 2, sizeof *G.tids);
    G.speed = calloc((size_t)m, sizeof *G.speed);
    G.out = calloc((size_t)m, sizeof *G.out);
    G.ntrk = 0;
    G.epochs = G.moves = G.threads_seen = 0;
    G.mgr_cpu = 0;
    return G.L && G.trk && G.tids && G.speed && G.out ? 0 : -1;
}

/* Opened by the first process that manages threads (not by a shell or a
 * wrapper on its way to exec, and not again by a fork child). */
static void open_trace(void)
{
    if (!G.cfg.trace[0] || G.trace_done)
        return;
    G.trace_done = 1;
    G.trace_fd = open(G.cfg.trace, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (G.trace_fd < 0) {
        fail_once(F_TRACE, "cannot open trace %s (%s); trace off", G.cfg.trace, strerror(errno));
    } else if (G.cfg.trace_fmt == PR_TRACE_CSV) {
        static const char hdr[] = "epoch,time_s,tid,domain,cpus,speed,utility,objective\n";
        if (write(G.trace_fd, hdr, sizeof hdr - 1) < 0)
            fail_once(F_TRACE, "trace write failed");
    }
}

static void start_manager(void)
{
    open_trace();
    if (alloc_manager_state()) {
        fail_once(F_ALLOC, "out of memory; runtime off");
        atomic_store(&G.level, LV_OFF);
        return;
    }
    G.pid = getpid();
    G.stop = 0;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&G.mgr_cond, &ca);
    pthread_condattr_destroy(&ca);
    /* The manager starts with every signal blocked, so the program's signals
     * are never delivered to it. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, 256 * 1024);
    int rc = real_create()(&G.mgr, &a, manager, NULL);
    pthread_attr_destroy(&a);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        fail_once(F_MANAGER, "cannot start the manager thread (%s); runtime off", strerror(rc));
        atomic_store(&G.level, LV_OFF);
        return;
    }
    G.mgr_started = 1;
}

static void stop_manager(void)
{
    if (!G.mgr_started || G.pid != getpid())
        return;
    pthread_mutex_lock(&G.mgr_lock);
    G.stop = 1;
    pthread_cond_signal(&G.mgr_cond);
    pthread_mutex_unlock(&G.mgr_lock);
    pthread_join(G.mgr, NULL);
    G.mgr_started = 0;
}

/* ---- fork ------------------------------------------------------------------- */

static void at_prepare(void) { pthread_mutex_lock(&G.reg_lock); }
static void at_parent(void) { pthread_mutex_unlock(&G.reg_lock); }

/* The child has no manager thread: forget it and start a fresh one at the
 * child's first pthread_create (a single-threaded child needs none). */
static void at_child(void)
{
    pthread_mutex_init(&G.reg_lock, NULL);
    pthread_mutex_init(&G.mgr_lock, NULL);
    if (!G.mgr_started)
        return;
    G.mgr_started = 0;
    /* The forking thread may be pinned: the child starts from the mask the
     * process was given, as it would without the runtime. */
    sched_setaffinity(0, sizeof G.start_mask, &G.start_mask);
    for (int i = 0; i < G.reg_cap; i++)
        G.reg[i].tid = 0;
    G.trace_fd = -1; /* the parent's trace */
    G.trace_done = 1;
    atomic_store(&G.mgr_tid, 0);
    if (atomic_load(&G.level) != LV_OFF)
        atomic_store(&G.restart, 1);
}

/* ---- init / fini ------------------------------------------------------------- */

static const char *env_get(const char *name, void *ctx)
{
    (void)ctx;
    return getenv(name);
}

static void summary(void)
{
    if (!strcmp(G.cfg.summary, "none"))
        return;
    double wall = (double)(now_ns(CLOCK_MONOTONIC) - G.t0) / 1e9;
    char line[512];
    int n = snprintf(line, sizeof line,
                     "pinrt: summary pid=%d epochs=%ld moves=%ld threads_seen=%ld manager_cpu_s=%.6f wall_s=%.3f "
                     "manager_cpu_pct=%.4f speed_source=%s state=%s\n",
                     (int)getpid(), G.epochs, G.moves, G.threads_seen, G.mgr_cpu, wall,
                     wall > 0 ? 100.0 * G.mgr_cpu / wall : 0.0, speed_name(G.speed_src),
                     atomic_load(&G.level) == LV_FULL ? "full" : atomic_load(&G.level) == LV_MEASURE ? "measure" : "off");
    if (n <= 0)
        return;
    if (!G.cfg.summary[0]) {
        ssize_t w = write(2, line, (size_t)n);
        (void)w;
        return;
    }
    int fd = open(G.cfg.summary, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
        ssize_t w = write(fd, line, (size_t)n);
        (void)w;
        close(fd);
    }
}

__attribute__((constructor)) static void pinrt_init(void)
{
    char err[400];
    real_create();
    if (pr_config_parse(&G.cfg, env_get, NULL, err, sizeof err)) {
        G.cfg.log = PR_LOG_ERROR;
        logmsg(PR_LOG_ERROR, "%s; runtime disabled", err);
        /* One report per process tree: children see the runtime disabled. */
        setenv("PINRT_ENABLE", "0", 1);
        atomic_store(&G.level, LV_OFF);
        return;
    }
    if (!G.cfg.enabled) {
        atomic_store(&G.level, LV_OFF);
        return;
    }
    cpu_set_t cs;
    if (sched_getaffinity(0, sizeof cs, &cs)) {
        logmsg(PR_LOG_ERROR, "sched_getaffinity failed (%s); runtime disabled", strerror(errno));
        atomic_store(&G.level, LV_OFF);
        return;
    }
    pr_set_zero(&G.allowed);
    for (int c = 0; c < CPU_SETSIZE && c < PR_MAX_CPUS; c++)
        if (CPU_ISSET(c, &cs))
            pr_set_add(&G.allowed, c);
    if (pr_config_check_cpus(&G.cfg, &G.allowed, err, sizeof err)) {
        logmsg(PR_LOG_ERROR, "%s; runtime disabled", err);
        setenv("PINRT_ENABLE", "0", 1);
        atomic_store(&G.level, LV_OFF);
        return;
    }
    if (G.cfg.has_cpus)
        G.allowed = G.cfg.cpus;
    int bt = build_topology();
    if (bt) {
        if (bt == -1)
            logmsg(PR_LOG_ERROR, "no usable CPU topology; runtime disabled");
        setenv("PINRT_ENABLE", "0", 1);
        atomic_store(&G.level, LV_OFF);
        return;
    }
    G.speed_src = G.cfg.speed == PR_SPEED_AUTO ? PR_SPEED_INSTRUCTIONS : G.cfg.speed;
    if (G.speed_src == PR_SPEED_INSTRUCTIONS) {
        int fd = perf_open(gettid());
        if (fd >= 0) {
            close(fd);
        } else {
            if (G.cfg.speed == PR_SPEED_INSTRUCTIONS)
                logmsg(PR_LOG_ERROR, "no hardware instruction counter (%s); using CPU time", strerror(errno));
            G.speed_src = PR_SPEED_CPUTIME;
        }
    }
    G.mem_ok = 1;
    uintptr_t lo, hi;
    self_stack(&lo, &hi);
    reg_add(gettid(), lo, hi);
    G.start_mask = cs;
    G.pid = getpid();
    pthread_atfork(at_prepare, at_parent, at_child);
    atomic_store(&G.level, LV_FULL);
    char al[256];
    pr_format_cpulist(&G.allowed, al, sizeof al);
    logmsg(PR_LOG_INFO, "active: cpus %s, %d domain(s), %d unit(s), period %gs, speed %s", al, G.ndomains, G.nunits,
           G.cfg.period, speed_name(G.speed_src));
    atomic_store(&G.restart, 1);
}

__attribute__((destructor)) static void pinrt_fini(void)
{
    if (!G.mgr_started || G.pid != getpid())
        return;
    stop_manager();
    summary();
    if (G.trace_fd >= 0) {
        close(G.trace_fd);
        G.trace_fd = -1;
    }
}
