/* The trace file (CSV or JSON lines, one write per epoch) and the exit summary. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt.h"

/* Opened by the first process that manages threads (not by a shell or a
 * wrapper on its way to exec, and not again by a fork child). */
void rt_open_trace(void)
{
    if (!rt.cfg.trace[0] || rt.trace_done)
        return;
    rt.trace_done = 1;
    rt.trace_fd = open(rt.cfg.trace, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (rt.trace_fd < 0) {
        rt_fail_once(F_TRACE, "cannot open trace %s (%s); trace off", rt.cfg.trace, strerror(errno));
    } else if (rt.cfg.trace_fmt == PR_TRACE_CSV) {
        static const char hdr[] = "epoch,time_s,tid,domain,cpus,speed,utility,objective\n";
        if (write(rt.trace_fd, hdr, sizeof hdr - 1) < 0)
            rt_fail_once(F_TRACE, "trace write failed");
    }
}

void rt_trace_epoch(double tsec)
{
    if (rt.trace_fd < 0)
        return;
    size_t off = 0;
    double f = rt.L ? pl_last_objective(rt.L) : 0;
    for (int i = 0; i < rt.ntrk; i++) {
        struct tracked *t = &rt.trk[i];
        if (t->slot < 0)
            continue;
        if (rt.tcap - off < 512) {
            size_t ncap = rt.tcap * 2 + 4096;
            char *nb = realloc(rt.tbuf, ncap);
            if (!nb)
                break;
            rt.tbuf = nb;
            rt.tcap = ncap;
        }
        pl_assign a = {t->ms_domain, t->ms_unit};
        char cpus[256];
        if (t->ms_valid)
            cm_format_cpulist(rt_target_cpus(a), cpus, sizeof cpus);
        else
            cm_format_cpulist(&rt.allowed, cpus, sizeof cpus), a.domain = -1;
        double u = pl_last_utility(rt.L, t->slot);
        int n;
        if (rt.cfg.trace_fmt == PR_TRACE_JSON)
            n = snprintf(rt.tbuf + off, rt.tcap - off,
                         "{\"epoch\":%ld,\"time\":%.4f,\"tid\":%d,\"domain\":%d,\"cpus\":\"%s\",\"speed\":%.6g,"
                         "\"utility\":%.6g,\"objective\":%.6g}\n",
                         rt.epochs, tsec, (int)t->tid, a.domain, cpus, t->speed, u, f);
        else
            n = snprintf(rt.tbuf + off, rt.tcap - off, "%ld,%.4f,%d,%d,%s,%.6g,%.6g,%.6g\n", rt.epochs, tsec,
                         (int)t->tid, a.domain, cpus, t->speed, u, f);
        if (n > 0 && (size_t)n < rt.tcap - off)
            off += (size_t)n;
    }
    /* One write per epoch, no stdio: a fork() child has nothing to re-flush. */
    if (off && write(rt.trace_fd, rt.tbuf, off) < 0) {
        rt_fail_once(F_TRACE, "trace write failed (%s); trace off", strerror(errno));
        close(rt.trace_fd);
        rt.trace_fd = -1;
    }
}

void rt_summary(void)
{
    if (!strcmp(rt.cfg.summary, "none"))
        return;
    double wall = (double)(rt_now_ns(CLOCK_MONOTONIC) - rt.t0) / 1e9;
    char line[512];
    int n = snprintf(line, sizeof line,
                     "pinrt: summary pid=%d epochs=%ld moves=%ld threads_seen=%ld manager_cpu_s=%.6f wall_s=%.3f "
                     "manager_cpu_pct=%.4f speed_source=%s state=%s\n",
                     (int)getpid(), rt.epochs, rt.moves, rt.threads_seen, rt.mgr_cpu, wall,
                     wall > 0 ? 100.0 * rt.mgr_cpu / wall : 0.0, rt_speed_name(rt.speed_src),
                     atomic_load(&rt.level) == LV_FULL ? "full" : atomic_load(&rt.level) == LV_MEASURE ? "measure" : "off");
    if (n <= 0)
        return;
    if (!rt.cfg.summary[0]) {
        ssize_t w = write(2, line, (size_t)n);
        (void)w;
        return;
    }
    int fd = open(rt.cfg.summary, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
        ssize_t w = write(fd, line, (size_t)n);
        (void)w;
        close(fd);
    }
}
