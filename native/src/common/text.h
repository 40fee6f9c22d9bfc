/* Bounded text into fixed buffers: a value that does not fit is refused
 * whole, never cut (a cut path or name would be a different one). */
#ifndef COSCHED_TEXT_H
#define COSCHED_TEXT_H

#include <stddef.h>

/* Copies src with its '\0' into dst[len]. Returns 0, or -1 (dst untouched)
 * when it does not fit. */
int cm_copy(char *dst, size_t len, const char *src);

#endif
