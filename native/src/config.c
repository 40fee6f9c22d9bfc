#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void pr_set_zero(pr_cpuset *s) { memset(s, 0, sizeof *s); }

void pr_set_add(pr_cpuset *s, int cpu)
{
    if (cpu >= 0 && cpu < PR_MAX_CPUS)
        s->w[cpu / 64] |= 1ULL << (cpu % 64);
}

int pr_set_has(const pr_cpuset *s, int cpu)
{
    return cpu >= 0 && cpu < PR_MAX_CPUS && (s->w[cpu / 64] >> (cpu % 64)) & 1;
}

int pr_set_count(const pr_cpuset *s)
{
    int n = 0;
    for (int i = 0; i < PR_MAX_CPUS / 64; i++)
        n += __builtin_popcountll(s->w[i]);
    return n;
}

static int parse_uint(const char **p, long *out)
{
    const char *s = *p;
    if (!isdigit((unsigned char)*s))
        return -1;
    long v = 0;
    while (isdigit((unsigned char)*s)) {
        v = v * 10 + (*s - '0');
        if (v >= PR_MAX_CPUS)
            return -1;
        s++;
    }
    *p = s;
    *out = v;
    return 0;
}

int pr_parse_cpulist(const char *str, pr_cpuset *s)
{
    pr_set_zero(s);
    if (!str)
        return -1;
    const char *p = str;
    while (*p == ' ')
        p++;
    if (!*p)
        return -1;
    for (;;) {
        long a, b;
        if (parse_uint(&p, &a))
            return -1;
        b = a;
        if (*p == '-') {
            p++;
            if (parse_uint(&p, &b) || b < a)
                return -1;
        }
        for (long c = a; c <= b; c++)
            pr_set_add(s, (int)c);
        while (*p == ' ')
            p++;
        if (*p == '\0')
            return 0;
        if (*p != ',')
            return -1;
        p++;
    }
}

void pr_format_cpulist(const pr_cpuset *s, char *buf, size_t len)
{
    size_t off = 0;
    if (len)
        buf[0] = '\0';
    for (int c = 0; c < PR_MAX_CPUS; c++) {
        if (!pr_set_has(s, c))
            continue;
        int e = c;
        while (e + 1 < PR_MAX_CPUS && pr_set_has(s, e + 1))
            e++;
        int n = e > c ? snprintf(buf + off, len - off, "%s%d-%d", off ? "," : "", c, e)
                      : snprintf(buf + off, len - off, "%s%d", off ? "," : "", c);
        if (n < 0 || (size_t)n >= len - off)
            return;
        off += (size_t)n;
        c = e;
    }
}

static void errf(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
}

/* A real number in [lo, hi] (strict at the ends when asked). */
static int get_real(const char *name, const char *v, double lo, int lo_open, double hi, int hi_open,
                    double *out, char *err, size_t elen)
{
    if (!v)
        return 0;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end != '\0' || errno || !isfinite(x) || x < lo || (lo_open && x == lo) || x > hi ||
        (hi_open && x == hi)) {
        errf(err, elen, "%s='%s' is not a number in %s%g, %g%s", name, v, lo_open ? "(" : "[", lo, hi,
             hi_open ? ")" : "]");
        return -1;
    }
    *out = x;
    return 0;
}

static int get_int(const char *name, const char *v, long lo, long hi, long *out, char *err, size_t elen)
{
    if (!v)
        return 0;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end != '\0' || errno || x < lo || x > hi) {
        errf(err, elen, "%s='%s' is not an integer in [%ld, %ld]", name, v, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_topology(pr_config *c, const char *v, char *err, size_t elen)
{
    /* "dom:cpulist;dom:cpulist;...", domains numbered 0..n-1 in any order. */
    char buf[4096];
    if (strlen(v) >= sizeof buf) {
        errf(err, elen, "PINRT_TOPOLOGY is too long");
        return -1;
    }
    strcpy(buf, v);
    int seen[PR_MAX_DOMAINS] = {0}, n = 0, maxd = -1;
    pr_cpuset all;
    pr_set_zero(&all);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
        while (*tok == ' ')
            tok++;
        if (!*tok)
            continue;
        char *colon = strchr(tok, ':');
        char *end;
        long d = colon ? strtol(tok, &end, 10) : -1;
        if (!colon || end != colon || d < 0 || d >= PR_MAX_DOMAINS || seen[d]) {
            errf(err, elen, "PINRT_TOPOLOGY='%s' is not of the form dom:cpulist;dom:cpulist (bad part '%s')", v,
                 tok);
            return -1;
        }
        pr_cpuset s;
        if (pr_parse_cpulist(colon + 1, &s)) {
            errf(err, elen, "PINRT_TOPOLOGY='%s': bad cpulist '%s'", v, colon + 1);
            return -1;
        }
        for (int i = 0; i < PR_MAX_CPUS / 64; i++) {
            if (all.w[i] & s.w[i]) {
                errf(err, elen, "PINRT_TOPOLOGY='%s': a CPU is in two domains", v);
                return -1;
            }
            all.w[i] |= s.w[i];
        }
        seen[d] = 1;
        c->dom_cpus[d] = s;
        n++;
        if (d > maxd)
            maxd = (int)d;
    }
    if (n == 0 || maxd + 1 != n) {
        errf(err, elen, "PINRT_TOPOLOGY='%s': domains must be numbered 0..n-1", v);
        return -1;
    }
    c->ndomains = n;
    c->has_topology = 1;
    return 0;
}

static int is_off(const char *v)
{
    return !strcasecmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "off") || !strcasecmp(v, "false");
}

