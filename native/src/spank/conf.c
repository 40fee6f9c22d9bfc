/* The plugin's own configuration: its plugstack.conf arguments and the
 * --cosched[=OPTS] option of a job. Both are tables of named keys; the
 * messages list the table, so a new key is one entry. */
#include "placement.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "common/errmsg.h"
#include "common/text.h"

/* plugstack.conf: NAME=VALUE, each an absolute path into its field. */
enum conf_key { CONF_PLACEMENT_DIR, CONF_RESCTRL_ROOT, CONF_PINRT_LIB, CONF_NKEYS };
static const struct {
    const char *name, *value_doc;
    size_t off; /* char[CP_PATH] field of cp_conf */
} CONF_KEYS[CONF_NKEYS] = {
    [CONF_PLACEMENT_DIR] = {"placement_dir", "DIR", offsetof(cp_conf, placement_dir)},
    [CONF_RESCTRL_ROOT] = {"resctrl_root", "DIR", offsetof(cp_conf, resctrl_root)},
    [CONF_PINRT_LIB] = {"pinrt_lib", "PATH", offsetof(cp_conf, pinrt_lib)},
};

/* --cosched options: each sets its int field of cp_opts. */
enum cosched_opt { OPT_STRICT, OPT_PINRT, OPT_NOPTS };
static const struct {
    const char *name;
    size_t off;
} COSCHED_OPTS[OPT_NOPTS] = {
    [OPT_STRICT] = {"strict", offsetof(cp_opts, strict)},
    [OPT_PINRT] = {"pinrt", offsetof(cp_opts, pinrt)},
};

/* The key of "name=value" (-1 if none): the text before '=' is a name of the table. */
static int conf_key(const char *arg)
{
    const char *eq = strchr(arg, '=');
    for (int k = 0; eq && k < CONF_NKEYS; k++)
        if (strlen(CONF_KEYS[k].name) == (size_t)(eq - arg) && !strncmp(arg, CONF_KEYS[k].name, (size_t)(eq - arg)))
            return k;
    return -1;
}

int cp_conf_parse(cp_conf *c, int ac, char **av, char *err, size_t elen)
{
    memset(c, 0, sizeof *c);
    strcpy(c->resctrl_root, "/sys/fs/resctrl");
    for (int i = 0; i < ac; i++) {
        const char *a = av[i];
        int k = conf_key(a);
        if (k < 0) {
            char keys[256];
            size_t off = 0;
            for (int j = 0; j < CONF_NKEYS && off < sizeof keys; j++)
                off += (size_t)snprintf(keys + off, sizeof keys - off, "%s%s=%s", j ? ", " : "", CONF_KEYS[j].name,
                                        CONF_KEYS[j].value_doc);
            cm_errf(err, elen, "plugstack.conf argument '%s' is unknown (expected %s)", a, keys);
            return -1;
        }
        const char *v = strchr(a, '=') + 1;
        if (cm_copy((char *)c + CONF_KEYS[k].off, CP_PATH, v) || v[0] != '/') {
            cm_errf(err, elen, "plugstack.conf argument '%s' needs an absolute path", a);
            return -1;
        }
    }
    if (!c->placement_dir[0]) {
        cm_errf(err, elen, "plugstack.conf line lacks %s=%s", CONF_KEYS[CONF_PLACEMENT_DIR].name,
                CONF_KEYS[CONF_PLACEMENT_DIR].value_doc);
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
    if (cm_copy(buf, sizeof buf, optarg)) {
        cm_errf(err, elen, "--cosched options are too long");
        return -1;
    }
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int k = 0;
        while (k < OPT_NOPTS && strcmp(t, COSCHED_OPTS[k].name))
            k++;
        if (k == OPT_NOPTS) {
            char names[128];
            size_t off = 0;
            for (int j = 0; j < OPT_NOPTS && off < sizeof names; j++)
                off += (size_t)snprintf(names + off, sizeof names - off, "%s%s", j ? ", " : "", COSCHED_OPTS[j].name);
            cm_errf(err, elen, "--cosched option '%s' is unknown (expected a comma list of %s)", t, names);
            return -1;
        }
        *(int *)((char *)o + COSCHED_OPTS[k].off) = 1;
    }
    return 0;
}
