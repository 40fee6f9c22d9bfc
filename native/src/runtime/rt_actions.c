/* What the runtime does to threads: sched_setaffinity to the learner's
 * placement (leaving threads that pin themselves alone) and mbind of stacks. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/mempolicy.h>

#include "rt.h"

const cm_cpuset *rt_target_cpus(pl_assign a)
{
    return a.unit >= 0 ? &rt.unit_cpus[a.unit] : &rt.dom_cpus[a.domain];
}

static void unpin_all(void)
{
    cpu_set_t cs = rt.start_mask;
    for (int i = 0; i < rt.ntrk; i++)
        if (rt.trk[i].applied)
            sched_setaffinity(rt.trk[i].tid, sizeof cs, &cs);
}

static const cpu_set_t *target_cs(int domain, int unit) { return unit >= 0 ? &rt.unit_cs[unit] : &rt.dom_cs[domain]; }

/* Could the runtime have set this mask (or is it the start mask)? */
static int ours(const cpu_set_t *cs)
{
    if (CPU_EQUAL(cs, &rt.start_mask))
        return 1;
    for (int u = 0; u < rt.nunits; u++)
        if (CPU_EQUAL(cs, &rt.unit_cs[u]))
            return 1;
    for (int d = 0; d < rt.ndomains; d++)
        if (CPU_EQUAL(cs, &rt.dom_cs[d]))
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
    rt_logmsg(PR_LOG_INFO, "thread %d sets its own affinity; left alone", (int)t->tid);
    pl_remove_thread(rt.L, t->slot);
    t->slot = -1;
    return 1;
}

void rt_apply(void)
{
    for (int i = 0; i < rt.ntrk && atomic_load(&rt.level) == LV_FULL; i++) {
        struct tracked *t = &rt.trk[i];
        if (t->slot < 0)
            continue;
        pl_assign a = pl_current(rt.L, t->slot);
        if (t->applied && a.domain == t->ap_domain && a.unit == t->ap_unit)
            continue;
        if (foreign(t))
            continue;
        cpu_set_t cs = *target_cs(a.domain, a.unit);
        if (sched_setaffinity(t->tid, sizeof cs, &cs) == 0) {
            if (t->applied)
                rt.moves++;
            t->applied = 1;
            t->ap_domain = a.domain;
            t->ap_unit = a.unit;
        } else if (errno != ESRCH) {
            char why[160];
            snprintf(why, sizeof why, "sched_setaffinity(%d) failed: %s", (int)t->tid, strerror(errno));
            rt_degrade(LV_MEASURE, why);
            unpin_all();
        }
    }
}

/* Binds the stacks of threads sitting on a domain that holds more than a
 * fraction zeta of the threads; the mask is 1UL << node, never a node number. */
void rt_bind_memory(void)
{
    if (!rt.cfg.mem_on || !rt.mem_ok || atomic_load(&rt.level) != LV_FULL || rt.ntrk == 0)
        return;
    int cnt[PR_MAX_DOMAINS] = {0};
    for (int i = 0; i < rt.ntrk; i++)
        if (rt.trk[i].slot >= 0 && rt.trk[i].applied)
            cnt[rt.trk[i].ap_domain]++;
    long page = sysconf(_SC_PAGESIZE);
    for (int i = 0; i < rt.ntrk; i++) {
        struct tracked *t = &rt.trk[i];
        if (t->slot < 0 || !t->applied)
            continue;
        if (t->hi <= t->lo) /* seen in /proc before it registered */
            rt_reg_stack(t->tid, &t->lo, &t->hi);
        if (t->hi <= t->lo)
            continue;
        int d = t->ap_domain;
        if (t->bound_domain == d || cnt[d] <= rt.cfg.zeta * rt.ntrk)
            continue;
        uintptr_t lo = (t->lo + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
        if (t->hi <= lo)
            continue;
        unsigned long mask = 1UL << rt.dom_node[d];
        /* mem_policy is a kernel mode (common/mempolicy.h) */
        long rc = syscall(SYS_mbind, (void *)lo, (unsigned long)(t->hi - lo), rt.cfg.mem_policy, &mask,
                          (unsigned long)(8 * sizeof mask), (unsigned)MPOL_MF_MOVE);
        if (rc == 0) {
            t->bound_domain = d;
        } else if (errno == EFAULT || errno == ENOMEM) {
            /* part of the range is not mapped (e.g. the main thread's stack,
             * reported up to its rlimit): skip this thread only */
            t->bound_domain = d;
            rt_logmsg(PR_LOG_DEBUG, "mbind of thread %d's stack: %s", (int)t->tid, strerror(errno));
        } else {
            rt_fail_once(F_MBIND, "mbind of thread %d's stack to node %d failed (%s); memory binding off",
                      (int)t->tid, rt.dom_node[d], strerror(errno));
            rt.mem_ok = 0;
            return;
        }
    }
}
