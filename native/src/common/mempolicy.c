#include "mempolicy.h"

#include <stdio.h>
#include <string.h>
#include <linux/mempolicy.h>

/* The enum is the kernel's numbering: a mode goes to the syscall as it is. */
#define SAME(a, b) ((int)(a) == (int)(b))
_Static_assert(SAME(CM_MPOL_DEFAULT, MPOL_DEFAULT) && SAME(CM_MPOL_PREFERRED, MPOL_PREFERRED) &&
                   SAME(CM_MPOL_BIND, MPOL_BIND) && SAME(CM_MPOL_INTERLEAVE, MPOL_INTERLEAVE) &&
                   SAME(CM_MPOL_LOCAL, MPOL_LOCAL),
               "cm_mpol must number the modes as linux/mempolicy.h does");

const char *const cm_mpol_names[CM_MPOL_COUNT] = {
    [CM_MPOL_DEFAULT] = CM_MPOL_NAME_DEFAULT,
    [CM_MPOL_PREFERRED] = CM_MPOL_NAME_PREFERRED,
    [CM_MPOL_BIND] = CM_MPOL_NAME_BIND,
    [CM_MPOL_INTERLEAVE] = CM_MPOL_NAME_INTERLEAVE,
    [CM_MPOL_LOCAL] = CM_MPOL_NAME_LOCAL,
};

int cm_mpol_parse(const char *name, const cm_mpol *accepted, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(name, cm_mpol_names[accepted[i]]))
            return (int)accepted[i];
    return -1;
}

void cm_mpol_list(const cm_mpol *accepted, int n, const char *last_sep, char *buf, size_t len)
{
    size_t off = 0;
    if (len)
        buf[0] = '\0';
    for (int i = 0; i < n && off < len; i++) {
        int w = snprintf(buf + off, len - off, "%s%s", i == 0 ? "" : i == n - 1 ? last_sep : ", ",
                         cm_mpol_names[accepted[i]]);
        if (w < 0)
            return;
        off += (size_t)w;
    }
}
