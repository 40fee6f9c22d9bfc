/* The one way a function reports why it failed: it returns -1 (or another
 * failure value) and leaves one line, without a newline, in the caller's
 * buffer err[len]. The caller decides where the line goes (stderr, Slurm's
 * log, a longer line of its own). */
#ifndef COSCHED_ERRMSG_H
#define COSCHED_ERRMSG_H

#include <stddef.h>

/* Formats the line into err (truncated to len; nothing when len is 0). */
void cm_errf(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
