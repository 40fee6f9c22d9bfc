/* The manager's list of threads, reconciled every epoch with
 * /proc/self/task (or the registry when /proc is unreadable). */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt.h"

static int cmp_pid(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

static int cmp_trk(const void *a, const void *b) { return cmp_pid(&((const struct tracked *)a)->tid, &((const struct tracked *)b)->tid); }

static void drop_tracked(struct tracked *t)
{
    if (t->slot >= 0)
        pl_remove_thread(rt.L, t->slot);
    if (t->perf_fd >= 0)
        close(t->perf_fd);
    t->tid = 0;
}

int rt_reconcile(void)
{
    int n = 0, cap = rt.cfg.max_threads * 2;
    pid_t self = (pid_t)atomic_load(&rt.mgr_tid);
    DIR *d = opendir("/proc/self/task");
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) && n < cap) {
            if (e->d_name[0] < '0' || e->d_name[0] > '9')
                continue;
            pid_t tid = (pid_t)atoi(e->d_name);
            /* The main thread is left alone unless asked: its mask is what
             * exec'd and posix_spawn'd children inherit. */
            if (tid != self && (rt.cfg.pin_main || tid != rt.pid))
                rt.tids[n++] = tid;
        }
        closedir(d);
    } else {
        rt_fail_once(F_PROC, "cannot read /proc/self/task (%s); only threads from pthread_create are followed",
                  strerror(errno));
        pthread_mutex_lock(&rt.reg_lock);
        for (int i = 0; i < rt.reg_cap && n < cap; i++)
            if (rt.reg[i].tid && rt.reg[i].tid != self && (rt.cfg.pin_main || rt.reg[i].tid != rt.pid))
                rt.tids[n++] = rt.reg[i].tid;
        pthread_mutex_unlock(&rt.reg_lock);
    }
    qsort(rt.tids, (size_t)n, sizeof(pid_t), cmp_pid);

    /* Merge the sorted lists: drop the dead, add the new. */
    int i = 0, j = 0, keep = 0, nold = rt.ntrk;
    while (i < nold || j < n) {
        if (j >= n || (i < nold && rt.trk[i].tid < rt.tids[j])) {
            drop_tracked(&rt.trk[i++]);
        } else if (i >= nold || rt.tids[j] < rt.trk[i].tid) {
            j++; /* new: added after the merge */
        } else {
            rt.trk[keep++] = rt.trk[i++];
            j++;
        }
    }
    rt.ntrk = keep;
    /* Second pass to add new tids (the list is small and sorted). */
    int k = 0;
    for (j = 0; j < n; j++) {
        while (k < keep && rt.trk[k].tid < rt.tids[j])
            k++;
        if (k < keep && rt.trk[k].tid == rt.tids[j])
            continue;
        if (rt.ntrk >= rt.cfg.max_threads) {
            rt_fail_once(F_THREADS, "more than %d threads; the others are not pinned (PINRT_MAX_THREADS)",
                      rt.cfg.max_threads);
            break;
        }
        struct tracked *t = &rt.trk[rt.ntrk];
        memset(t, 0, sizeof *t);
        t->tid = rt.tids[j];
        t->perf_fd = -1;
        t->bound_domain = -1;
        t->fresh = 1;
        t->slot = pl_add_thread(rt.L);
        if (t->slot < 0) {
            rt_fail_once(F_THREADS, "learner full; extra threads are not pinned");
            continue;
        }
        if (rt.speed_src == PR_SPEED_INSTRUCTIONS) {
            t->perf_fd = rt_perf_open(t->tid);
            if (t->perf_fd < 0) {
                rt_fail_once(F_PERF, "perf_event_open for thread %d failed (%s)", (int)t->tid, strerror(errno));
                pl_remove_thread(rt.L, t->slot);
                continue;
            }
        }
        int64_t s = rt_sample(t);
        if (s < 0) { /* already gone */
            drop_tracked(t);
            continue;
        }
        t->last = (uint64_t)s;
        rt_reg_stack(t->tid, &t->lo, &t->hi);
        rt.threads_seen++;
        rt.ntrk++;
    }
    qsort(rt.trk, (size_t)rt.ntrk, sizeof *rt.trk, cmp_trk);
    return 0;
}
