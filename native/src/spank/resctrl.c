/* The job's resctrl group (cache ways, memory bandwidth): created once per
 * step in slurmstepd, joined by each task, removed by the step that made it.
 * Works on any root holding schemata and tasks, so tests use a fake one. */
#include "placement.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/errmsg.h"

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
