/* Tests of the measuring programs' parts: the option table, the bubble's level mapping, the chase
 * cycle, the streaming pass, the probe round, and the threaded bubble and triad (also run under ASan
 * and TSan). Prints "N passed, N failed" on its last line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probes/memkern.h"
#include "probes/memthreads.h"
#include "probes/opts.h"

static int n_pass, n_fail;

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (cond) {                                                                                                    \
            n_pass++;                                                                                                  \
        } else {                                                                                                       \
            n_fail++;                                                                                                  \
            printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                                                     \
        }                                                                                                              \
    } while (0)

static double o_level;
static long o_threads;
static const char *o_name;
static int o_flag;
static const cs_opt table[] = {
    {"level", CS_DOUBLE, &o_level, 0, 1, "pressure"},
    {"threads", CS_LONG, &o_threads, 1, 64, "threads"},
    {"name", CS_STRING, &o_name, 0, 0, "a name"},
    {"flag", CS_FLAG, &o_flag, 0, 0, "a flag"},
};

static int parse(int argc, const char **argv, const char **pos, int max_pos, int *npos)
{
    o_level = -1;
    o_threads = -1;
    o_name = NULL;
    o_flag = 0;
    /* stderr of the refusals is expected: silence it while parsing */
    FILE *saved = stderr;
    stderr = fopen("/dev/null", "w");
    int rc = cs_parse(argc, (char **)argv, table, 4, "t", pos, max_pos, npos);
    fclose(stderr);
    stderr = saved;
    return rc;
}

static void test_opts(void)
{
    const char *pos[2];
    int npos;
    const char *a1[] = {"prog", "--level", "0.5", "--threads=3", "--name", "x", "--flag", "stream"};
    CHECK(parse(8, a1, pos, 2, &npos) == CS_OK);
    CHECK(o_level == 0.5 && o_threads == 3 && o_name && strcmp(o_name, "x") == 0 && o_flag == 1);
    CHECK(npos == 1 && strcmp(pos[0], "stream") == 0);
    const char *a2[] = {"prog", "--level", "1.5"};
    CHECK(parse(3, a2, pos, 2, &npos) == CS_BAD);  /* out of range */
    const char *a3[] = {"prog", "--threads", "2x"};
    CHECK(parse(3, a3, pos, 2, &npos) == CS_BAD);  /* not a number */
    const char *a4[] = {"prog", "--nope"};
    CHECK(parse(2, a4, pos, 2, &npos) == CS_BAD);
    const char *a5[] = {"prog", "--level"};
    CHECK(parse(2, a5, pos, 2, &npos) == CS_BAD);  /* value missing */
    const char *a6[] = {"prog", "a", "b"};
    CHECK(parse(3, a6, pos, 1, &npos) == CS_BAD);  /* too many positionals */
    const char *a7[] = {"prog", "--flag=1"};
    CHECK(parse(2, a7, pos, 1, &npos) == CS_BAD);
    const char *a8[] = {"prog", "--level", "nan"};
    CHECK(parse(3, a8, pos, 1, &npos) == CS_BAD);
}

static void test_bubble_map(void)
{
    size_t ws, prev = 0;
    double busy, prev_busy = -1;
    size_t max = (size_t)64 << 20;
    cs_bubble_map(0.0, max, &ws, &busy);
    CHECK(ws == 0 && busy == 0.0);
    cs_bubble_map(1.0, max, &ws, &busy);
    CHECK(ws == max && busy == 1.0);
    cs_bubble_map(0.0001, max, &ws, &busy);
    CHECK(ws == CS_MIN_WS);
    int monotone = 1;
    for (int i = 1; i <= 100; i++) {
        cs_bubble_map(i / 100.0, max, &ws, &busy);
        if (ws < prev || busy <= prev_busy || ws % CS_LINE)
            monotone = 0;
        prev = ws;
        prev_busy = busy;
    }
    CHECK(monotone);
    cs_bubble_map(0.5, max, &ws, &busy);
    CHECK(ws == max / 2 && busy == 0.5);
}

static void test_chase_is_one_cycle(void)
{
    const size_t n = 4099;
    const size_t step = CS_LINE / sizeof(uint64_t);
    uint64_t *buf = calloc(n * step, sizeof *buf);
    char *seen = calloc(n, 1);
    cs_chase_build(buf, n, 7);
    size_t p = 0, visited = 0;
    int ok = 1;
    do {
        if (seen[p])
            ok = 0;
        seen[p] = 1;
        visited++;
        p = cs_chase(buf, p, 1);
    } while (p != 0 && visited <= n);
    CHECK(ok && visited == n);  /* every slot once, back to the start: one cycle */
    CHECK(cs_chase(buf, 0, n) == 0);
    uint64_t *again = calloc(n * step, sizeof *again);
    cs_chase_build(again, n, 7);
    CHECK(memcmp(buf, again, n * step * sizeof *buf) == 0);  /* deterministic for a seed */
    cs_chase_build(again, n, 8);
    CHECK(memcmp(buf, again, n * step * sizeof *buf) != 0);
    free(buf);
    free(again);
    free(seen);
}

static void test_stream_and_probe(void)
{
    const size_t bytes = 1 << 16;
    uint64_t *buf = calloc(bytes / 8, 8);
    cs_stream_pass(buf, bytes);
    cs_stream_pass(buf, bytes);
    int all = 1;
    for (size_t i = 0; i < bytes / 8; i++)
        if (buf[i] != (i % 8 == 0 ? 2u : 0u))  /* one word per line, each pass */
            all = 0;
    CHECK(all);
    size_t n = bytes / CS_LINE, pos = 0;
    memset(buf, 0, bytes);
    cs_chase_build(buf, n, 3);
    uint64_t a = cs_probe_round(buf, n, &pos);
    CHECK(pos < n);
    size_t pos2 = 0;
    uint64_t *copy = calloc(bytes / 8, 8);
    cs_chase_build(copy, n, 3);
    CHECK(cs_probe_round(copy, n, &pos2) == a && pos2 == pos);  /* fixed work: the same result */
    CHECK(cs_chase(buf, 0, n) == 0);  /* the round writes only the line's last word: the cycle is intact */
    free(buf);
    free(copy);
}

static void sleep_a_little(void *arg)
{
    double s = *(double *)arg;
    struct timespec ts = {0, (long)(s * 1e9)};
    nanosleep(&ts, NULL);
}

static void test_bubble_threads(void)
{
    cs_bubble_stats idle, busy;
    double s = 0.1;
    CHECK(cs_bubble_run(0.0, (size_t)4 << 20, 2, sleep_a_little, &s, &idle) == 0);
    CHECK(idle.threads == 2 && idle.ws_bytes == 0 && idle.bytes == 0 && idle.seconds >= 0.09);
    CHECK(cs_bubble_run(1.0, (size_t)4 << 20, 2, sleep_a_little, &s, &busy) == 0);
    CHECK(busy.threads == 2 && busy.ws_bytes == (size_t)4 << 20 && busy.bytes > 0);
}

static void test_triad_threads(void)
{
    double check = 0;
    double best = cs_triad_threads(100003, 3, 2, &check);
    CHECK(best > 0 && check == 7.0);
}

int main(void)
{
    test_opts();
    test_bubble_map();
    test_chase_is_one_cycle();
    test_stream_and_probe();
    test_bubble_threads();
    test_triad_threads();
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
