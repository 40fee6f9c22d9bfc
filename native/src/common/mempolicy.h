/* Memory policies of set_mempolicy(2) and mbind(2), numbered as the kernel
 * numbers them (linux/mempolicy.h; no libnuma is linked), and their names:
 * the one table that the runtime's PINRT_MEMPOLICY (stack binding) and the
 * SPANK plugin's mempolicy= (the task's policy) read. Each accepts its own
 * subset of the modes. */
#ifndef COSCHED_MEMPOLICY_H
#define COSCHED_MEMPOLICY_H

#include <stddef.h>

typedef enum {
    CM_MPOL_DEFAULT = 0,
    CM_MPOL_PREFERRED = 1,
    CM_MPOL_BIND = 2,
    CM_MPOL_INTERLEAVE = 3,
    CM_MPOL_LOCAL = 4,
    CM_MPOL_COUNT
} cm_mpol;

/* Each name is spelled here only: cm_mpol_names is built from them, and the
 * runtime's option table (whose choices must be constant strings) uses them. */
#define CM_MPOL_NAME_DEFAULT "default"
#define CM_MPOL_NAME_PREFERRED "preferred"
#define CM_MPOL_NAME_BIND "bind"
#define CM_MPOL_NAME_INTERLEAVE "interleave"
#define CM_MPOL_NAME_LOCAL "local"

extern const char *const cm_mpol_names[CM_MPOL_COUNT];

/* The mode named name (exactly) among the n modes of accepted; -1 if none. */
int cm_mpol_parse(const char *name, const cm_mpol *accepted, int n);
/* The names of accepted in their order, ", " between them and last_sep
 * before the last ("local, bind or default"). */
void cm_mpol_list(const cm_mpol *accepted, int n, const char *last_sep, char *buf, size_t len);

#endif
