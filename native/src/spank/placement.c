#include "placement.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/errmsg.h"

/* The policies mempolicy= accepts, in the order its message lists them. */
static const cm_mpol POLICIES[] = {CM_MPOL_LOCAL, CM_MPOL_BIND, CM_MPOL_INTERLEAVE, CM_MPOL_DEFAULT};
enum { NPOLICIES = sizeof POLICIES / sizeof POLICIES[0] };

static int copy(char *dst, size_t len, const char *src)
{
    size_t n = strlen(src);
    if (n >= len)
        return -1;
    memcpy(dst, src, n + 1);
    return 0;
}

int cp_conf_parse(cp_conf *c, int ac, char **av, char *err, size_t elen)
{
    memset(c, 0, sizeof *c);
    strcpy(c->resctrl_root, "/sys/fs/resctrl");
    for (int i = 0; i < ac; i++) {
        const char *a = av[i], *eq = strchr(a, '=');
        char *dst = NULL;
        size_t n = eq ? (size_t)(eq - a) : 0;
        if (eq && n == 13 && !strncmp(a, "placement_dir", n))
            dst = c->placement_dir;
        else if (eq && n == 12 && !strncmp(a, "resctrl_root", n))
            dst = c->resctrl_root;
        else if (eq && n == 9 && !strncmp(a, "pinrt_lib", n))
            dst = c->pinrt_lib;
        if (!dst) {
            cm_errf(err, elen, "plugstack.conf argument '%s' is unknown (expected placement_dir=DIR, resctrl_root=DIR, "
                            "pinrt_lib=PATH)", a);
            return -1;
        }
        if (copy(dst, CP_PATH, eq + 1) || !eq[1] || eq[1] != '/') {
            cm_errf(err, elen, "plugstack.conf argument '%s' needs an absolute path", a);
            return -1;
        }
    }
    if (!c->placement_dir[0]) {
        cm_errf(err, elen, "plugstack.conf line lacks placement_dir=DIR");
        return -1;
    }
    return 0;
}

int cp_opts_parse(cp_opts *o, const char *optarg, char *err, size_t elen)
{
    memset(o, 0, sizeof *o);
    if (!optarg)
        return 0;
    char buf[256];
    if (copy(buf, sizeof buf, optarg)) {
        cm_errf(err, elen, "--cosched options are too long");
        return -1;
    }
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "strict"))
            o->strict = 1;
        else if (!strcmp(t, "pinrt"))
            o->pinrt = 1;
        else {
            cm_errf(err, elen, "--cosched option '%s' is unknown (expected a comma list of strict, pinrt)", t);
            return -1;
        }
    }
    return 0;
}

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

