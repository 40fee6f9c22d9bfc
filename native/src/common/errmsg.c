#include "errmsg.h"

#include <stdarg.h>
#include <stdio.h>

void cm_errf(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
}
