/* The one runtime context and how the runtime reports: one line per
 * message on stderr, each failure once, degrading full -> measure -> off. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "rt.h"

struct rt_ctx rt = {
    .reg_lock = PTHREAD_MUTEX_INITIALIZER,
    .mgr_lock = PTHREAD_MUTEX_INITIALIZER,
    .trace_fd = -1,
};

void rt_logmsg(int level, const char *fmt, ...)
{
    if (rt.cfg.log < level)
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

void rt_fail_once(unsigned flag, const char *fmt, ...)
{
    unsigned old = atomic_fetch_or(&rt.failed, flag);
    if (old & flag || rt.cfg.log < PR_LOG_ERROR)
        return;
    char buf[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    rt_logmsg(PR_LOG_ERROR, "%s", buf);
}

void rt_degrade(int to, const char *why)
{
    int cur = atomic_load(&rt.level);
    if (to < cur) {
        atomic_store(&rt.level, to);
        rt_logmsg(PR_LOG_ERROR, "%s; runtime degraded to %s", why, to == LV_MEASURE ? "measuring only" : "off");
    }
}

uint64_t rt_now_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}
