#include "cpuset.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

void cm_set_zero(cm_cpuset *s) { memset(s, 0, sizeof *s); }

void cm_set_add(cm_cpuset *s, int cpu)
{
    if (cpu >= 0 && cpu < CM_MAX_CPUS)
        s->w[cpu / 64] |= 1ULL << (cpu % 64);
}

int cm_set_has(const cm_cpuset *s, int cpu)
{
    return cpu >= 0 && cpu < CM_MAX_CPUS && (s->w[cpu / 64] >> (cpu % 64)) & 1;
}

int cm_set_count(const cm_cpuset *s)
{
    int n = 0;
    for (int i = 0; i < CM_MAX_CPUS / 64; i++)
        n += __builtin_popcountll(s->w[i]);
    return n;
}

static int parse_uint(const char **p, long *out)
{
    const char *s = *p;
    if (!isdigit((unsigned char)*s))
        return -1;
    long v = 0;
    while (isdigit((unsigned char)*s)) {
        v = v * 10 + (*s - '0');
        if (v >= CM_MAX_CPUS)
            return -1;
        s++;
    }
    *p = s;
    *out = v;
    return 0;
}

int cm_parse_cpulist(const char *str, cm_cpuset *s)
{
    cm_set_zero(s);
    if (!str)
        return -1;
    const char *p = str;
    while (*p == ' ')
        p++;
    if (!*p)
        return -1;
    for (;;) {
        long a, b;
        if (parse_uint(&p, &a))
            return -1;
        b = a;
        if (*p == '-') {
            p++;
            if (parse_uint(&p, &b) || b < a)
                return -1;
        }
        for (long c = a; c <= b; c++)
            cm_set_add(s, (int)c);
        while (*p == ' ')
            p++;
        if (*p == '\0')
            return 0;
        if (*p != ',')
            return -1;
        p++;
    }
}

void cm_format_cpulist(const cm_cpuset *s, char *buf, size_t len)
{
    size_t off = 0;
    if (len)
        buf[0] = '\0';
    for (int c = 0; c < CM_MAX_CPUS; c++) {
        if (!cm_set_has(s, c))
            continue;
        int e = c;
        while (e + 1 < CM_MAX_CPUS && cm_set_has(s, e + 1))
            e++;
        int n = e > c ? snprintf(buf + off, len - off, "%s%d-%d", off ? "," : "", c, e)
                      : snprintf(buf + off, len - off, "%s%d", off ? "," : "", c);
        if (n < 0 || (size_t)n >= len - off)
            return;
        off += (size_t)n;
        c = e;
    }
}