static int is_on(const char *v)
{
    return !strcasecmp(v, "1") || !strcasecmp(v, "yes") || !strcasecmp(v, "on") || !strcasecmp(v, "true");
}

int pr_config_parse(pr_config *c, const char *(*get)(const char *, void *), void *ctx, char *err, size_t elen)
{
    memset(c, 0, sizeof *c);
    c->enabled = 1;
    c->period = 0.2;
    pl_params_default(&c->lp);
    c->zeta = 0.5;
    c->group = 1;
    c->log = PR_LOG_ERROR;
    c->max_threads = 1024;
    if (elen)
        err[0] = '\0';

    const char *v;
    if ((v = get("PINRT_ENABLE", ctx))) {
        if (is_off(v)) {
            c->enabled = 0;
            return 0;
        }
        if (!is_on(v)) {
            errf(err, elen, "PINRT_ENABLE='%s' must be 0 or 1", v);
            return -1;
        }
    }
    if (get_real("PINRT_PERIOD", get("PINRT_PERIOD", ctx), 0, 1, 3600, 0, &c->period, err, elen))
        return -1;
    if (c->period < 0.001) {
        errf(err, elen, "PINRT_PERIOD=%g is below the 0.001 s minimum", c->period);
        return -1;
    }
    /* The papers' names: RESOURCES={NUMA_BANDWIDTH,NUMA_MEMORY} switch the
     * domain level and stack binding, CHILD_RESOURCES={CPU_BANDWIDTH|NULL}
     * the core level; OPT_METHODS / CHILD_OPT_METHODS alias the methods. */
    if ((v = get("PINRT_RESOURCES", ctx))) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", v);
        c->lp.domain_al = 0;
        char *save = NULL;
        for (char *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
            if (!strcasecmp(t, "NUMA_BANDWIDTH"))
                c->lp.domain_al = 1;
            else if (!strcasecmp(t, "NUMA_MEMORY"))
                c->mem_on = 1;
            else if (strcasecmp(t, "NULL")) {
                errf(err, elen, "PINRT_RESOURCES: unknown resource '%s' (expected NUMA_BANDWIDTH, NUMA_MEMORY)", t);
                return -1;
            }
        }
    }
    if ((v = get("PINRT_CHILD_RESOURCES", ctx))) {
        if (!strcasecmp(v, "CPU_BANDWIDTH"))
            c->lp.core_rl = 1;
        else if (!strcasecmp(v, "NULL"))
            c->lp.core_rl = 0;
        else {
            errf(err, elen, "PINRT_CHILD_RESOURCES='%s' is unknown (expected CPU_BANDWIDTH or NULL)", v);
            return -1;
        }
    }
    const char *dm = get("PINRT_DOMAIN_METHOD", ctx), *cm = get("PINRT_CORE_METHOD", ctx);
    const char *dm_name = "PINRT_DOMAIN_METHOD", *cm_name = "PINRT_CORE_METHOD";
    if (!dm && (dm = get("PINRT_OPT_METHODS", ctx)))
        dm_name = "PINRT_OPT_METHODS";
    if (!cm && (cm = get("PINRT_CHILD_OPT_METHODS", ctx)))
        cm_name = "PINRT_CHILD_OPT_METHODS";
    if ((v = dm)) {
        if (!strcasecmp(v, "AL"))
            c->lp.domain_al = 1;
        else if (!strcasecmp(v, "NULL") || !strcasecmp(v, "NONE"))
            c->lp.domain_al = 0;
        else {
            errf(err, elen, "%s='%s' is unknown (expected AL or NULL)", dm_name, v);
            return -1;
        }
    }
    if ((v = cm)) {
        if (!strcasecmp(v, "RL"))
            c->lp.core_rl = 1;
        else if (!strcasecmp(v, "NULL") || !strcasecmp(v, "NONE"))
            c->lp.core_rl = 0;
        else {
            errf(err, elen, "%s='%s' is unknown (expected RL or NULL)", cm_name, v);
            return -1;
        }
    }
    if ((v = get("PINRT_OBJECTIVE", ctx))) {
        if (!strcasecmp(v, "O1"))
            c->lp.objective = PL_O1;
        else if (!strcasecmp(v, "O2"))
            c->lp.objective = PL_O2;
        else {
            errf(err, elen, "PINRT_OBJECTIVE='%s' is unknown (expected O1 or O2)", v);
            return -1;
        }
    }
    if ((v = get("PINRT_UTILITY", ctx))) {
        if (!strcasecmp(v, "shared"))
            c->lp.utility = PL_UTIL_SHARED;
        else if (!strcasecmp(v, "own"))
            c->lp.utility = PL_UTIL_OWN;
        else {
            errf(err, elen, "PINRT_UTILITY='%s' is unknown (expected shared or own)", v);
            return -1;
        }
    }
    if (get_real("PINRT_GAMMA", get("PINRT_GAMMA", ctx), 0, 0, 1e6, 0, &c->lp.gamma, err, elen) ||
        get_real("PINRT_EPS", get("PINRT_EPS", ctx), 0, 1, 1, 0, &c->lp.eps, err, elen) ||
        get_real("PINRT_NU", get("PINRT_NU", ctx), 0, 1, 1, 0, &c->lp.nu, err, elen) ||
        get_real("PINRT_LAMBDA", get("PINRT_LAMBDA", ctx), 0, 0, 1, 0, &c->lp.lambda, err, elen) ||
        get_real("PINRT_EPS_A", get("PINRT_EPS_A", ctx), 0, 1, 1, 0, &c->lp.eps_a, err, elen) ||
        get_real("PINRT_LAMBDA_A", get("PINRT_LAMBDA_A", ctx), 0, 0, 1, 0, &c->lp.lambda_a, err, elen) ||
        get_real("PINRT_ETA", get("PINRT_ETA", ctx), 1, 1, 1e6, 0, &c->lp.eta, err, elen))
        return -1;
    long l;
    if ((v = get("PINRT_NUMA_EVERY", ctx))) {
        if (get_int("PINRT_NUMA_EVERY", v, 1, 1000000, &l, err, elen))
            return -1;
        c->lp.numa_every = (int)l;
    }
    if ((v = get("PINRT_GROUP", ctx))) {
        if (get_int("PINRT_GROUP", v, 1, PR_MAX_CPUS, &l, err, elen))
            return -1;
        c->group = (int)l;
    }
    if ((v = get("PINRT_MAX_THREADS", ctx))) {
        if (get_int("PINRT_MAX_THREADS", v, 1, 65536, &l, err, elen))
            return -1;
        c->max_threads = (int)l;
    }
    if ((v = get("PINRT_PIN_MAIN", ctx))) {
        if (is_on(v))
            c->pin_main = 1;
        else if (is_off(v))
            c->pin_main = 0;
        else {
            errf(err, elen, "PINRT_PIN_MAIN='%s' must be 0 or 1", v);
            return -1;
        }
    }
    if ((v = get("PINRT_SEED", ctx))) {
        char *end;
        errno = 0;
        unsigned long long s = strtoull(v, &end, 0);
        if (end == v || *end || errno || v[0] == '-') {
            errf(err, elen, "PINRT_SEED='%s' is not a non-negative integer", v);
            return -1;
        }
        c->lp.seed = s;
    }
    if ((v = get("PINRT_ZETA", ctx)) && *v) {
        if (get_real("PINRT_ZETA", v, 0, 0, 1, 0, &c->zeta, err, elen))
            return -1;
        c->mem_on = 1;
    }
    if ((v = get("PINRT_MEMPOLICY", ctx))) {
        if (!strcasecmp(v, "preferred"))
            c->mem_policy = PR_MEM_PREFERRED;
        else if (!strcasecmp(v, "bind"))
            c->mem_policy = PR_MEM_BIND;
        else {
            errf(err, elen, "PINRT_MEMPOLICY='%s' is unknown (expected preferred or bind)", v);
            return -1;
        }
    }
    if ((v = get("PINRT_TOPOLOGY", ctx)) && *v)
        if (parse_topology(c, v, err, elen))
            return -1;
    if ((v = get("PINRT_CPUS", ctx)) && *v) {
        if (pr_parse_cpulist(v, &c->cpus)) {
            errf(err, elen, "PINRT_CPUS='%s' is not a cpulist (e.g. 0-3,6)", v);
            return -1;
        }
        c->has_cpus = 1;
    }
    if ((v = get("PINRT_TRACE", ctx)) && *v) {
        if (strlen(v) >= sizeof c->trace) {
            errf(err, elen, "PINRT_TRACE path is too long");
            return -1;
        }
        strcpy(c->trace, v);
        size_t n = strlen(v);
        if ((n > 6 && !strcmp(v + n - 6, ".jsonl")) || (n > 5 && !strcmp(v + n - 5, ".json")))
            c->trace_fmt = PR_TRACE_JSON;
    }
    if ((v = get("PINRT_TRACE_FORMAT", ctx))) {
        if (!strcasecmp(v, "csv"))
            c->trace_fmt = PR_TRACE_CSV;
        else if (!strcasecmp(v, "json") || !strcasecmp(v, "jsonl"))
            c->trace_fmt = PR_TRACE_JSON;
        else {
            errf(err, elen, "PINRT_TRACE_FORMAT='%s' is unknown (expected csv or json)", v);
            return -1;
        }
    }
    if ((v = get("PINRT_SUMMARY", ctx))) {
        if (strlen(v) >= sizeof c->summary) {
            errf(err, elen, "PINRT_SUMMARY path is too long");
            return -1;
        }
        if (is_off(v) || !strcasecmp(v, "none"))
            strcpy(c->summary, "none");
        else if (!strcasecmp(v, "stderr") || is_on(v))
            c->summary[0] = '\0';
        else
            strcpy(c->summary, v);
    }
    if ((v = get("PINRT_LOG", ctx))) {
        if (!strcasecmp(v, "quiet"))
            c->log = PR_LOG_QUIET;
        else if (!strcasecmp(v, "error"))
            c->log = PR_LOG_ERROR;
        else if (!strcasecmp(v, "info"))
            c->log = PR_LOG_INFO;
        else if (!strcasecmp(v, "debug"))
            c->log = PR_LOG_DEBUG;
        else {
            errf(err, elen, "PINRT_LOG='%s' is unknown (expected quiet, error, info or debug)", v);
            return -1;
        }
    }
    if ((v = get("PINRT_SPEED", ctx))) {
        if (!strcasecmp(v, "auto"))
            c->speed = PR_SPEED_AUTO;
        else if (!strcasecmp(v, "instructions"))
            c->speed = PR_SPEED_INSTRUCTIONS;
        else if (!strcasecmp(v, "cputime"))
            c->speed = PR_SPEED_CPUTIME;
        else if (!strcasecmp(v, "schedstat"))
            c->speed = PR_SPEED_SCHEDSTAT;
        else {
            errf(err, elen, "PINRT_SPEED='%s' is unknown (expected auto, instructions, cputime or schedstat)", v);
            return -1;
        }
    }
    return 0;
}

static int first_outside(const pr_cpuset *s, const pr_cpuset *allowed)
{
    for (int c = 0; c < PR_MAX_CPUS; c++)
        if (pr_set_has(s, c) && !pr_set_has(allowed, c))
            return c;
    return -1;
}

int pr_config_check_cpus(const pr_config *c, const pr_cpuset *allowed, char *err, size_t elen)
{
    char al[256];
    pr_format_cpulist(allowed, al, sizeof al);
    int bad;
    if (c->has_cpus && (bad = first_outside(&c->cpus, allowed)) >= 0) {
        errf(err, elen, "PINRT_CPUS: CPU %d is outside the allowed set %s", bad, al);
        return -1;
    }
    for (int d = 0; c->has_topology && d < c->ndomains; d++) {
        if ((bad = first_outside(&c->dom_cpus[d], allowed)) >= 0) {
            errf(err, elen, "PINRT_TOPOLOGY: CPU %d of domain %d is outside the allowed set %s", bad, d, al);
            return -1;
        }
    }
    return 0;
}
