/* cosched-membench: node microbenchmarks, bound by the caller (numactl --physcpubind/--membind).
 *   stream:  STREAM-like triad a = b + s*c over three arrays of --mb MiB each (default 4 x L3),
 *            --threads threads (each first-touches its own range), best of --reps; prints GB/s
 *            (24 bytes moved per element, as STREAM counts).
 *   latency: dependent pointer chase over one random cycle of --mb MiB (default 4 x L3) of 64-byte
 *            slots, --loads loads; prints ns per load.
 * One JSON line on stdout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memkern.h"
#include "memthreads.h"
#include "opts.h"

static int run_stream(size_t bytes, long threads, long reps)
{
    size_t n = bytes / sizeof(double);
    double check = 0.0;
    double best = cs_triad_threads(n, (int)threads, (int)reps, &check);
    if (best < 0) {
        fprintf(stderr, "cosched-membench: cannot allocate 3 x %zu bytes\n", n * sizeof(double));
        return 1;
    }
    int ok = check == 1.0 + 3.0 * 2.0;
    printf("{\"program\": \"membench\", \"kernel\": \"stream\", \"gbs\": %.4f, \"best_s\": %.6f, \"bytes_per_array\": %zu, "
           "\"threads\": %ld, \"reps\": %ld, \"valid\": %s}\n",
           best > 0 ? 24.0 * (double)n / best / 1e9 : 0.0, best, n * sizeof(double), threads, reps, ok ? "true" : "false");
    return ok ? 0 : 1;
}

static int run_latency(size_t bytes, long loads, long seed)
{
    size_t n;
    uint64_t *buf = cs_chase_alloc(bytes, (uint64_t)seed, &n);
    if (!buf) {
        fprintf(stderr, "cosched-membench: cannot allocate %zu bytes\n", bytes);
        return 1;
    }
    size_t p = cs_chase(buf, 0, n);  /* one lap to warm the TLB and caches alike for every run */
    double t0 = cs_now();
    p = cs_chase(buf, p, (uint64_t)loads);
    double el = cs_now() - t0;
    printf("{\"program\": \"membench\", \"kernel\": \"latency\", \"ns_per_load\": %.3f, \"loads\": %ld, \"bytes\": %zu, "
           "\"end\": %zu}\n",
           el / (double)loads * 1e9, loads, n * (size_t)CS_LINE, p);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    double mb = 0.0;
    long threads = 1, reps = 5, loads = 20000000, seed = 1;
    const cs_opt table[] = {
        {"mb", CS_DOUBLE, &mb, 0.0625, 1 << 20, "MiB per array (stream) or of the chase (latency); default 4 x L3"},
        {"threads", CS_LONG, &threads, 1, 1024, "stream: threads (default 1)"},
        {"reps", CS_LONG, &reps, 1, 1000, "stream: repetitions, the best is kept (default 5)"},
        {"loads", CS_LONG, &loads, 1, 1L << 40, "latency: dependent loads timed (default 20000000)"},
        {"seed", CS_LONG, &seed, 1, 1L << 40, "latency: seed of the random cycle (default 1)"},
    };
    const char *pos[1];
    int npos;
    const char *usage = "cosched-membench stream|latency [--mb M] [--threads N] [--reps N] [--loads N] [--seed N]";
    int rc = cs_parse(argc, argv, table, (int)(sizeof table / sizeof table[0]), usage, pos, 1, &npos);
    if (rc != CS_OK)
        return rc == CS_HELP ? 0 : 2;
    if (npos != 1 || (strcmp(pos[0], "stream") != 0 && strcmp(pos[0], "latency") != 0)) {
        fprintf(stderr, "cosched-membench: name a kernel: stream or latency (see --help)\n");
        return 2;
    }
    size_t bytes = mb > 0 ? (size_t)(mb * 1048576.0) : 4 * cs_l3_bytes((size_t)32 << 20);
    return strcmp(pos[0], "stream") == 0 ? run_stream(bytes, threads, reps) : run_latency(bytes, loads, seed);
}
