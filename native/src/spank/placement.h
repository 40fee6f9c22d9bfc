/* The placement cosched decided for one job on one node, as the SPANK plugin
 * applies it (native/README.md, "Slurm"). Everything here works without
 * Slurm so that it is unit-tested; cosched_spank.c only wires it to Slurm's
 * hooks. One file per concern:
 *
 *   conf.c            the plugin's plugstack.conf arguments and --cosched option
 *   placement_file.c  the placement file: parsing and checking its keys
 *   alloc.c           its CPUs against Slurm's allocation, its NUMA nodes against the node
 *   resctrl.c         the job's resctrl group (on any root: a fake one in tests)
 *   task_env.c        the task's environment for the pinning runtime
 *   apply.c           CPU affinity and memory policy of the calling process
 *   marker.c          the job's once-only start, end and refusal records
 *
 * Every function that can fail returns 0 or -1 with one line (no newline)
 * in err (common/errmsg.h). */
#ifndef COSCHED_PLACEMENT_H
#define COSCHED_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/cpuset.h"
#include "common/mempolicy.h"
#include "runtime/config.h"

#define CP_MAX_PINRT 64
#define CP_PATH 512

/* conf.c */

/* plugstack.conf arguments: placement_dir=DIR [resctrl_root=DIR] [pinrt_lib=PATH]. */
typedef struct {
    char placement_dir[CP_PATH];
    char resctrl_root[CP_PATH]; /* default /sys/fs/resctrl */
    char pinrt_lib[CP_PATH];    /* "" when not configured */
} cp_conf;
int cp_conf_parse(cp_conf *c, int ac, char **av, char *err, size_t elen);

/* --cosched[=OPTS]: OPTS a comma list of strict, pinrt. */
typedef struct {
    int strict; /* fail the task on any cosched error */
    int pinrt;  /* load the pinning runtime unless the placement says pinrt=0 */
} cp_opts;
int cp_opts_parse(cp_opts *o, const char *optarg, char *err, size_t elen);

/* placement_file.c */

enum { CP_MEM_UNSET = -1 }; /* no mempolicy= line: the task's policy is left alone */

typedef struct {
    int version;
    int has_cpus;
    cm_cpuset cpus;
    int mempolicy;  /* a cm_mpol (common/mempolicy.h), or CP_MEM_UNSET */
    int has_mems;   /* mems= given and used (bind or interleave) */
    cm_cpuset mems; /* NUMA nodes */
    char resctrl_group[64];
    char l3_schemata[256];
    char mb_schemata[256];
    int pinrt; /* -1 unset, 0, 1 */
    int npinrt;
    char pinrt_name[CP_MAX_PINRT][32];
    char pinrt_value[CP_MAX_PINRT][256];
} cp_placement;

/* Parses the text of a placement file (key=value lines, # comments). */
int cp_parse(cp_placement *p, const char *text, char *err, size_t elen);
/* Reads DIR/<jobid>.placement. Returns 0, 1 when there is no such file, or -1. */
int cp_read(cp_placement *p, const char *dir, unsigned jobid, char *path, size_t plen, char *err, size_t elen);

/* alloc.c */

/* The Linux CPUs of Slurm's abstract core list ("0-1,4") on this node: core k
 * is the k-th (package, core) pair in sysfs order, with all its threads.
 * sysroot "" is the real root. */
int cp_cores_to_cpus(const char *sysroot, const char *cores, cm_cpuset *cpus, char *err, size_t elen);
/* cpus= must lie inside the allocation; mems= must be online NUMA nodes. */
int cp_check(const cp_placement *p, const cm_cpuset *alloc, const char *sysroot, char *err, size_t elen);

/* resctrl.c */

/* Creates ROOT/GROUP (created = 1 when this call made it) and writes the
 * schemata; cp_resctrl_add puts a process in the group. */
int cp_resctrl_create(const char *root, const cp_placement *p, int *created, char *err, size_t elen);
int cp_resctrl_add(const char *root, const char *group, pid_t pid, char *err, size_t elen);
int cp_resctrl_remove(const char *root, const char *group, char *err, size_t elen);

/* task_env.c */

/* The variables to set in the task's environment: the PINRT_* lines, and
 * LD_PRELOAD = pinrt_lib in front of old_preload, when the runtime is wanted. */
typedef struct {
    int n;
    char name[CP_MAX_PINRT + 1][32];
    char value[CP_MAX_PINRT + 1][CP_PATH + 256];
} cp_env;
int cp_runtime_wanted(const cp_placement *p, const cp_opts *o);
int cp_build_env(cp_env *e, const cp_placement *p, const cp_opts *o, const char *pinrt_lib, const char *old_preload,
                 char *err, size_t elen);

/* apply.c */

/* Applies cpus= (sched_setaffinity) and mempolicy= (set_mempolicy) to the
 * calling process; both survive execve. */
int cp_apply_self(const cp_placement *p, char *err, size_t elen);

/* marker.c */

/* The record name of a step: "JOB.STEP.NODEID", STEP a number or batch,
 * extern, interactive (Slurm's special step ids). */
void cp_step_name(char *buf, size_t len, unsigned jobid, uint32_t stepid, unsigned nodeid);
/* Creates DIR/KIND/NAME (KIND: started, ended, refused) holding text, with
 * O_CREAT|O_EXCL, and makes it durable (file and directory fsynced).
 * Returns 0 when created, 1 when it was already there (prev[plen]: its
 * first line), -1 on error. */
int cp_mark(const char *dir, const char *kind, const char *name, const char *text, char *prev, size_t plen, char *err,
            size_t elen);

/* One phrase describing what was applied ("cpus=0-3 mempolicy=bind mems=0 ..."). */
void cp_describe(const cp_placement *p, int runtime, char *buf, size_t len);

#endif
