/* Memory kernels shared by the measuring programs: the bubble's streaming pass and its level mapping,
 * the probe's work, the STREAM-like triad and the dependent pointer chase. Pure computation over
 * caller-owned buffers (no threads, no I/O except cs_l3_bytes), so the C tests check each directly. */
#ifndef COSCHED_MEMKERN_H
#define COSCHED_MEMKERN_H
#include <stddef.h>
#include <stdint.h>

#define CS_LINE 64                       /* bytes of a cache line: one chase slot, one bubble touch */
#define CS_MIN_WS ((size_t)64 << 10)     /* the bubble's smallest working set (level > 0) */
#define CS_PERIOD_S 0.010                /* the bubble's duty-cycle period */

double cs_now(void);

/* This node's L3 size in bytes from sysfs (cpu0's level-3 cache), or `fallback` when unknown. */
size_t cs_l3_bytes(size_t fallback);

/* The bubble's pressure level (0..1) -> working set bytes and busy fraction of each period:
 *   working set = max(CS_MIN_WS, level * max_ws), rounded down to whole lines (0 at level 0)
 *   busy fraction = level (streams for level * CS_PERIOD_S of every period, sleeps the rest)
 * so both the footprint it occupies in the cache and the bandwidth it takes grow with the level;
 * level 0 is an idle process, level 1 streams max_ws without pause. */
void cs_bubble_map(double level, size_t max_ws, size_t *ws, double *busy);

/* One streaming pass over buf[0..bytes): read-modify-write of one word per cache line (the whole
 * line moves through the hierarchy). Returns a value depending on every line (keeps it live). */
uint64_t cs_stream_pass(uint64_t *buf, size_t bytes);

/* xorshift64* PRNG; state must be non-zero. */
uint64_t cs_rand(uint64_t *state);

/* Links n slots of CS_LINE bytes in buf into ONE random cycle (Sattolo's algorithm): the first word
 * of slot i holds the index of the next slot. Deterministic for a seed. n >= 1. */
void cs_chase_build(uint64_t *buf, size_t n, uint64_t seed);

/* A zeroed, line-aligned buffer of max(2, bytes / CS_LINE) slots linked into one cycle (cs_chase_build);
 * *n gets the slot count. NULL when out of memory (the caller reports it; free() releases it). */
uint64_t *cs_chase_alloc(size_t bytes, uint64_t seed, size_t *n);

/* Follows the cycle for `steps` dependent loads from slot `start`; returns the slot reached. */
size_t cs_chase(const uint64_t *buf, size_t start, uint64_t steps);

/* STREAM triad a[i] = b[i] + s * c[i] over [lo, hi). */
void cs_triad(double *a, const double *b, const double *c, double s, size_t lo, size_t hi);

/* One round of the probe's work over a chase-linked buffer of n slots: a streaming pass (read every
 * word, write one per line) and n/4 dependent reuse loads from `*pos` (updated). Returns a checksum. */
uint64_t cs_probe_round(uint64_t *buf, size_t n, size_t *pos);

#endif
