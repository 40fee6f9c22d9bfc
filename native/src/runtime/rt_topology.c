/* Domains (NUMA nodes inside the allowed CPUs, or PINRT_TOPOLOGY) and units
 * (a CPU or a group of g CPUs of a domain). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt.h"

int rt_read_file(const char *path, char *buf, size_t len)
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
        cm_cpuset s;
        if (rt_read_file(path, buf, sizeof buf) == 0 && cm_parse_cpulist(buf, &s) == 0 && cm_set_has(&s, cpu))
            return n;
    }
    return -1;
}

int rt_build_topology(void)
{
    rt.ndomains = 0;
    if (rt.cfg.has_topology) {
        for (int d = 0; d < rt.cfg.ndomains; d++) {
            rt.dom_cpus[d] = rt.cfg.dom_cpus[d];
            for (int i = 0; i < CM_MAX_CPUS / 64; i++) /* inside PINRT_CPUS too */
                rt.dom_cpus[d].w[i] &= rt.allowed.w[i];
            if (cm_set_count(&rt.dom_cpus[d]) == 0) {
                rt_logmsg(PR_LOG_ERROR, "PINRT_TOPOLOGY: domain %d has no CPU inside PINRT_CPUS; runtime disabled", d);
                return -2;
            }
            int first = -1;
            for (int c = 0; c < CM_MAX_CPUS && first < 0; c++)
                if (cm_set_has(&rt.dom_cpus[d], c))
                    first = c;
            int node = cpu_node(first);
            rt.dom_node[d] = node < 0 ? 0 : node;
        }
        rt.ndomains = rt.cfg.ndomains;
    } else {
        char path[128], buf[4096];
        for (int n = 0; n < PR_MAX_DOMAINS; n++) {
            snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", n);
            cm_cpuset s, in;
            if (rt_read_file(path, buf, sizeof buf) || cm_parse_cpulist(buf, &s))
                continue;
            cm_set_zero(&in);
            for (int c = 0; c < CM_MAX_CPUS; c++)
                if (cm_set_has(&s, c) && cm_set_has(&rt.allowed, c))
                    cm_set_add(&in, c);
            if (cm_set_count(&in) == 0)
                continue;
            rt.dom_cpus[rt.ndomains] = in;
            rt.dom_node[rt.ndomains++] = n;
        }
        if (rt.ndomains == 0) { /* no sysfs: one domain */
            rt.dom_cpus[0] = rt.allowed;
            rt.dom_node[0] = 0;
            rt.ndomains = 1;
        }
    }
    int total = 0;
    for (int d = 0; d < rt.ndomains; d++)
        total += cm_set_count(&rt.dom_cpus[d]);
    rt.unit_cpus = calloc((size_t)total + 1, sizeof *rt.unit_cpus);
    rt.unit_domain = calloc((size_t)total + 1, sizeof(int));
    if (!rt.unit_cpus || !rt.unit_domain)
        return -1;
    rt.nunits = 0;
    for (int d = 0; d < rt.ndomains; d++) {
        int in_group = 0;
        for (int c = 0; c < CM_MAX_CPUS; c++) {
            if (!cm_set_has(&rt.dom_cpus[d], c))
                continue;
            if (in_group == 0) {
                cm_set_zero(&rt.unit_cpus[rt.nunits]);
                rt.unit_domain[rt.nunits] = d;
                rt.nunits++;
            }
            cm_set_add(&rt.unit_cpus[rt.nunits - 1], c);
            if (++in_group == rt.cfg.group)
                in_group = 0;
        }
    }
    rt.unit_cs = calloc((size_t)rt.nunits, sizeof *rt.unit_cs);
    if (!rt.unit_cs)
        return -1;
    for (int u = 0; u < rt.nunits; u++)
        rt_to_cpuset(&rt.unit_cpus[u], &rt.unit_cs[u]);
    for (int d = 0; d < rt.ndomains; d++)
        rt_to_cpuset(&rt.dom_cpus[d], &rt.dom_cs[d]);
    return rt.nunits > 0 ? 0 : -1;
}

void rt_to_cpuset(const cm_cpuset *s, cpu_set_t *cs)
{
    CPU_ZERO(cs);
    for (int c = 0; c < CM_MAX_CPUS && c < CPU_SETSIZE; c++)
        if (cm_set_has(s, c))
            CPU_SET(c, cs);
}
