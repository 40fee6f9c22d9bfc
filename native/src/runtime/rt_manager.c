/* The manager thread: wakes every period, reconciles, measures, runs the
 * learner and applies its placement; fork handlers. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

static void epoch(void)
{
    uint64_t wall = rt_now_ns(CLOCK_MONOTONIC);
    double dt = (double)(wall - rt.last_wall) / 1e9;
    rt.last_wall = wall;
    rt_reconcile();
    rt_measure(dt);
    /* The trace reports each speed with the placement it was measured on. */
    for (int i = 0; i < rt.ntrk; i++) {
        struct tracked *t = &rt.trk[i];
        t->ms_valid = t->applied;
        t->ms_domain = t->ap_domain;
        t->ms_unit = t->ap_unit;
    }
    if (atomic_load(&rt.level) == LV_FULL) {
        pl_epoch(rt.L, rt.speed, rt.out);
        rt_apply();
        rt_bind_memory();
    }
    rt_trace_epoch((double)(wall - rt.t0) / 1e9);
    rt.epochs++;
}

static void *manager(void *arg)
{
    (void)arg;
    atomic_store(&rt.mgr_tid, (int)gettid());
    pthread_setname_np(pthread_self(), "pinrt-mgr");
    rt.last_wall = rt.t0 = rt_now_ns(CLOCK_MONOTONIC);
    rt_reconcile();
    if (atomic_load(&rt.level) == LV_FULL)
        rt_apply(); /* first assignment: round-robin */
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    uint64_t per = (uint64_t)(rt.cfg.period * 1e9);
    pthread_mutex_lock(&rt.mgr_lock);
    while (!rt.stop) {
        uint64_t ns = (uint64_t)next.tv_nsec + per % 1000000000ULL;
        next.tv_sec += (time_t)(per / 1000000000ULL + ns / 1000000000ULL);
        next.tv_nsec = (long)(ns % 1000000000ULL);
        while (!rt.stop) {
            int rc = pthread_cond_timedwait(&rt.mgr_cond, &rt.mgr_lock, &next);
            if (rc == ETIMEDOUT)
                break;
        }
        if (rt.stop)
            break;
        pthread_mutex_unlock(&rt.mgr_lock);
        if (atomic_load(&rt.level) != LV_OFF)
            epoch();
        pthread_mutex_lock(&rt.mgr_lock);
        /* After a long stall do not fire a burst of catch-up epochs. */
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > next.tv_sec + 1)
            next = now;
    }
    pthread_mutex_unlock(&rt.mgr_lock);
    rt.mgr_cpu = (double)rt_now_ns(CLOCK_THREAD_CPUTIME_ID) / 1e9;
    return NULL;
}

static int alloc_manager_state(void)
{
    pl_destroy(rt.L); /* after fork: the parent's learner is discarded */
    free(rt.trk);
    free(rt.tids);
    free(rt.speed);
    free(rt.out);
    int m = rt.cfg.max_threads;
    rt.L = pl_create(&rt.cfg.lp, rt.nunits, rt.unit_domain, m);
    rt.trk = calloc((size_t)m, sizeof *rt.trk);
    rt.tids = calloc((size_t)m * 2, sizeof *rt.tids);
    rt.speed = calloc((size_t)m, sizeof *rt.speed);
    rt.out = calloc((size_t)m, sizeof *rt.out);
    rt.ntrk = 0;
    rt.epochs = rt.moves = rt.threads_seen = 0;
    rt.mgr_cpu = 0;
    return rt.L && rt.trk && rt.tids && rt.speed && rt.out ? 0 : -1;
}

void rt_start_manager(void)
{
    rt_open_trace();
    if (alloc_manager_state()) {
        rt_fail_once(F_ALLOC, "out of memory; runtime off");
        atomic_store(&rt.level, LV_OFF);
        return;
    }
    rt.pid = getpid();
    rt.stop = 0;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&rt.mgr_cond, &ca);
    pthread_condattr_destroy(&ca);
    /* The manager starts with every signal blocked, so the program's signals
     * are never delivered to it. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, 256 * 1024);
    int rc = rt_real_create()(&rt.mgr, &a, manager, NULL);
    pthread_attr_destroy(&a);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        rt_fail_once(F_MANAGER, "cannot start the manager thread (%s); runtime off", strerror(rc));
        atomic_store(&rt.level, LV_OFF);
        return;
    }
    rt.mgr_started = 1;
}

void rt_stop_manager(void)
{
    if (!rt.mgr_started || rt.pid != getpid())
        return;
    pthread_mutex_lock(&rt.mgr_lock);
    rt.stop = 1;
    pthread_cond_signal(&rt.mgr_cond);
    pthread_mutex_unlock(&rt.mgr_lock);
    pthread_join(rt.mgr, NULL);
    rt.mgr_started = 0;
}

void rt_at_prepare(void) { pthread_mutex_lock(&rt.reg_lock); }
void rt_at_parent(void) { pthread_mutex_unlock(&rt.reg_lock); }

/* The child has no manager thread: forget it and start a fresh one at the
 * child's first pthread_create (a single-threaded child needs none). */
void rt_at_child(void)
{
    pthread_mutex_init(&rt.reg_lock, NULL);
    pthread_mutex_init(&rt.mgr_lock, NULL);
    if (!rt.mgr_started)
        return;
    rt.mgr_started = 0;
    /* The forking thread may be pinned: the child starts from the mask the
     * process was given, as it would without the runtime. */
    sched_setaffinity(0, sizeof rt.start_mask, &rt.start_mask);
    for (int i = 0; i < rt.reg_cap; i++)
        rt.reg[i].tid = 0;
    rt.trace_fd = -1; /* the parent's trace */
    rt.trace_done = 1;
    atomic_store(&rt.mgr_tid, 0);
    if (atomic_load(&rt.level) != LV_OFF)
        atomic_store(&rt.restart, 1);
}
