/* The placement applied to the calling process (the task just before
 * execve): CPU affinity and memory policy, both kept across execve, all or
 * nothing; and the one phrase that says what was applied. */
#include "placement.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/errmsg.h"

int cp_apply_self(const cp_placement *p, char *err, size_t elen)
{
    char buf[512];
    cpu_set_t old;
    if (sched_getaffinity(0, sizeof old, &old)) {
        cm_errf(err, elen, "sched_getaffinity failed: %s", strerror(errno));
        return -1;
    }
    if (p->has_cpus) {
        cpu_set_t set;
        CPU_ZERO(&set);
        for (int c = 0; c < CM_MAX_CPUS && c < CPU_SETSIZE; c++)
            if (cm_set_has(&p->cpus, c))
                CPU_SET(c, &set);
        if (sched_setaffinity(0, sizeof set, &set)) {
            cm_format_cpulist(&p->cpus, buf, sizeof buf);
            cm_errf(err, elen, "sched_setaffinity(cpus=%s) failed: %s", buf, strerror(errno));
            return -1;
        }
    }
    if (p->mempolicy != CP_MEM_UNSET) {
        unsigned long mask[CM_MAX_CPUS / 64] = {0};
        for (int i = 0; i < CM_MAX_CPUS / 64; i++)
            mask[i] = (unsigned long)p->mems.w[i];
        int nodes = p->has_mems;
        if (syscall(SYS_set_mempolicy, p->mempolicy, nodes ? mask : NULL,
                    nodes ? (unsigned long)CM_MAX_CPUS + 1 : 0UL)) {
            int e = errno;
            sched_setaffinity(0, sizeof old, &old); /* all or nothing: the task runs as Slurm placed it */
            errno = e;
            cm_format_cpulist(&p->mems, buf, sizeof buf);
            cm_errf(err, elen, "set_mempolicy(%s%s%s) failed: %s", cm_mpol_names[p->mempolicy], nodes ? " mems=" : "",
                    nodes ? buf : "", strerror(errno));
            return -1;
        }
    }
    return 0;
}

void cp_describe(const cp_placement *p, int runtime, char *buf, size_t len)
{
    char c[256] = "unchanged", m[256] = "";
    if (p->has_cpus)
        cm_format_cpulist(&p->cpus, c, sizeof c);
    if (p->has_mems)
        cm_format_cpulist(&p->mems, m, sizeof m);
    snprintf(buf, len, "cpus=%s mempolicy=%s%s%s resctrl_group=%s pinrt=%d", c,
             p->mempolicy == CP_MEM_UNSET ? "unchanged" : cm_mpol_names[p->mempolicy], m[0] ? " mems=" : "", m,
             p->resctrl_group[0] ? p->resctrl_group : "none", runtime);
}
