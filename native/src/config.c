#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
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

static int is_off(const char *v)
{
    return !strcasecmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "off") || !strcasecmp(v, "false");
}

static int is_on(const char *v)
{
    return !strcasecmp(v, "1") || !strcasecmp(v, "yes") || !strcasecmp(v, "on") || !strcasecmp(v, "true");
}

#define FIELD(c, o, T) ((T *)((char *)(c) + (o)->off))

static int set_topology(pr_config *c, const pr_option *o, const char *v, int is_default, char *err, size_t elen)
{
    (void)o, (void)is_default;
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

/* The papers' names: RESOURCES={NUMA_BANDWIDTH,NUMA_MEMORY} switch the domain
 * level and stack binding (CHILD_RESOURCES and the OPT_METHODS aliases are
 * plain choices in the table). */
static int set_resources(pr_config *c, const pr_option *o, const char *v, int is_default, char *err, size_t elen)
{
    (void)o, (void)is_default;
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
    return 0;
}

/* Setting ζ turns stack binding on; its default only serves NUMA_MEMORY. */
static int zeta_on(pr_config *c, const pr_option *o, const char *v, int is_default, char *err, size_t elen)
{
    (void)o, (void)v, (void)err, (void)elen;
    if (!is_default)
        c->mem_on = 1;
    return 0;
}

static int set_cpus(pr_config *c, const pr_option *o, const char *v, int is_default, char *err, size_t elen)
{
    (void)o, (void)is_default;
    if (pr_parse_cpulist(v, &c->cpus)) {
        errf(err, elen, "PINRT_CPUS='%s' is not a cpulist (e.g. 0-3,6)", v);
        return -1;
    }
    c->has_cpus = 1;
    return 0;
}

static int set_trace(pr_config *c, const pr_option *o, const char *v, int is_default, char *err, size_t elen)
{
    (void)o, (void)is_default;
    if (strlen(v) >= sizeof c->trace) {
        errf(err, elen, "PINRT_TRACE path is too long");
        return -1;
    }
    strcpy(c->trace, v);
    size_t n = strlen(v);
    if ((n > 6 && !strcmp(v + n - 6, ".jsonl")) || (n > 5 && !strcmp(v + n - 5, ".json")))
        c->trace_fmt = PR_TRACE_JSON;
    return 0;
}

static int set_summary(pr_config *c, const pr_option *o, const char *v, int is_default, char *err, size_t elen)
{
    (void)o, (void)is_default;
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
    return 0;
}

static const pr_choice BOOL_NAMES[] = {{"0", 0, 0}, {"1", 1, 0}, {NULL, 0, 0}};
static const pr_choice OBJECTIVES[] = {{"O1", PL_O1, 0}, {"O2", PL_O2, 0}, {NULL, 0, 0}};
static const pr_choice UTILITIES[] = {{"shared", PL_UTIL_SHARED, 0}, {"own", PL_UTIL_OWN, 0}, {NULL, 0, 0}};
static const pr_choice CORE_METHODS[] = {{"RL", 1, 0}, {"NULL", 0, 0}, {"NONE", 0, 1}, {NULL, 0, 0}};
static const pr_choice DOMAIN_METHODS[] = {{"AL", 1, 0}, {"NULL", 0, 0}, {"NONE", 0, 1}, {NULL, 0, 0}};
static const pr_choice CHILD_RESOURCES[] = {{"CPU_BANDWIDTH", 1, 0}, {"NULL", 0, 0}, {NULL, 0, 0}};
static const pr_choice MEMPOLICIES[] = {{"preferred", PR_MEM_PREFERRED, 0}, {"bind", PR_MEM_BIND, 0}, {NULL, 0, 0}};
static const pr_choice TRACE_FORMATS[] = {
    {"csv", PR_TRACE_CSV, 0}, {"json", PR_TRACE_JSON, 0}, {"jsonl", PR_TRACE_JSON, 1}, {NULL, 0, 0}};
static const pr_choice LOG_LEVELS[] = {{"quiet", PR_LOG_QUIET, 0}, {"error", PR_LOG_ERROR, 0},
                                       {"info", PR_LOG_INFO, 0},   {"debug", PR_LOG_DEBUG, 0},
                                       {NULL, 0, 0}};
static const pr_choice SPEEDS[] = {{"auto", PR_SPEED_AUTO, 0},
                                   {"instructions", PR_SPEED_INSTRUCTIONS, 0},
                                   {"cputime", PR_SPEED_CPUTIME, 0},
                                   {"schedstat", PR_SPEED_SCHEDSTAT, 0},
                                   {NULL, 0, 0}};

#define OFF(f) offsetof(pr_config, f)
/* Table order is parse order: defaults first (all of them), then the given
 * values; PINRT_RESOURCES comes before the methods that override it, and
 * PINRT_TRACE before PINRT_TRACE_FORMAT. */
const pr_option pr_options[] = {
    {"enable", "PINRT_ENABLE", PR_T_BOOL, "1", NULL, 0, 0, 0, 0, BOOL_NAMES, OFF(enabled), NULL, NULL, 0, NULL,
     "0 turns the runtime off silently (nothing else is checked)"},
    {"period", "PINRT_PERIOD", PR_T_REAL, "0.2", NULL, 0.001, 3600, 0, 0, NULL, OFF(period), NULL, NULL, 0, NULL,
     "seconds between epochs"},
    {"objective", "PINRT_OBJECTIVE", PR_T_CHOICE, "O2", NULL, 0, 0, 0, 0, OBJECTIVES, OFF(lp.objective), NULL,
     NULL, 0, NULL, "`O1` mean speed, `O2` mean speed − γ·imbalance"},
    {"gamma", "PINRT_GAMMA", PR_T_REAL, "0.04", NULL, 0, 1e6, 0, 0, NULL, OFF(lp.gamma), NULL, NULL, 0, NULL,
     "γ of O2; the penalty uses speeds normalised by the largest speed seen, so γ is unit-free"},
    {"utility", "PINRT_UTILITY", PR_T_CHOICE, "shared", NULL, 0, 0, 0, 0, UTILITIES, OFF(lp.utility), NULL, NULL,
     0, NULL,
     "`shared`: every thread's utility is the objective (identical interest, the papers' default); `own`: the "
     "thread's own term"},
    {"resources", "PINRT_RESOURCES", PR_T_CUSTOM, NULL, "—", 0, 0, 0, 0, NULL, 0, set_resources, NULL, 0,
     "NUMA_BANDWIDTH, NUMA_MEMORY (comma list)",
     "the papers' names: `NUMA_BANDWIDTH` (domain level on), `NUMA_MEMORY` (stack binding on)"},
    {"child-resources", "PINRT_CHILD_RESOURCES", PR_T_CHOICE, NULL, "—", 0, 0, 0, 0, CHILD_RESOURCES,
     OFF(lp.core_rl), NULL, NULL, 0, NULL, "the papers' names: `CPU_BANDWIDTH` (core level on) or `NULL`"},
    {"domain-method", "PINRT_DOMAIN_METHOD", PR_T_CHOICE, "AL", NULL, 0, 0, 0, 0, DOMAIN_METHODS,
     OFF(lp.domain_al), NULL, NULL, 0, NULL, "domain level: `AL`, or `NULL` (all allowed CPUs form one flat domain)"},
    {"opt-methods", "PINRT_OPT_METHODS", PR_T_CHOICE, NULL, "—", 0, 0, 0, 0, DOMAIN_METHODS, OFF(lp.domain_al),
     NULL, "PINRT_DOMAIN_METHOD", 0, NULL, "alias of `PINRT_DOMAIN_METHOD` (the papers' `OPT_METHODS`)"},
    {"core-method", "PINRT_CORE_METHOD", PR_T_CHOICE, "RL", NULL, 0, 0, 0, 0, CORE_METHODS, OFF(lp.core_rl), NULL,
     NULL, 0, NULL, "core level: `RL`, or `NULL` (a thread may use all CPUs of its domain; the OS balances inside)"},
    {"child-opt-methods", "PINRT_CHILD_OPT_METHODS", PR_T_CHOICE, NULL, "—", 0, 0, 0, 0, CORE_METHODS,
     OFF(lp.core_rl), NULL, "PINRT_CORE_METHOD", 0, NULL,
     "alias of `PINRT_CORE_METHOD` (the papers' `CHILD_OPT_METHODS`)"},
    {"eps", "PINRT_EPS", PR_T_REAL, "0.3", NULL, 0, 1, 1, 0, NULL, OFF(lp.eps), NULL, NULL, 0, NULL,
     "RL step ε (the step ε·u/ū is capped at 1 so x stays in the simplex)"},
    {"nu", "PINRT_NU", PR_T_REAL, "0.05", NULL, 0, 1, 1, 0, NULL, OFF(lp.nu), NULL, NULL, 0, NULL,
     "RL running-average rate ν of ū"},
    {"lambda", "PINRT_LAMBDA", PR_T_REAL, "0.02", NULL, 0, 1, 0, 0, NULL, OFF(lp.lambda), NULL, NULL, 0, NULL,
     "RL perturbation λ: σ = (1−λ)x + λ/|A|"},
    {"eps-a", "PINRT_EPS_A", PR_T_REAL, "0.5", NULL, 0, 1, 1, 0, NULL, OFF(lp.eps_a), NULL, NULL, 0, NULL,
     "AL running-average rate ε_a"},
    {"lambda-a", "PINRT_LAMBDA_A", PR_T_REAL, "0.05", NULL, 0, 1, 0, 0, NULL, OFF(lp.lambda_a), NULL, NULL, 0,
     NULL, "AL experimentation probability λ_a"},
    {"eta", "PINRT_ETA", PR_T_REAL, "1.25", NULL, 1, 1e6, 1, 0, NULL, OFF(lp.eta), NULL, NULL, 0, NULL,
     "AL benchmark ratio η"},
    {"numa-every", "PINRT_NUMA_EVERY", PR_T_INT, "5", NULL, 1, 1000000, 0, 0, NULL, OFF(lp.numa_every), NULL, NULL,
     0, NULL, "epochs between domain decisions"},
    {"group", "PINRT_GROUP", PR_T_INT, "1", NULL, 1, PR_MAX_CPUS, 0, 0, NULL, OFF(group), NULL, NULL, 0, NULL,
     "g: pin to groups of g consecutive CPUs of a domain instead of one CPU"},
    {"max-threads", "PINRT_MAX_THREADS", PR_T_INT, "1024", NULL, 1, 65536, 0, 0, NULL, OFF(max_threads), NULL,
     NULL, 0, NULL, "threads followed at most"},
    {"pin-main", "PINRT_PIN_MAIN", PR_T_BOOL, "0", NULL, 0, 0, 0, 0, BOOL_NAMES, OFF(pin_main), NULL, NULL, 0,
     NULL, "also pin the main thread (its mask is what `exec`ed children inherit)"},
    {"seed", "PINRT_SEED", PR_T_UINT64, "1", NULL, 0, 0, 0, 0, NULL, OFF(lp.seed), NULL, NULL, 0,
     "integer ≥ 0", "seed of the learner's PRNG"},
    {"zeta", "PINRT_ZETA", PR_T_REAL, "0.5", NULL, 0, 1, 0, 0, NULL, OFF(zeta), zeta_on, NULL, 1, NULL,
     "setting ζ turns stack binding on: bind the stacks of the threads on a domain holding more than ζ of the "
     "threads (`mbind`, mask `1UL << node`, `MPOL_MF_MOVE`), once per change; the default serves "
     "`PINRT_RESOURCES=NUMA_MEMORY`"},
    {"mempolicy", "PINRT_MEMPOLICY", PR_T_CHOICE, "preferred", NULL, 0, 0, 0, 0, MEMPOLICIES, OFF(mem_policy),
     NULL, NULL, 0, NULL, "policy of the stack binding"},
    {"topology", "PINRT_TOPOLOGY", PR_T_CUSTOM, NULL, "sysfs", 0, 0, 0, 0, NULL, 0, set_topology, NULL, 1,
     "dom:cpulist;dom:cpulist", "force domains, e.g. `0:0;1:1`"},
    {"cpus", "PINRT_CPUS", PR_T_CUSTOM, NULL, "all allowed", 0, 0, 0, 0, NULL, 0, set_cpus, NULL, 1, "cpulist",
     "use only these CPUs (must lie inside the allowed set)"},
    {"trace", "PINRT_TRACE", PR_T_CUSTOM, NULL, "—", 0, 0, 0, 0, NULL, 0, set_trace, NULL, 1, "path",
     "trace file; `.json`/`.jsonl` → JSON lines, else CSV"},
    {"trace-format", "PINRT_TRACE_FORMAT", PR_T_CHOICE, NULL, "from name", 0, 0, 0, 0, TRACE_FORMATS,
     OFF(trace_fmt), NULL, NULL, 0, NULL, "trace format"},
    {"summary", "PINRT_SUMMARY", PR_T_CUSTOM, "stderr", NULL, 0, 0, 0, 0, NULL, 0, set_summary, NULL, 0,
     "stderr, none, or a path", "exit summary: on stderr, none, or appended to a file"},
    {"log", "PINRT_LOG", PR_T_CHOICE, "error", NULL, 0, 0, 0, 0, LOG_LEVELS, OFF(log), NULL, NULL, 0, NULL,
     "log level (all on stderr, one line each)"},
    {"speed", "PINRT_SPEED", PR_T_CHOICE, "auto", NULL, 0, 0, 0, 0, SPEEDS, OFF(speed), NULL, NULL, 0, NULL,
     "`auto` (instructions if a hardware counter opens, else CPU time), `instructions`, `cputime`, `schedstat`"},
};
const size_t pr_noptions = sizeof pr_options / sizeof pr_options[0];

const pr_option *pr_option_by_env(const char *env)
{
    for (size_t i = 0; i < pr_noptions; i++)
        if (!strcmp(pr_options[i].env, env))
            return &pr_options[i];
    return NULL;
}

const pr_option *pr_option_by_flag(const char *flag)
{
    for (size_t i = 0; i < pr_noptions; i++)
        if (!strcmp(pr_options[i].flag, flag))
            return &pr_options[i];
    return NULL;
}

const char *pr_option_default(const pr_option *o) { return o->def ? o->def : o->def_doc; }

/* "A, B or C" of the listed choices. */
static void choice_list(const pr_choice *ch, const char *last_sep, char *buf, size_t len)
{
    int n = 0, k = 0;
    for (const pr_choice *x = ch; x->name; x++)
        n += !x->hidden;
    size_t off = 0;
    buf[0] = '\0';
    for (const pr_choice *x = ch; x->name && off < len; x++) {
        if (x->hidden)
            continue;
        off += (size_t)snprintf(buf + off, len - off, "%s%s", k == 0 ? "" : k == n - 1 ? last_sep : ", ", x->name);
        k++;
    }
}

void pr_option_range(const pr_option *o, char *buf, size_t len)
{
    switch (o->type) {
    case PR_T_REAL:
        snprintf(buf, len, "%s%g, %g%s", o->lo_open ? "(" : "[", o->lo, o->hi, o->hi_open ? ")" : "]");
        break;
    case PR_T_INT:
        snprintf(buf, len, "[%ld, %ld]", (long)o->lo, (long)o->hi);
        break;
    case PR_T_BOOL:
    case PR_T_CHOICE:
        choice_list(o->choices, ", ", buf, len);
        break;
    default:
        snprintf(buf, len, "%s", o->range_doc ? o->range_doc : "");
    }
}

/* Sets one option from a value (v not NULL). */
static int set_option(pr_config *c, const pr_option *o, const char *name, const char *v, int is_default, char *err,
                      size_t elen)
{
    char range[256];
    char *end;
    errno = 0;
    switch (o->type) {
    case PR_T_BOOL:
        if (is_on(v) || is_off(v)) {
            *FIELD(c, o, int) = is_on(v);
            break;
        }
        errf(err, elen, "%s='%s' must be 0 or 1", name, v);
        return -1;
    case PR_T_REAL: {
        double x = strtod(v, &end);
        if (end == v || *end != '\0' || errno || !isfinite(x) || x < o->lo || (o->lo_open && x == o->lo) ||
            x > o->hi || (o->hi_open && x == o->hi)) {
            pr_option_range(o, range, sizeof range);
            errf(err, elen, "%s='%s' is not a number in %s", name, v, range);
            return -1;
        }
        *FIELD(c, o, double) = x;
        break;
    }
    case PR_T_INT: {
        long x = strtol(v, &end, 10);
        if (end == v || *end != '\0' || errno || x < o->lo || x > o->hi) {
            pr_option_range(o, range, sizeof range);
            errf(err, elen, "%s='%s' is not an integer in %s", name, v, range);
            return -1;
        }
        *FIELD(c, o, int) = (int)x;
        break;
    }
    case PR_T_UINT64: {
        unsigned long long x = strtoull(v, &end, 0);
        if (end == v || *end || errno || v[0] == '-') {
            errf(err, elen, "%s='%s' is not a non-negative integer", name, v);
            return -1;
        }
        *FIELD(c, o, uint64_t) = x;
        break;
    }
    case PR_T_CHOICE: {
        const pr_choice *x = o->choices;
        while (x->name && strcasecmp(x->name, v))
            x++;
        if (!x->name) {
            choice_list(o->choices, " or ", range, sizeof range);
            errf(err, elen, "%s='%s' is unknown (expected %s)", name, v, range);
            return -1;
        }
        *FIELD(c, o, int) = x->value;
        break;
    }
    default:
        break;
    }
    return o->set ? o->set(c, o, v, is_default, err, elen) : 0;
}

int pr_config_parse(pr_config *c, const char *(*get)(const char *, void *), void *ctx, char *err, size_t elen)
{
    memset(c, 0, sizeof *c);
    if (elen)
        err[0] = '\0';
    for (size_t i = 0; i < pr_noptions; i++)
        if (pr_options[i].def && set_option(c, &pr_options[i], pr_options[i].env, pr_options[i].def, 1, err, elen))
            return -1; /* a bad default in the table: caught by the tests */
    for (size_t i = 0; i < pr_noptions; i++) {
        const pr_option *o = &pr_options[i];
        if (o->alias_of && get(o->alias_of, ctx))
            continue; /* the option itself wins over its alias */
        const char *v = get(o->env, ctx);
        if (!v || (o->empty_unset && !*v))
            continue;
        if (set_option(c, o, o->env, v, 0, err, elen))
            return -1;
        if (!c->enabled)
            return 0; /* PINRT_ENABLE=0: nothing else matters */
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
