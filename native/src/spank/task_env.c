/* The task's environment for the pinning runtime: the placement's PINRT_*
 * lines and libpinrt.so in front of LD_PRELOAD, when the runtime is wanted. */
#include "placement.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/errmsg.h"

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