/* Sets one key; line is the 1-based line number for messages. */
static int set_key(cp_placement *p, const char *k, const char *v, int line, unsigned *seen, char *err, size_t elen)
{
    static const char *const KEYS[] = {"version", "cpus", "mempolicy", "mems", "resctrl_group",
                                       "l3_schemata", "mb_schemata", "pinrt"};
    if (!strncmp(k, "PINRT_", 6)) {
        if (!pr_option_by_env(k)) {
            cm_errf(err, elen, "line %d: %s is not a runtime option (see pinrt-run --help)", line, k);
            return -1;
        }
        if (pinrt_get(k, p)) {
            cm_errf(err, elen, "line %d: %s given twice", line, k);
            return -1;
        }
        if (p->npinrt == CP_MAX_PINRT || copy(p->pinrt_value[p->npinrt], sizeof p->pinrt_value[0], v)) {
            cm_errf(err, elen, "line %d: too many or too long PINRT_* lines", line);
            return -1;
        }
        strcpy(p->pinrt_name[p->npinrt++], k);
        return 0;
    }
    int key = -1;
    for (int i = 0; i < (int)(sizeof KEYS / sizeof KEYS[0]); i++)
        if (!strcmp(k, KEYS[i]))
            key = i;
    if (key < 0) {
        cm_errf(err, elen, "line %d: unknown key '%s' (expected version, cpus, mempolicy, mems, resctrl_group, "
                        "l3_schemata, mb_schemata, pinrt, PINRT_*)", line, k);
        return -1;
    }
    if (*seen & (1u << key)) {
        cm_errf(err, elen, "line %d: %s given twice", line, k);
        return -1;
    }
    *seen |= 1u << key;
    switch (key) {
    case 0:
        if (strcmp(v, "1")) {
            cm_errf(err, elen, "line %d: version=%s is not supported (expected 1)", line, v);
            return -1;
        }
        p->version = 1;
        return 0;
    case 1:
        if (cm_parse_cpulist(v, &p->cpus)) {
            cm_errf(err, elen, "line %d: cpus='%s' is not a cpulist (e.g. 0-3,8)", line, v);
            return -1;
        }
        p->has_cpus = 1;
        return 0;
    case 2: {
        char names[128];
        if ((p->mempolicy = cm_mpol_parse(v, POLICIES, NPOLICIES)) >= 0)
            return 0;
        cm_mpol_list(POLICIES, NPOLICIES, " or ", names, sizeof names);
        cm_errf(err, elen, "line %d: mempolicy='%s' is unknown (expected %s)", line, v, names);
        return -1;
    }
    case 3:
        if (!*v) /* "mems=" : no nodes named */
            return 0;
        if (cm_parse_cpulist(v, &p->mems)) {
            cm_errf(err, elen, "line %d: mems='%s' is not a list of NUMA nodes (e.g. 0,1)", line, v);
            return -1;
        }
        p->has_mems = 1;
        return 0;
    case 4:
        if (!good_group(v) || copy(p->resctrl_group, sizeof p->resctrl_group, v)) {
            cm_errf(err, elen, "line %d: resctrl_group='%s' is not a plain name of letters, digits, _ . -", line, v);
            return -1;
        }
        return 0;
    case 5:
    case 6: {
        int l3 = key == 5;
        if (!good_schemata(v, l3 ? "L3" : "MB", l3) ||
            copy(l3 ? p->l3_schemata : p->mb_schemata, sizeof p->l3_schemata, v)) {
            cm_errf(err, elen, "line %d: %s='%s' is not of the form %s", line, k, v,
                 l3 ? "L3:0=7f;1=7f" : "MB:0=50;1=50");
            return -1;
        }
        return 0;
    }
    default:
        if (strcmp(v, "0") && strcmp(v, "1")) {
            cm_errf(err, elen, "line %d: pinrt='%s' must be 0 or 1", line, v);
            return -1;
        }
        p->pinrt = v[0] == '1';
        return 0;
    }
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
    pr_config cfg;
    char why[256];
    if (p->npinrt && pr_config_parse(&cfg, pinrt_get, p, why, sizeof why)) {
        cm_errf(err, elen, "%s", why);
        return -1;
    }
    return 0;
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

static int write_file(const char *path, const char *text, int mode, char *err, size_t elen)
{
    /* O_CREAT: a fake resctrl root has no kernel to make the group's files. */
    int fd = open(path, O_WRONLY | O_CREAT | mode | O_CLOEXEC, 0644);
    if (fd < 0) {
        cm_errf(err, elen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    size_t n = strlen(text);
    ssize_t w = write(fd, text, n);
    int e = errno;
    close(fd);
    if (w != (ssize_t)n) {
        cm_errf(err, elen, "writing '%.*s' to %s failed: %s", (int)strcspn(text, "\n"), text, path,
             w < 0 ? strerror(e) : "short write");
        return -1;
    }
    return 0;
}

int cp_resctrl_create(const char *root, const cp_placement *p, int *created, char *err, size_t elen)
{
    char path[CP_PATH + 128], line[600];
    *created = 0;
    snprintf(path, sizeof path, "%s/schemata", root);
    if (access(path, F_OK)) {
        cm_errf(err, elen, "resctrl is not mounted at %s (no %s)", root, path);
        return -1;
    }
    snprintf(path, sizeof path, "%s/%s", root, p->resctrl_group);
    if (mkdir(path, 0755) == 0)
        *created = 1;
    else if (errno != EEXIST) {
        cm_errf(err, elen, "cannot create resctrl group %s: %s", path, strerror(errno));
        return -1;
    }
    if (p->l3_schemata[0] || p->mb_schemata[0]) {
        /* One write of both lines, truncating: the same result when a later
         * step of the job (or a retry) writes it again. */
        snprintf(path, sizeof path, "%s/%s/schemata", root, p->resctrl_group);
        snprintf(line, sizeof line, "%s%s%s%s", p->l3_schemata, p->l3_schemata[0] ? "\n" : "", p->mb_schemata,
                 p->mb_schemata[0] ? "\n" : "");
        if (write_file(path, line, O_TRUNC, err, elen))
            goto fail;
    }
    return 0;
fail:
    if (*created) {
        char why[8];
        cp_resctrl_remove(root, p->resctrl_group, why, sizeof why);
        *created = 0;
    }
    return -1;
}

int cp_resctrl_add(const char *root, const char *group, pid_t pid, char *err, size_t elen)
{
    char path[CP_PATH + 128], line[32];
    snprintf(path, sizeof path, "%s/%s/tasks", root, group);
    snprintf(line, sizeof line, "%ld\n", (long)pid);
    return write_file(path, line, O_APPEND, err, elen);
}

int cp_resctrl_remove(const char *root, const char *group, char *err, size_t elen)
{
    char path[CP_PATH + 128];
    snprintf(path, sizeof path, "%s/%s", root, group);
    if (rmdir(path) == 0 || errno == ENOENT)
        return 0;
    if (errno == ENOTEMPTY || errno == EEXIST) {
        /* A fake root holds plain files; the kernel's resctrl never says this. */
        static const char *const FILES[] = {"schemata", "tasks"};
        char f[CP_PATH + 160];
        for (int i = 0; i < 2; i++) {
            snprintf(f, sizeof f, "%s/%s", path, FILES[i]);
            unlink(f);
        }
        if (rmdir(path) == 0)
            return 0;
    }
    cm_errf(err, elen, "cannot remove resctrl group %s: %s", path, strerror(errno));
    return -1;
}

int cp_runtime_wanted(const cp_placement *p, const cp_opts *o)
{
    return p->pinrt == 1 || (p->pinrt == -1 && o->pinrt);
}

/* Whether lib is one of the entries of an LD_PRELOAD value (':' or ' ' separated). */
static int in_preload(const char *list, const char *lib)
{
    size_t n = strlen(lib);
    for (const char *s = list; s && (s = strstr(s, lib)); s += n)
        if ((s == list || s[-1] == ':' || s[-1] == ' ') && (s[n] == '\0' || s[n] == ':' || s[n] == ' '))
            return 1;
    return 0;
}

int cp_build_env(cp_env *e, const cp_placement *p, const cp_opts *o, const char *pinrt_lib, const char *old_preload,
                 char *err, size_t elen)
{
    e->n = 0;
    if (!cp_runtime_wanted(p, o))
        return 0;
    if (!pinrt_lib || !pinrt_lib[0]) {
        cm_errf(err, elen, "the runtime is asked for but plugstack.conf names no pinrt_lib=PATH");
        return -1;
    }
    if (access(pinrt_lib, R_OK)) {
        cm_errf(err, elen, "pinrt_lib %s is not readable: %s", pinrt_lib, strerror(errno));
        return -1;
    }
    for (int i = 0; i < p->npinrt; i++) {
        strcpy(e->name[e->n], p->pinrt_name[i]);
        strcpy(e->value[e->n++], p->pinrt_value[i]);
    }
    strcpy(e->name[e->n], "LD_PRELOAD");
    /* A step inside a batch job inherits the batch step's LD_PRELOAD: the
     * library is not put in front twice. */
    int w = in_preload(old_preload, pinrt_lib)
                ? snprintf(e->value[e->n], sizeof e->value[0], "%s", old_preload)
                : snprintf(e->value[e->n], sizeof e->value[0], "%s%s%s", pinrt_lib,
                           old_preload && *old_preload ? ":" : "", old_preload ? old_preload : "");
    if (w < 0 || (size_t)w >= sizeof e->value[0]) {
        cm_errf(err, elen, "LD_PRELOAD would be too long");
        return -1;
    }
    e->n++;
    return 0;
}

int cp_apply_self(const cp_placement *p, char *err, size_t elen)
{
    char buf[512];
    cpu_set_t old;
    if (sched_getaffinity(0, sizeof old, &old)) {
        cm_errf(err, elen, "sched_getaffinity failed: %s", strerror(errno));
        return -1;
    }
    if (p->has_cpus) {
        cpu_set_t set;
        CPU_ZERO(&set);
        for (int c = 0; c < CM_MAX_CPUS && c < CPU_SETSIZE; c++)
            if (cm_set_has(&p->cpus, c))
                CPU_SET(c, &set);
        if (sched_setaffinity(0, sizeof set, &set)) {
            cm_format_cpulist(&p->cpus, buf, sizeof buf);
            cm_errf(err, elen, "sched_setaffinity(cpus=%s) failed: %s", buf, strerror(errno));
            return -1;
        }
    }
    if (p->mempolicy != CP_MEM_UNSET) {
        unsigned long mask[CM_MAX_CPUS / 64] = {0};
        for (int i = 0; i < CM_MAX_CPUS / 64; i++)
            mask[i] = (unsigned long)p->mems.w[i];
        int nodes = p->has_mems;
        if (syscall(SYS_set_mempolicy, p->mempolicy, nodes ? mask : NULL,
                    nodes ? (unsigned long)CM_MAX_CPUS + 1 : 0UL)) {
            int e = errno;
            sched_setaffinity(0, sizeof old, &old); /* all or nothing: the task runs as Slurm placed it */
            errno = e;
            cm_format_cpulist(&p->mems, buf, sizeof buf);
            cm_errf(err, elen, "set_mempolicy(%s%s%s) failed: %s", cm_mpol_names[p->mempolicy], nodes ? " mems=" : "",
                 nodes ? buf : "", strerror(errno));
            return -1;
        }
    }
    return 0;
}

void cp_describe(const cp_placement *p, int runtime, char *buf, size_t len)
{
    char c[256] = "unchanged", m[256] = "";
    if (p->has_cpus)
        cm_format_cpulist(&p->cpus, c, sizeof c);
    if (p->has_mems)
        cm_format_cpulist(&p->mems, m, sizeof m);
    snprintf(buf, len, "cpus=%s mempolicy=%s%s%s resctrl_group=%s pinrt=%d", c,
             p->mempolicy == CP_MEM_UNSET ? "unchanged" : cm_mpol_names[p->mempolicy], m[0] ? " mems=" : "", m,
             p->resctrl_group[0] ? p->resctrl_group : "none", runtime);
}
