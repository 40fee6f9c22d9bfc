#include "opts.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cs_help(const char *usage, const cs_opt *table, int nopts)
{
    printf("usage: %s\n\noptions:\n", usage);
    for (int i = 0; i < nopts; i++) {
        const cs_opt *o = &table[i];
        const char *arg = o->kind == CS_DOUBLE ? " X" : o->kind == CS_LONG ? " N" : o->kind == CS_STRING ? " S" : "";
        char left[64];
        snprintf(left, sizeof left, "--%s%s", o->name, arg);
        printf("  %-22s %s\n", left, o->help);
    }
    printf("  %-22s %s\n", "--help", "print this help and exit");
}

static const cs_opt *find(const cs_opt *table, int nopts, const char *name, size_t len)
{
    for (int i = 0; i < nopts; i++)
        if (strlen(table[i].name) == len && strncmp(table[i].name, name, len) == 0)
            return &table[i];
    return NULL;
}

static int set_value(const cs_opt *o, const char *prog, const char *value)
{
    char *end = NULL;
    errno = 0;
    if (o->kind == CS_STRING) {
        if (!*value) {
            fprintf(stderr, "%s: --%s needs a non-empty value\n", prog, o->name);
            return CS_BAD;
        }
        *(const char **)o->dst = value;
        return CS_OK;
    }
    if (o->kind == CS_DOUBLE) {
        double v = strtod(value, &end);
        if (errno || end == value || *end || !isfinite(v) || v < o->min || v > o->max) {
            fprintf(stderr, "%s: --%s takes a number from %g to %g, not '%s'\n", prog, o->name, o->min, o->max, value);
            return CS_BAD;
        }
        *(double *)o->dst = v;
        return CS_OK;
    }
    long v = strtol(value, &end, 10);
    if (errno || end == value || *end || (double)v < o->min || (double)v > o->max) {
        fprintf(stderr, "%s: --%s takes a whole number from %.0f to %.0f, not '%s'\n", prog, o->name, o->min, o->max, value);
        return CS_BAD;
    }
    *(long *)o->dst = v;
    return CS_OK;
}

int cs_parse(int argc, char **argv, const cs_opt *table, int nopts, const char *usage,
             const char **pos, int max_pos, int *npos)
{
    const char *prog = argc > 0 ? argv[0] : "?";
    const char *slash = strrchr(prog, '/');
    prog = slash ? slash + 1 : prog;
    *npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
            if (*npos >= max_pos) {
                fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", prog, a);
                return CS_BAD;
            }
            pos[(*npos)++] = a;
            continue;
        }
        const char *name = a + 2;
        if (strcmp(name, "help") == 0) {
            cs_help(usage, table, nopts);
            return CS_HELP;
        }
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const cs_opt *o = find(table, nopts, name, len);
        if (!o) {
            fprintf(stderr, "%s: unknown option '%s' (see --help)\n", prog, a);
            return CS_BAD;
        }
        if (o->kind == CS_FLAG) {
            if (eq) {
                fprintf(stderr, "%s: --%s takes no value\n", prog, o->name);
                return CS_BAD;
            }
            *(int *)o->dst = 1;
            continue;
        }
        const char *value = eq ? eq + 1 : NULL;
        if (!value) {
            if (i + 1 >= argc) {
                fprintf(stderr, "%s: --%s needs a value (see --help)\n", prog, o->name);
                return CS_BAD;
            }
            value = argv[++i];
        }
        if (set_value(o, prog, value) != CS_OK)
            return CS_BAD;
    }
    return CS_OK;
}
