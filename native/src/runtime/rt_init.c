/* libpinrt: the in-process pinning runtime, loaded with LD_PRELOAD.
 *
 *
 * A manager thread wakes every period, reconciles the process's threads
 * (pthread_create interposition + /proc/self/task), measures each thread's
 * speed, runs the learner (learner.c) and re-pins threads with
 * sched_setaffinity. It never pins outside the affinity mask the process had
 * at start, and it never changes what the program computes: every failure is
 * logged once and the runtime degrades (full -> measure only -> off).
 *
 * This file: the constructor (configuration, allowed CPUs, topology, speed
 * source) and the destructor (stop the manager, summary, close the trace). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt.h"

static const char *env_get(const char *name, void *ctx)
{
    (void)ctx;
    return getenv(name);
}

__attribute__((constructor)) static void pinrt_init(void)
{
    char err[400];
    rt_real_create();
    if (pr_config_parse(&rt.cfg, env_get, NULL, err, sizeof err)) {
        rt.cfg.log = PR_LOG_ERROR;
        rt_logmsg(PR_LOG_ERROR, "%s; runtime disabled", err);
        /* One report per process tree: children see the runtime disabled. */
        setenv("PINRT_ENABLE", "0", 1);
        atomic_store(&rt.level, LV_OFF);
        return;
    }
    if (!rt.cfg.enabled) {
        atomic_store(&rt.level, LV_OFF);
        return;
    }
    cpu_set_t cs;
    if (sched_getaffinity(0, sizeof cs, &cs)) {
        rt_logmsg(PR_LOG_ERROR, "sched_getaffinity failed (%s); runtime disabled", strerror(errno));
        atomic_store(&rt.level, LV_OFF);
        return;
    }
    cm_set_zero(&rt.allowed);
    for (int c = 0; c < CPU_SETSIZE && c < CM_MAX_CPUS; c++)
        if (CPU_ISSET(c, &cs))
            cm_set_add(&rt.allowed, c);
    if (pr_config_check_cpus(&rt.cfg, &rt.allowed, err, sizeof err)) {
        rt_logmsg(PR_LOG_ERROR, "%s; runtime disabled", err);
        setenv("PINRT_ENABLE", "0", 1);
        atomic_store(&rt.level, LV_OFF);
        return;
    }
    if (rt.cfg.has_cpus)
        rt.allowed = rt.cfg.cpus;
    int bt = rt_build_topology();
    if (bt) {
        if (bt == -1)
            rt_logmsg(PR_LOG_ERROR, "no usable CPU topology; runtime disabled");
        setenv("PINRT_ENABLE", "0", 1);
        atomic_store(&rt.level, LV_OFF);
        return;
    }
    rt.speed_src = rt.cfg.speed == PR_SPEED_AUTO ? PR_SPEED_INSTRUCTIONS : rt.cfg.speed;
    if (rt.speed_src == PR_SPEED_INSTRUCTIONS) {
        int fd = rt_perf_open(gettid());
        if (fd >= 0) {
            close(fd);
        } else {
            if (rt.cfg.speed == PR_SPEED_INSTRUCTIONS)
                rt_logmsg(PR_LOG_ERROR, "no hardware instruction counter (%s); using CPU time", strerror(errno));
            rt.speed_src = PR_SPEED_CPUTIME;
        }
    }
    rt.mem_ok = 1;
    uintptr_t lo, hi;
    rt_self_stack(&lo, &hi);
    rt_reg_add(gettid(), lo, hi);
    rt.start_mask = cs;
    rt.pid = getpid();
    pthread_atfork(rt_at_prepare, rt_at_parent, rt_at_child);
    atomic_store(&rt.level, LV_FULL);
    char al[256];
    cm_format_cpulist(&rt.allowed, al, sizeof al);
    rt_logmsg(PR_LOG_INFO, "active: cpus %s, %d domain(s), %d unit(s), period %gs, speed %s", al, rt.ndomains, rt.nunits,
           rt.cfg.period, rt_speed_name(rt.speed_src));
    atomic_store(&rt.restart, 1);
}

__attribute__((destructor)) static void pinrt_fini(void)
{
    if (!rt.mgr_started || rt.pid != getpid())
        return;
    rt_stop_manager();
    rt_summary();
    if (rt.trace_fd >= 0) {
        close(rt.trace_fd);
        rt.trace_fd = -1;
    }
}
