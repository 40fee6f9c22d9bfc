/* The pinning runtime's internals (libpinrt.so): the one runtime context
 * and the functions the rt_*.c files share. Nothing here is exported from
 * the library (it is built with -fvisibility=hidden); only pthread_create is.
 *
 *   rt_context.c     the context `rt`, logging, failure reporting, degrading
 *   rt_interposer.c  pthread_create interposition (discovery of threads)
 *   rt_registry.c    the registry the program's threads write (tid, stack)
 *   rt_topology.c    domains and units from sysfs or PINRT_TOPOLOGY
 *   rt_tracking.c    the manager's list of threads, reconciled with /proc/self/task
 *   rt_sampling.c    per-thread work counters and speeds
 *   rt_actions.c     sched_setaffinity / mbind, and leaving self-pinned threads alone
 *   rt_trace.c       trace file and exit summary
 *   rt_manager.c     the manager thread, its epoch, fork handling
 *   rt_init.c        constructor / destructor
 * The learner (learner.c) knows nothing of threads or syscalls. */
#ifndef PINRT_RT_H
#define PINRT_RT_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

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

struct rt_ctx {
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
    cm_cpuset allowed;
    cpu_set_t start_mask;     /* the process's mask at start, for fork children */
    int ndomains, nunits;
    cm_cpuset dom_cpus[PR_MAX_DOMAINS];
    int dom_node[PR_MAX_DOMAINS];
    cm_cpuset *unit_cpus;
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
};

/* The one runtime context (rt_context.c). */
extern struct rt_ctx rt;

/* rt_context.c */
void rt_logmsg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rt_fail_once(unsigned flag, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rt_degrade(int to, const char *why);
uint64_t rt_now_ns(clockid_t c);
/* rt_interposer.c */
create_fn rt_real_create(void);
/* rt_registry.c */
void rt_reg_add(pid_t tid, uintptr_t lo, uintptr_t hi);
void rt_reg_del(pid_t tid);
int rt_reg_stack(pid_t tid, uintptr_t *lo, uintptr_t *hi);
void rt_self_stack(uintptr_t *lo, uintptr_t *hi);
/* rt_topology.c */
int rt_read_file(const char *path, char *buf, size_t len);
void rt_to_cpuset(const cm_cpuset *s, cpu_set_t *cs);
int rt_build_topology(void);
/* rt_sampling.c */
int rt_perf_open(pid_t tid);
const char *rt_speed_name(int s);
int64_t rt_sample(struct tracked *t);
void rt_measure(double dt);
/* rt_tracking.c */
int rt_reconcile(void);
/* rt_actions.c */
const cm_cpuset *rt_target_cpus(pl_assign a);
void rt_apply(void);
void rt_bind_memory(void);
/* rt_trace.c */
void rt_open_trace(void);
void rt_trace_epoch(double tsec);
void rt_summary(void);
/* rt_manager.c */
void rt_start_manager(void);
void rt_stop_manager(void);
void rt_at_prepare(void);
void rt_at_parent(void);
void rt_at_child(void);

#endif
