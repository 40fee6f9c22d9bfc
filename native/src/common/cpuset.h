/* CPU (or NUMA node) sets and the kernel's cpulist text ("0-3,8"): the
 * runtime's domains and PINRT_CPUS, the SPANK plugin's cpus= / mems= and
 * Slurm's core list all use them. Pure: no syscalls. */
#ifndef COSCHED_CPUSET_H
#define COSCHED_CPUSET_H

#include <stddef.h>
#include <stdint.h>

#define CM_MAX_CPUS 1024

typedef struct {
    uint64_t w[CM_MAX_CPUS / 64];
} cm_cpuset;

void cm_set_zero(cm_cpuset *s);
void cm_set_add(cm_cpuset *s, int cpu);
int cm_set_has(const cm_cpuset *s, int cpu);
int cm_set_count(const cm_cpuset *s);
/* Parses "0-3,5,7-8" into s. Returns 0, or -1 on garbage / out of range. */
int cm_parse_cpulist(const char *str, cm_cpuset *s);
/* Formats s as a cpulist into buf. */
void cm_format_cpulist(const cm_cpuset *s, char *buf, size_t len);

#endif
