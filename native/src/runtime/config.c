#include "config.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/errmsg.h"
#include "common/mempolicy.h"
#include "common/text.h"

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
    if (cm_copy(buf, sizeof buf, v)) {
        cm_errf(err, elen, "PINRT_TOPOLOGY is too long");
        return -1;
    }
    int seen[PR_MAX_DOMAINS] = {0}, n = 0, maxd = -1;
    cm_cpuset all;
    cm_set_zero(&all);
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
            cm_errf(err, elen, "PINRT_TOPOLOGY='%s' is not of the form dom:cpulist;dom:cpulist (bad part '%s')", v,
                    tok);
            return -1;
        }
        cm_cpuset s;
        if (cm_parse_cpulist(colon + 1, &s)) {
            cm_errf(err, elen, "PINRT_TOPOLOGY='%s': bad cpulist '%s'", v, colon + 1);
            return -1;
        }
        for (int i = 0; i < CM_MAX_CPUS / 64; i++) {
            if (all.w[i] & s.w[i]) {
                cm_errf(err, elen, "PINRT_TOPOLOGY='%s': a CPU is in two domains", v);
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
        cm_errf(err, elen, "PINRT_TOPOLOGY='%s': domains must be numbered 0..n-1", v);
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
            cm_errf(err, elen, "PINRT_RESOURCES: unknown resource '%s' (expected NUMA_BANDWIDTH, NUMA_MEMORY)", t);
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
    if (cm_parse_cpulist(v, &c->cpus)) {
        cm_errf(err, elen, "PINRT_CPUS='%s' is not a cpulist (e.g. 0-3,6)", v);
        return -1;
    }
    c->has_cpus = 1;
    return 0;
}

static int set_trace(pr_config *c, const pr_option *o, const char *v, int is_default, char *err, size_t elen)
{
    (void)o, (void)is_default;
    if (cm_copy(c->trace, sizeof c->trace, v)) {
        cm_errf(err, elen, "PINRT_TRACE path is too long");
        return -1;
    }
    size_t n = strlen(v);
    if ((n > 6 && !strcmp(v + n - 6, ".jsonl")) || (n > 5 && !strcmp(v + n - 5, ".json")))
        c->trace_fmt = PR_TRACE_JSON;
    return 0;
}

static int set_summary(pr_config *c, const pr_option *o, const char *v, int is_default, char *err, size_t elen)
{
    (void)o, (void)is_default;
    if (strlen(v) >= sizeof c->summary) {
        cm_errf(err, elen, "PINRT_SUMMARY path is too long");
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
/* The stack binding's policies: a subset of the one memory-policy table. */
static const pr_choice MEMPOLICIES[] = {
    {CM_MPOL_NAME_PREFERRED, CM_MPOL_PREFERRED, 0}, {CM_MPOL_NAME_BIND, CM_MPOL_BIND, 0}, {NULL, 0, 0}};
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
    {.flag = "enable", .env = "PINRT_ENABLE", .type = PR_T_BOOL, .def = "1", .choices = BOOL_NAMES,
     .off = OFF(enabled), .help = "0 turns the runtime off silently (nothing else is checked)"},
    {.flag = "period", .env = "PINRT_PERIOD", .type = PR_T_REAL, .def = "0.2", .lo = 0.001, .hi = 3600,
     .off = OFF(period), .help = "seconds between epochs"},
    {.flag = "objective", .env = "PINRT_OBJECTIVE", .type = PR_T_CHOICE, .def = "O2", .choices = OBJECTIVES,
     .off = OFF(lp.objective), .help = "`O1` mean speed, `O2` mean speed − γ·imbalance"},
    {.flag = "gamma", .env = "PINRT_GAMMA", .type = PR_T_REAL, .def = "0.04", .hi = 1e6, .off = OFF(lp.gamma),
     .help = "γ of O2; the penalty uses speeds normalised by the largest speed seen, so γ is unit-free"},
    {.flag = "utility", .env = "PINRT_UTILITY", .type = PR_T_CHOICE, .def = "shared", .choices = UTILITIES,
     .off = OFF(lp.utility),
     .help = "`shared`: every thread's utility is the objective (identical interest, the papers' default); `own`: "
             "the thread's own term"},
    {.flag = "resources", .env = "PINRT_RESOURCES", .type = PR_T_CUSTOM, .def_doc = "—", .set = set_resources,
     .range_doc = "NUMA_BANDWIDTH, NUMA_MEMORY (comma list)",
     .help = "the papers' names: `NUMA_BANDWIDTH` (domain level on), `NUMA_MEMORY` (stack binding on)"},
    {.flag = "child-resources", .env = "PINRT_CHILD_RESOURCES", .type = PR_T_CHOICE, .def_doc = "—",
     .choices = CHILD_RESOURCES, .off = OFF(lp.core_rl),
     .help = "the papers' names: `CPU_BANDWIDTH` (core level on) or `NULL`"},
    {.flag = "domain-method", .env = "PINRT_DOMAIN_METHOD", .type = PR_T_CHOICE, .def = "AL",
     .choices = DOMAIN_METHODS, .off = OFF(lp.domain_al),
     .help = "domain level: `AL`, or `NULL` (all allowed CPUs form one flat domain)"},
    {.flag = "opt-methods", .env = "PINRT_OPT_METHODS", .type = PR_T_CHOICE, .def_doc = "—",
     .choices = DOMAIN_METHODS, .off = OFF(lp.domain_al), .alias_of = "PINRT_DOMAIN_METHOD",
     .help = "alias of `PINRT_DOMAIN_METHOD` (the papers' `OPT_METHODS`)"},
    {.flag = "core-method", .env = "PINRT_CORE_METHOD", .type = PR_T_CHOICE, .def = "RL", .choices = CORE_METHODS,
     .off = OFF(lp.core_rl),
     .help = "core level: `RL`, or `NULL` (a thread may use all CPUs of its domain; the OS balances inside)"},
    {.flag = "child-opt-methods", .env = "PINRT_CHILD_OPT_METHODS", .type = PR_T_CHOICE, .def_doc = "—",
     .choices = CORE_METHODS, .off = OFF(lp.core_rl), .alias_of = "PINRT_CORE_METHOD",
     .help = "alias of `PINRT_CORE_METHOD` (the papers' `CHILD_OPT_METHODS`)"},
    {.flag = "eps", .env = "PINRT_EPS", .type = PR_T_REAL, .def = "0.3", .hi = 1, .lo_open = 1, .off = OFF(lp.eps),
     .help = "RL step ε (the step ε·u/ū is capped at 1 so x stays in the simplex)"},
    {.flag = "nu", .env = "PINRT_NU", .type = PR_T_REAL, .def = "0.05", .hi = 1, .lo_open = 1, .off = OFF(lp.nu),
     .help = "RL running-average rate ν of ū"},
    {.flag = "lambda", .env = "PINRT_LAMBDA", .type = PR_T_REAL, .def = "0.02", .hi = 1, .off = OFF(lp.lambda),
     .help = "RL perturbation λ: σ = (1−λ)x + λ/|A|"},
    {.flag = "eps-a", .env = "PINRT_EPS_A", .type = PR_T_REAL, .def = "0.5", .hi = 1, .lo_open = 1,
     .off = OFF(lp.eps_a), .help = "AL running-average rate ε_a"},
    {.flag = "lambda-a", .env = "PINRT_LAMBDA_A", .type = PR_T_REAL, .def = "0.05", .hi = 1, .off = OFF(lp.lambda_a),
     .help = "AL experimentation probability λ_a"},
    {.flag = "eta", .env = "PINRT_ETA", .type = PR_T_REAL, .def = "1.25", .lo = 1, .hi = 1e6, .lo_open = 1,
     .off = OFF(lp.eta), .help = "AL benchmark ratio η"},
    {.flag = "numa-every", .env = "PINRT_NUMA_EVERY", .type = PR_T_INT, .def = "5", .lo = 1, .hi = 1000000,
     .off = OFF(lp.numa_every), .help = "epochs between domain decisions"},
    {.flag = "group", .env = "PINRT_GROUP", .type = PR_T_INT, .def = "1", .lo = 1, .hi = CM_MAX_CPUS,
     .off = OFF(group), .help = "g: pin to groups of g consecutive CPUs of a domain instead of one CPU"},
    {.flag = "max-threads", .env = "PINRT_MAX_THREADS", .type = PR_T_INT, .def = "1024", .lo = 1, .hi = 65536,
     .off = OFF(max_threads), .help = "threads followed at most"},
    {.flag = "pin-main", .env = "PINRT_PIN_MAIN", .type = PR_T_BOOL, .def = "0", .choices = BOOL_NAMES,
     .off = OFF(pin_main), .help = "also pin the main thread (its mask is what `exec`ed children inherit)"},
    {.flag = "seed", .env = "PINRT_SEED", .type = PR_T_UINT64, .def = "1", .off = OFF(lp.seed),
     .range_doc = "integer ≥ 0", .help = "seed of the learner's PRNG"},
    {.flag = "zeta", .env = "PINRT_ZETA", .type = PR_T_REAL, .def = "0.5", .hi = 1, .off = OFF(zeta), .set = zeta_on,
     .empty_unset = 1,
     .help = "setting ζ turns stack binding on: bind the stacks of the threads on a domain holding more than ζ of "
             "the threads (`mbind`, mask `1UL << node`, `MPOL_MF_MOVE`), once per change; the default serves "
             "`PINRT_RESOURCES=NUMA_MEMORY`"},
    {.flag = "mempolicy", .env = "PINRT_MEMPOLICY", .type = PR_T_CHOICE, .def = "preferred", .choices = MEMPOLICIES,
     .off = OFF(mem_policy), .help = "policy of the stack binding"},
    {.flag = "topology", .env = "PINRT_TOPOLOGY", .type = PR_T_CUSTOM, .def_doc = "sysfs", .set = set_topology,
     .empty_unset = 1, .range_doc = "dom:cpulist;dom:cpulist", .help = "force domains, e.g. `0:0;1:1`"},
    {.flag = "cpus", .env = "PINRT_CPUS", .type = PR_T_CUSTOM, .def_doc = "all allowed", .set = set_cpus,
     .empty_unset = 1, .range_doc = "cpulist", .help = "use only these CPUs (must lie inside the allowed set)"},
    {.flag = "trace", .env = "PINRT_TRACE", .type = PR_T_CUSTOM, .def_doc = "—", .set = set_trace, .empty_unset = 1,
     .range_doc = "path", .help = "trace file; `.json`/`.jsonl` → JSON lines, else CSV"},
    {.flag = "trace-format", .env = "PINRT_TRACE_FORMAT", .type = PR_T_CHOICE, .def_doc = "from name",
     .choices = TRACE_FORMATS, .off = OFF(trace_fmt), .help = "trace format"},
    {.flag = "summary", .env = "PINRT_SUMMARY", .type = PR_T_CUSTOM, .def = "stderr", .set = set_summary,
     .range_doc = "stderr, none, or a path", .help = "exit summary: on stderr, none, or appended to a file"},
    {.flag = "log", .env = "PINRT_LOG", .type = PR_T_CHOICE, .def = "error", .choices = LOG_LEVELS, .off = OFF(log),
     .help = "log level (all on stderr, one line each)"},
    {.flag = "speed", .env = "PINRT_SPEED", .type = PR_T_CHOICE, .def = "auto", .choices = SPEEDS, .off = OFF(speed),
     .help = "`auto` (instructions if a hardware counter opens, else CPU time), `instructions`, `cputime`, "
             "`schedstat`"},
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
        cm_errf(err, elen, "%s='%s' must be 0 or 1", name, v);
        return -1;
    case PR_T_REAL: {
        double x = strtod(v, &end);
        if (end == v || *end != '\0' || errno || !isfinite(x) || x < o->lo || (o->lo_open && x == o->lo) ||
            x > o->hi || (o->hi_open && x == o->hi)) {
            pr_option_range(o, range, sizeof range);
            cm_errf(err, elen, "%s='%s' is not a number in %s", name, v, range);
            return -1;
        }
        *FIELD(c, o, double) = x;
        break;
    }
    case PR_T_INT: {
        long x = strtol(v, &end, 10);
        if (end == v || *end != '\0' || errno || x < o->lo || x > o->hi) {
            pr_option_range(o, range, sizeof range);
            cm_errf(err, elen, "%s='%s' is not an integer in %s", name, v, range);
            return -1;
        }
        *FIELD(c, o, int) = (int)x;
        break;
    }
    case PR_T_UINT64: {
        unsigned long long x = strtoull(v, &end, 0);
        if (end == v || *end || errno || v[0] == '-') {
            cm_errf(err, elen, "%s='%s' is not a non-negative integer", name, v);
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
            cm_errf(err, elen, "%s='%s' is unknown (expected %s)", name, v, range);
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

static int first_outside(const cm_cpuset *s, const cm_cpuset *allowed)
{
    for (int c = 0; c < CM_MAX_CPUS; c++)
        if (cm_set_has(s, c) && !cm_set_has(allowed, c))
            return c;
    return -1;
}

int pr_config_check_cpus(const pr_config *c, const cm_cpuset *allowed, char *err, size_t elen)
{
    char al[256];
    cm_format_cpulist(allowed, al, sizeof al);
    int bad;
    if (c->has_cpus && (bad = first_outside(&c->cpus, allowed)) >= 0) {
        cm_errf(err, elen, "PINRT_CPUS: CPU %d is outside the allowed set %s", bad, al);
        return -1;
    }
    for (int d = 0; c->has_topology && d < c->ndomains; d++) {
        if ((bad = first_outside(&c->dom_cpus[d], allowed)) >= 0) {
            cm_errf(err, elen, "PINRT_TOPOLOGY: CPU %d of domain %d is outside the allowed set %s", bad, d, al);
            return -1;
        }
    }
    return 0;
}
