/* PINRT_* configuration: parsing and validation, pure (no syscalls), so
 * that it is unit-tested and shared by the runtime and its tests. */
#ifndef PINRT_CONFIG_H
#define PINRT_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "learner.h"

#define PR_MAX_CPUS 1024
#define PR_MAX_DOMAINS 64

typedef struct {
    uint64_t w[PR_MAX_CPUS / 64];
} pr_cpuset;

void pr_set_zero(pr_cpuset *s);
void pr_set_add(pr_cpuset *s, int cpu);
int pr_set_has(const pr_cpuset *s, int cpu);
int pr_set_count(const pr_cpuset *s);
/* Parses "0-3,5,7-8" into s. Returns 0, or -1 on garbage / out of range. */
int pr_parse_cpulist(const char *str, pr_cpuset *s);
/* Formats s as a cpulist into buf. */
void pr_format_cpulist(const pr_cpuset *s, char *buf, size_t len);

enum { PR_LOG_QUIET = 0, PR_LOG_ERROR = 1, PR_LOG_INFO = 2, PR_LOG_DEBUG = 3 };
enum { PR_SPEED_AUTO = 0, PR_SPEED_INSTRUCTIONS, PR_SPEED_CPUTIME, PR_SPEED_SCHEDSTAT };
enum { PR_TRACE_CSV = 0, PR_TRACE_JSON = 1 };
enum { PR_MEM_PREFERRED = 0, PR_MEM_BIND = 1 };

typedef struct {
    int enabled;
    double period;        /* seconds */
    pl_params lp;         /* learner parameters */
    int mem_on;           /* NUMA_MEMORY resource: bind stacks */
    double zeta;
    int mem_policy;
    int group;            /* unit = group of this many CPUs */
    int has_topology;
    int ndomains;
    pr_cpuset dom_cpus[PR_MAX_DOMAINS];
    int has_cpus;
    pr_cpuset cpus;
    char trace[512];
    int trace_fmt;
    char summary[512];    /* "" = stderr, "none" = off, else a file */
    int log;
    int speed;
    int max_threads;
    int pin_main;         /* also pin the main thread */
} pr_config;

/* get(name, ctx) returns the value of a variable or NULL. On error returns -1
 * and writes one line (no newline) into err. */
int pr_config_parse(pr_config *c, const char *(*get)(const char *, void *), void *ctx, char *err,
                    size_t errlen);

/* Checks the configured CPUs (PINRT_CPUS, PINRT_TOPOLOGY) against the
 * allowed set. Returns 0 or -1 with a message. */
int pr_config_check_cpus(const pr_config *c, const pr_cpuset *allowed, char *err, size_t errlen);

#endif
