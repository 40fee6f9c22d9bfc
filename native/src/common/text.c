#include "text.h"

#include <string.h>

int cm_copy(char *dst, size_t len, const char *src)
{
    size_t n = strlen(src);
    if (n >= len)
        return -1;
    memcpy(dst, src, n + 1);
    return 0;
}
