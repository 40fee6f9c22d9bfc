/* A job's once-only records under the placement directory: DIR/started/,
 * DIR/ended/ and DIR/refused/, one small file each, named JOB.STEP.NODEID
 * ("7.batch.0", "7.0.0"). A step claims its name in started/ with
 * O_CREAT|O_EXCL before any task runs and fsyncs the file and its directory:
 * a second start of the same step of the same job (slurmctld restarted from
 * older state, a requeue) finds the claim on any node that shares DIR and is
 * refused. Each record is one line of key=value words (node, time, pid, ...),
 * read by the controller (service/slurm/placement.py). */
#include "placement.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/errmsg.h"

/* Slurm's names of its special steps (slurm/slurm.h: SLURM_BATCH_SCRIPT, ...). */
static const struct {
    uint32_t id;
    const char *name;
} SPECIAL_STEPS[] = {
    {0xfffffffbu, "batch"},
    {0xfffffffcu, "extern"},
    {0xfffffffau, "interactive"},
};

void cp_step_name(char *buf, size_t len, unsigned jobid, uint32_t stepid, unsigned nodeid)
{
    for (size_t i = 0; i < sizeof SPECIAL_STEPS / sizeof SPECIAL_STEPS[0]; i++)
        if (SPECIAL_STEPS[i].id == stepid) {
            snprintf(buf, len, "%u.%s.%u", jobid, SPECIAL_STEPS[i].name, nodeid);
            return;
        }
    snprintf(buf, len, "%u.%u.%u", jobid, (unsigned)stepid, nodeid);
}

static int fsync_dir(const char *dir, char *err, size_t elen)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd)) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        cm_errf(err, elen, "cannot sync directory %s: %s", dir, strerror(e));
        return -1;
    }
    close(fd);
    return 0;
}

/* DIR/KIND, made (and its creation made durable) when missing. */
static int kind_dir(char *path, size_t plen, const char *dir, const char *kind, char *err, size_t elen)
{
    if ((size_t)snprintf(path, plen, "%s/%s", dir, kind) >= plen) {
        cm_errf(err, elen, "the path %s/%s is too long", dir, kind);
        return -1;
    }
    if (mkdir(path, 0755) == 0)
        return fsync_dir(dir, err, elen);
    if (errno != EEXIST) {
        cm_errf(err, elen, "cannot create %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

static void read_record(const char *path, char *text, size_t tlen)
{
    if (!tlen)
        return;
    text[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, text, tlen - 1);
    if (fd >= 0)
        close(fd);
    if (n <= 0) {
        /* created, not yet written: the start it claims happened all the same */
        snprintf(text, tlen, "(no details: the record is empty)");
        return;
    }
    text[n] = '\0';
    text[strcspn(text, "\n")] = '\0';
}

int cp_mark(const char *dir, const char *kind, const char *name, const char *text, char *prev, size_t plen, char *err,
            size_t elen)
{
    char sub[CP_PATH + 16], path[CP_PATH + 128];
    if (kind_dir(sub, sizeof sub, dir, kind, err, elen))
        return -1;
    if ((size_t)snprintf(path, sizeof path, "%s/%s", sub, name) >= sizeof path) {
        cm_errf(err, elen, "the path %s/%s is too long", sub, name);
        return -1;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        if (errno == EEXIST) {
            read_record(path, prev, plen);
            return 1;
        }
        cm_errf(err, elen, "cannot create %s: %s", path, strerror(errno));
        return -1;
    }
    size_t n = strlen(text);
    ssize_t w = write(fd, text, n);
    int e = errno;
    if (w == (ssize_t)n && fsync(fd))
        e = errno, w = -1;
    close(fd);
    if (w != (ssize_t)n) {
        /* The file stays: the claim is made even if its details are not. */
        cm_errf(err, elen, "cannot write %s: %s", path, w < 0 ? strerror(e) : "short write");
        return -1;
    }
    return fsync_dir(sub, err, elen);
}
