/* PINRT_* configuration: parsing and validation, pure (no syscalls), so
 * that it is unit-tested and shared by the runtime and its tests. */
#ifndef PINRT_CONFIG_H
#define PINRT_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "common/cpuset.h"
#include "learner.h"

#define PR_MAX_DOMAINS 64

enum { PR_LOG_QUIET = 0, PR_LOG_ERROR = 1, PR_LOG_INFO = 2, PR_LOG_DEBUG = 3 };
enum { PR_SPEED_AUTO = 0, PR_SPEED_INSTRUCTIONS, PR_SPEED_CPUTIME, PR_SPEED_SCHEDSTAT };
enum { PR_TRACE_CSV = 0, PR_TRACE_JSON = 1 };

typedef struct {
    int enabled;
    double period;        /* seconds */
    pl_params lp;         /* learner parameters */
    int mem_on;           /* NUMA_MEMORY resource: bind stacks */
    double zeta;
    int mem_policy;       /* CM_MPOL_PREFERRED or CM_MPOL_BIND (common/mempolicy.h) */
    int group;            /* unit = group of this many CPUs */
    int has_topology;
    int ndomains;
    cm_cpuset dom_cpus[PR_MAX_DOMAINS];
    int has_cpus;
    cm_cpuset cpus;
    char trace[512];
    int trace_fmt;
    char summary[512];    /* "" = stderr, "none" = off, else a file */
    int log;
    int speed;
    int max_threads;
    int pin_main;         /* also pin the main thread */
} pr_config;

/* The one table of runtime options: the runtime parses PINRT_* from it,
 * pinrt-run maps --flag onto it and prints its help from it, the SPANK
 * plugin validates a placement's PINRT_* lines against it, and the README's
 * table is generated from it (pinrt-run --help-markdown). */
enum {
    PR_T_BOOL,   /* int field: 1/yes/on/true or 0/no/off/false */
    PR_T_REAL,   /* double field in [lo, hi] (open ends when asked) */
    PR_T_INT,    /* int field in [lo, hi] */
    PR_T_UINT64, /* uint64_t field, any non-negative integer */
    PR_T_CHOICE, /* int field set from choices[] */
    PR_T_CUSTOM, /* set() decides; range_doc says what is accepted */
};

typedef struct {
    const char *name;
    int value;
    int hidden; /* accepted, not listed (a synonym) */
} pr_choice;

typedef struct pr_option pr_option;
struct pr_option {
    const char *flag;       /* pinrt-run --flag */
    const char *env;        /* PINRT_* variable */
    int type;               /* PR_T_* */
    const char *def;        /* default, parsed like a value; NULL: none */
    const char *def_doc;    /* shown instead of def when def is NULL */
    double lo, hi;          /* range of PR_T_REAL / PR_T_INT */
    int lo_open, hi_open;
    const pr_choice *choices; /* PR_T_CHOICE, ended by {NULL} */
    size_t off;             /* field of pr_config (not PR_T_CUSTOM) */
    /* PR_T_CUSTOM, and a side effect for other types (called after the
     * field is set). is_default: applying the table's default. */
    int (*set)(pr_config *c, const pr_option *o, const char *v, int is_default, char *err, size_t elen);
    const char *alias_of;   /* env of the option this one aliases (used when that one is unset) */
    int empty_unset;        /* an empty value counts as unset */
    const char *range_doc;  /* accepted values of PR_T_CUSTOM / PR_T_UINT64 */
    const char *help;
};

extern const pr_option pr_options[];
extern const size_t pr_noptions;
/* The option of a PINRT_* variable or of a pinrt-run flag; NULL if none. */
const pr_option *pr_option_by_env(const char *env);
const pr_option *pr_option_by_flag(const char *flag);
/* The accepted values of an option as one phrase ("O1, O2", "[0, 1]"). */
void pr_option_range(const pr_option *o, char *buf, size_t len);
/* The default as shown ("0.2", "—"). */
const char *pr_option_default(const pr_option *o);

/* get(name, ctx) returns the value of a variable or NULL. On error returns -1
 * and writes one line (no newline) into err. */
int pr_config_parse(pr_config *c, const char *(*get)(const char *, void *), void *ctx, char *err,
                    size_t errlen);

/* Checks the configured CPUs (PINRT_CPUS, PINRT_TOPOLOGY) against the
 * allowed set. Returns 0 or -1 with a message. */
int pr_config_check_cpus(const pr_config *c, const cm_cpuset *allowed, char *err, size_t errlen);

#endif
