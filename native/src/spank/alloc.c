/* The placement against this node and Slurm's allocation: Slurm names the
 * step's cores abstractly (core k = the k-th (package, core) pair of the
 * node), the placement names Linux CPUs and NUMA nodes. sysroot "" is the
 * real root; tests give a fake sysfs. */
#include "placement.h"

#include <stdio.h>
#include <string.h>

#include "common/errmsg.h"

static long read_long(const char *path)
{
    FILE *f = fopen(path, "r");
    long v = -1;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

static int read_line(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int ok = fgets(buf, (int)len, f) != NULL;
    fclose(f);
    if (!ok)
        return -1;
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

int cp_cores_to_cpus(const char *sysroot, const char *cores, cm_cpuset *cpus, char *err, size_t elen)
{
    cm_cpuset want, online;
    char path[CP_PATH + 128], line[4096];
    cm_set_zero(cpus);
    if (cm_parse_cpulist(cores, &want)) {
        cm_errf(err, elen, "Slurm's allocated core list '%s' is not a list", cores);
        return -1;
    }
    snprintf(path, sizeof path, "%s/sys/devices/system/cpu/online", sysroot);
    if (read_line(path, line, sizeof line) || cm_parse_cpulist(line, &online)) {
        cm_errf(err, elen, "cannot read the online CPUs from %s", path);
        return -1;
    }
    /* (package, core) of each online CPU; core index k = k-th distinct pair in
     * (package, core) order, the order Slurm numbers a node's cores in. */
    long pkg[CM_MAX_CPUS], core[CM_MAX_CPUS], upkg[CM_MAX_CPUS], ucore[CM_MAX_CPUS];
    int nu = 0;
    for (int c = 0; c < CM_MAX_CPUS; c++) {
        if (!cm_set_has(&online, c))
            continue;
        snprintf(path, sizeof path, "%s/sys/devices/system/cpu/cpu%d/topology/physical_package_id", sysroot, c);
        pkg[c] = read_long(path);
        snprintf(path, sizeof path, "%s/sys/devices/system/cpu/cpu%d/topology/core_id", sysroot, c);
        core[c] = read_long(path);
        if (pkg[c] < 0 || core[c] < 0) { /* no topology: one core per CPU */
            pkg[c] = 0;
            core[c] = c;
        }
        int i = 0;
        while (i < nu && (upkg[i] != pkg[c] || ucore[i] != core[c]))
            i++;
        if (i == nu) {
            upkg[nu] = pkg[c];
            ucore[nu++] = core[c];
        }
    }
    for (int i = 1; i < nu; i++) /* insertion sort of the distinct pairs */
        for (int j = i; j > 0 && (upkg[j - 1] > upkg[j] || (upkg[j - 1] == upkg[j] && ucore[j - 1] > ucore[j])); j--) {
            long t = upkg[j];
            upkg[j] = upkg[j - 1];
            upkg[j - 1] = t;
            t = ucore[j];
            ucore[j] = ucore[j - 1];
            ucore[j - 1] = t;
        }
    for (int k = 0; k < CM_MAX_CPUS; k++) {
        if (!cm_set_has(&want, k))
            continue;
        if (k >= nu) {
            cm_errf(err, elen, "Slurm allocated core %d but this node has %d cores online", k, nu);
            return -1;
        }
        for (int c = 0; c < CM_MAX_CPUS; c++)
            if (cm_set_has(&online, c) && pkg[c] == upkg[k] && core[c] == ucore[k])
                cm_set_add(cpus, c);
    }
    return 0;
}

int cp_check(const cp_placement *p, const cm_cpuset *alloc, const char *sysroot, char *err, size_t elen)
{
    char a[512], w[512];
    if (p->has_cpus) {
        for (int c = 0; c < CM_MAX_CPUS; c++)
            if (cm_set_has(&p->cpus, c) && !cm_set_has(alloc, c)) {
                cm_format_cpulist(&p->cpus, w, sizeof w);
                cm_format_cpulist(alloc, a, sizeof a);
                cm_errf(err, elen, "cpus=%s: CPU %d is outside the CPUs Slurm allocated to the step (%s)", w, c, a);
                return -1;
            }
    }
    if (p->has_mems) {
        char path[CP_PATH + 64], line[1024];
        cm_cpuset nodes;
        snprintf(path, sizeof path, "%s/sys/devices/system/node/online", sysroot);
        if (read_line(path, line, sizeof line) || cm_parse_cpulist(line, &nodes)) {
            cm_set_zero(&nodes); /* a kernel without NUMA: node 0 only */
            cm_set_add(&nodes, 0);
        }
        for (int n = 0; n < CM_MAX_CPUS; n++)
            if (cm_set_has(&p->mems, n) && !cm_set_has(&nodes, n)) {
                cm_format_cpulist(&nodes, a, sizeof a);
                cm_errf(err, elen, "mems: NUMA node %d is not online on this node (online: %s)", n, a);
                return -1;
            }
    }
    return 0;
}
