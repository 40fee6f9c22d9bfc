/* The placement file: key=value lines, # comments, each key at most once.
 * The keys are named (enum placement_key); the PINRT_* lines are checked
 * against the runtime's own option table, so the plugin accepts exactly what
 * the runtime does. */
#include "placement.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/errmsg.h"
#include "common/text.h"

enum placement_key {
    KEY_VERSION,
    KEY_CPUS,
    KEY_MEMPOLICY,
    KEY_MEMS,
    KEY_RESCTRL_GROUP,
    KEY_L3_SCHEMATA,
    KEY_MB_SCHEMATA,
    KEY_PINRT,
    KEY_COUNT
};
static const char *const KEY_NAMES[KEY_COUNT] = {
    [KEY_VERSION] = "version",
    [KEY_CPUS] = "cpus",
    [KEY_MEMPOLICY] = "mempolicy",
    [KEY_MEMS] = "mems",
    [KEY_RESCTRL_GROUP] = "resctrl_group",
    [KEY_L3_SCHEMATA] = "l3_schemata",
    [KEY_MB_SCHEMATA] = "mb_schemata",
    [KEY_PINRT] = "pinrt",
};
#define PINRT_PREFIX "PINRT_"

/* The policies mempolicy= accepts, in the order its message lists them. */
static const cm_mpol POLICIES[] = {CM_MPOL_LOCAL, CM_MPOL_BIND, CM_MPOL_INTERLEAVE, CM_MPOL_DEFAULT};
enum { NPOLICIES = sizeof POLICIES / sizeof POLICIES[0] };

