/* Speed of each thread: instructions (perf_event_open), CPU time from the
 * thread's CPU clock, or /proc/self/task/TID/schedstat. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/perf_event.h>

#include "rt.h"

/* The pthread_getcpuclockid clock, built from the tid (as glibc does) so that
 * threads not created through pthread_create are measured too. */
static clockid_t tid_clock(pid_t tid) { return (clockid_t)((~(unsigned)tid << 3) | 6); }

int rt_perf_open(pid_t tid)
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

const char *rt_speed_name(int s)
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
int64_t rt_sample(struct tracked *t)
{
    if (rt.speed_src == PR_SPEED_INSTRUCTIONS && t->perf_fd >= 0) {
        uint64_t v;
        if (read(t->perf_fd, &v, sizeof v) == (ssize_t)sizeof v)
            return (int64_t)v;
        return -1;
    }
    if (rt.speed_src == PR_SPEED_SCHEDSTAT) {
        char path[64], buf[128];
        snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", (int)t->tid);
        if (rt_read_file(path, buf, sizeof buf))
            return -1;
        return strtoll(buf, NULL, 10);
    }
    struct timespec ts;
    if (clock_gettime(tid_clock(t->tid), &ts))
        return -1;
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Each followed thread's speed over the last dt seconds, into rt.speed[slot]. */
void rt_measure(double dt)
{
    for (int i = 0; i < rt.ntrk; i++) {
        struct tracked *t = &rt.trk[i];
        if (t->slot < 0)
            continue;
        int64_t s = rt_sample(t);
        if (s < 0) {
            t->speed = 0; /* gone: dropped at the next reconciliation */
            continue;
        }
        if (!t->fresh && dt > 0) {
            t->speed = (double)((uint64_t)s - t->last) / dt;
            if (rt.speed_src != PR_SPEED_INSTRUCTIONS)
                t->speed /= 1e9; /* CPU seconds per wall second */
        }
        t->last = (uint64_t)s;
    }
    /* A thread seen for the first time has no interval yet: it sits this
     * epoch out (negative speed) rather than distort the objective. */
    for (int i = 0; i < rt.ntrk; i++) {
        struct tracked *t = &rt.trk[i];
        if (t->slot < 0)
            continue;
        if (t->fresh) {
            t->speed = 0;
            t->fresh = 0;
            rt.speed[t->slot] = -1;
        } else {
            rt.speed[t->slot] = t->speed;
        }
    }
}
