#include "memkern.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double cs_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

size_t cs_l3_bytes(size_t fallback)
{
    char path[128], text[64];
    for (int idx = 0; idx < 8; idx++) {
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", idx);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        int level = 0;
        int ok = fscanf(f, "%d", &level) == 1;
        fclose(f);
        if (!ok || level != 3)
            continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", idx);
        f = fopen(path, "r");
        if (!f)
            return fallback;
        ok = fgets(text, sizeof text, f) != NULL;
        fclose(f);
        if (!ok)
            return fallback;
        char *end = NULL;
        unsigned long long v = strtoull(text, &end, 10);
        if (end == text)
            return fallback;
        if (*end == 'K')
            v <<= 10;
        else if (*end == 'M')
            v <<= 20;
        else if (*end == 'G')
            v <<= 30;
        return v ? (size_t)v : fallback;
    }
    return fallback;
}

void cs_bubble_map(double level, size_t max_ws, size_t *ws, double *busy)
{
    if (level <= 0.0) {
        *ws = 0;
        *busy = 0.0;
        return;
    }
    if (level > 1.0)
        level = 1.0;
    size_t w = (size_t)(level * (double)max_ws);
    if (w < CS_MIN_WS)
        w = CS_MIN_WS;
    *ws = w / CS_LINE * CS_LINE;
    *busy = level;
}

uint64_t cs_stream_pass(uint64_t *buf, size_t bytes)
{
    const size_t step = CS_LINE / sizeof(uint64_t);
    size_t n = bytes / sizeof(uint64_t);
    uint64_t acc = 0;
    for (size_t i = 0; i < n; i += step) {
        buf[i] += 1;
        acc += buf[i];
    }
    return acc;
}

uint64_t cs_rand(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

void cs_chase_build(uint64_t *buf, size_t n, uint64_t seed)
{
    const size_t step = CS_LINE / sizeof(uint64_t);
    uint64_t st = seed ? seed : 0x9E3779B97F4A7C15ULL;
    /* perm[i] is kept in the slots themselves: first the identity, then Sattolo's shuffle,
     * which yields a permutation with a single cycle; slot perm[i] then links to perm[i+1]. */
    size_t *perm = malloc(n * sizeof *perm);
    if (!perm) {
        for (size_t i = 0; i < n; i++)  /* no memory for the shuffle: a sequential cycle, still one cycle */
            buf[i * step] = (i + 1) % n;
        return;
    }
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(cs_rand(&st) % i);  /* j < i: Sattolo */
        size_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (size_t i = 0; i < n; i++)
        buf[perm[i] * step] = perm[(i + 1) % n];
    free(perm);
}

uint64_t *cs_chase_alloc(size_t bytes, uint64_t seed, size_t *n)
{
    *n = bytes / CS_LINE < 2 ? 2 : bytes / CS_LINE;
    uint64_t *buf = aligned_alloc(CS_LINE, *n * CS_LINE);
    if (!buf)
        return NULL;
    memset(buf, 0, *n * CS_LINE);
    cs_chase_build(buf, *n, seed);
    return buf;
}

size_t cs_chase(const uint64_t *buf, size_t start, uint64_t steps)
{
    const size_t step = CS_LINE / sizeof(uint64_t);
    size_t p = start;
    for (uint64_t s = 0; s < steps; s++)
        p = (size_t)buf[p * step];
    return p;
}

void cs_triad(double *a, const double *b, const double *c, double s, size_t lo, size_t hi)
{
    for (size_t i = lo; i < hi; i++)
        a[i] = b[i] + s * c[i];
}

uint64_t cs_probe_round(uint64_t *buf, size_t n, size_t *pos)
{
    const size_t step = CS_LINE / sizeof(uint64_t);
    uint64_t acc = 0;
    for (size_t i = 0; i < n; i++) {  /* streaming: every word read, the line's last word written */
        const uint64_t *line = buf + i * step;
        for (size_t k = 0; k + 1 < step; k++)
            acc += line[k];
        buf[i * step + step - 1] = acc;
    }
    *pos = cs_chase(buf, *pos, n / 4 + 1);  /* reuse: dependent loads over the same lines */
    return acc ^ *pos;
}