/* A resctrl group name: one path component of [A-Za-z0-9_.-], not . or .. */
static int good_group(const char *g)
{
    if (!*g || !strcmp(g, ".") || !strcmp(g, ".."))
        return 0;
    for (const char *s = g; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' && *s != '.')
            return 0;
    return 1;
}

/* "L3:0=7f;1=7f" (hex masks) or "MB:0=50;1=50" (decimal percent / MBps). */
static int good_schemata(const char *s, const char *res, int hex)
{
    size_t rl = strlen(res);
    if (strncmp(s, res, rl) || s[rl] != ':')
        return 0;
    const char *p = s + rl + 1;
    for (;;) {
        if (!isdigit((unsigned char)*p))
            return 0;
        while (isdigit((unsigned char)*p))
            p++;
        if (*p++ != '=')
            return 0;
        if (!(hex ? isxdigit((unsigned char)*p) : isdigit((unsigned char)*p)))
            return 0;
        while (hex ? isxdigit((unsigned char)*p) : isdigit((unsigned char)*p))
            p++;
        if (!*p)
            return 1;
        if (*p++ != ';')
            return 0;
    }
}

/* The placement's PINRT_* lines as the runtime's configuration source. */
static const char *pinrt_get(const char *name, void *ctx)
{
    const cp_placement *p = ctx;
    for (int i = 0; i < p->npinrt; i++)
        if (!strcmp(p->pinrt_name[i], name))
            return p->pinrt_value[i];
    return NULL;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

/* The key named k; KEY_COUNT when there is none. */
static enum placement_key key_of(const char *k)
{
    enum placement_key key = 0;
    while (key < KEY_COUNT && strcmp(k, KEY_NAMES[key]))
        key++;
    return key;
}

/* A PINRT_* line: kept as given; its value is checked with all of them at the end. */
static int add_pinrt_line(cp_placement *p, const char *k, const char *v, int line, char *err, size_t elen)
{
    if (!pr_option_by_env(k)) {
        cm_errf(err, elen, "line %d: %s is not a runtime option (see pinrt-run --help)", line, k);
        return -1;
    }
    if (pinrt_get(k, p)) {
        cm_errf(err, elen, "line %d: %s given twice", line, k);
        return -1;
    }
    if (p->npinrt == CP_MAX_PINRT || cm_copy(p->pinrt_value[p->npinrt], sizeof p->pinrt_value[0], v)) {
        cm_errf(err, elen, "line %d: too many or too long PINRT_* lines", line);
        return -1;
    }
    strcpy(p->pinrt_name[p->npinrt++], k);
    return 0;
}

static int set_schemata(char *dst, size_t len, const char *k, const char *v, const char *res, int hex,
                        const char *example, int line, char *err, size_t elen)
{
    if (!good_schemata(v, res, hex) || cm_copy(dst, len, v)) {
        cm_errf(err, elen, "line %d: %s='%s' is not of the form %s", line, k, v, example);
        return -1;
    }
    return 0;
}

/* Sets one key; line is the 1-based line number for messages. */
static int set_key(cp_placement *p, const char *k, const char *v, int line, unsigned *seen, char *err, size_t elen)
{
    if (!strncmp(k, PINRT_PREFIX, strlen(PINRT_PREFIX)))
        return add_pinrt_line(p, k, v, line, err, elen);
    enum placement_key key = key_of(k);
    if (key == KEY_COUNT) {
        char keys[256];
        size_t off = 0;
        for (int i = 0; i < KEY_COUNT && off < sizeof keys; i++)
            off += (size_t)snprintf(keys + off, sizeof keys - off, "%s, ", KEY_NAMES[i]);
        cm_errf(err, elen, "line %d: unknown key '%s' (expected %s%s*)", line, k, keys, PINRT_PREFIX);
        return -1;
    }
    if (*seen & (1u << key)) {
        cm_errf(err, elen, "line %d: %s given twice", line, k);
        return -1;
    }
    *seen |= 1u << key;
    switch (key) {
    case KEY_VERSION:
        if (strcmp(v, "1")) {
            cm_errf(err, elen, "line %d: version=%s is not supported (expected 1)", line, v);
            return -1;
        }
        p->version = 1;
        return 0;
    case KEY_CPUS:
        if (cm_parse_cpulist(v, &p->cpus)) {
            cm_errf(err, elen, "line %d: cpus='%s' is not a cpulist (e.g. 0-3,8)", line, v);
            return -1;
        }
        p->has_cpus = 1;
        return 0;
    case KEY_MEMPOLICY: {
        int mode = cm_mpol_parse(v, POLICIES, NPOLICIES);
        if (mode < 0) {
            char names[128];
            cm_mpol_list(POLICIES, NPOLICIES, " or ", names, sizeof names);
            cm_errf(err, elen, "line %d: mempolicy='%s' is unknown (expected %s)", line, v, names);
            return -1;
        }
        p->mempolicy = mode;
        return 0;
    }
    case KEY_MEMS:
        if (!*v) /* "mems=" : no nodes named */
            return 0;
        if (cm_parse_cpulist(v, &p->mems)) {
            cm_errf(err, elen, "line %d: mems='%s' is not a list of NUMA nodes (e.g. 0,1)", line, v);
            return -1;
        }
        p->has_mems = 1;
        return 0;
    case KEY_RESCTRL_GROUP:
        if (!good_group(v) || cm_copy(p->resctrl_group, sizeof p->resctrl_group, v)) {
            cm_errf(err, elen, "line %d: resctrl_group='%s' is not a plain name of letters, digits, _ . -", line, v);
            return -1;
        }
        return 0;
    case KEY_L3_SCHEMATA:
        return set_schemata(p->l3_schemata, sizeof p->l3_schemata, k, v, "L3", 1, "L3:0=7f;1=7f", line, err, elen);
    case KEY_MB_SCHEMATA:
        return set_schemata(p->mb_schemata, sizeof p->mb_schemata, k, v, "MB", 0, "MB:0=50;1=50", line, err, elen);
    case KEY_PINRT:
        if (strcmp(v, "0") && strcmp(v, "1")) {
            cm_errf(err, elen, "line %d: pinrt='%s' must be 0 or 1", line, v);
            return -1;
        }
        p->pinrt = v[0] == '1';
        return 0;
    case KEY_COUNT: /* refused above */
        break;
    }
    return -1;
}

/* What no single line can decide: required and dependent keys. */
static int check_whole(cp_placement *p, char *err, size_t elen)
{
    if (p->version != 1) {
        cm_errf(err, elen, "no version=1 line");
        return -1;
    }
    /* mems= only means something to bind and interleave; with local or
     * default it is accepted and not used (a controller may always write it). */
    if (p->mempolicy != CM_MPOL_BIND && p->mempolicy != CM_MPOL_INTERLEAVE)
        p->has_mems = 0;
    else if (!p->has_mems) {
        cm_errf(err, elen, "mempolicy=bind or interleave needs mems=NODES");
        return -1;
    }
    if (!p->resctrl_group[0] && (p->l3_schemata[0] || p->mb_schemata[0])) {
        cm_errf(err, elen, "l3_schemata/mb_schemata need resctrl_group=NAME");
        return -1;
    }
    if (p->npinrt && p->pinrt != 1) {
        cm_errf(err, elen, "PINRT_* lines need pinrt=1");
        return -1;
    }
    /* The runtime's own parser, so a value the runtime would refuse is refused here. */
    pr_config cfg;
    char why[256];
    if (p->npinrt && pr_config_parse(&cfg, pinrt_get, p, why, sizeof why)) {
        cm_errf(err, elen, "%s", why);
        return -1;
    }
    return 0;
}

int cp_parse(cp_placement *p, const char *text, char *err, size_t elen)
{
    memset(p, 0, sizeof *p);
    p->mempolicy = CP_MEM_UNSET;
    p->pinrt = -1;
    unsigned seen = 0;
    int line = 0;
    for (const char *s = text; *s;) {
        const char *nl = strchr(s, '\n');
        size_t n = nl ? (size_t)(nl - s) : strlen(s);
        char buf[1024];
        line++;
        if (n >= sizeof buf) {
            cm_errf(err, elen, "line %d is too long", line);
            return -1;
        }
        memcpy(buf, s, n);
        buf[n] = '\0';
        s += n + (nl != NULL);
        char *hash = strchr(buf, '#');
        if (hash)
            *hash = '\0';
        char *l = trim(buf);
        if (!*l)
            continue;
        char *eq = strchr(l, '=');
        if (!eq) {
            cm_errf(err, elen, "line %d: '%s' is not key=value", line, l);
            return -1;
        }
        *eq = '\0';
        if (set_key(p, trim(l), trim(eq + 1), line, &seen, err, elen))
            return -1;
    }
    return check_whole(p, err, elen);
}

int cp_read(cp_placement *p, const char *dir, unsigned jobid, char *path, size_t plen, char *err, size_t elen)
{
    snprintf(path, plen, "%s/%u.placement", dir, jobid);
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT)
            return 1;
        cm_errf(err, elen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    char text[65536];
    size_t n = fread(text, 1, sizeof text - 1, f);
    int bad = ferror(f) || !feof(f);
    fclose(f);
    if (bad) {
        cm_errf(err, elen, "cannot read %s (unreadable or over 64 KiB)", path);
        return -1;
    }
    text[n] = '\0';
    char why[512];
    if (cp_parse(p, text, why, sizeof why)) {
        cm_errf(err, elen, "%s: %s", path, why);
        return -1;
    }
    return 0;
}
