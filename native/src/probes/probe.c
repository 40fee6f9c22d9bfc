/* cosched-probe: the reference probe. A fixed amount of memory-sensitive work: --rounds rounds over a
 * working set around the L3 size (default: this node's L3), each a streaming pass plus dependent reuse
 * loads over the same lines (memkern.h cs_probe_round). Prints one JSON line with its own elapsed time
 * of the work ("seconds", setup excluded). Its slowdown next to a job is that job's pressure. */
#include <stdio.h>
#include <stdlib.h>

#include "memkern.h"
#include "opts.h"

int main(int argc, char **argv)
{
    double ws_mb = 0.0;
    long rounds = 20, seed = 1;
    const cs_opt table[] = {
        {"rounds", CS_LONG, &rounds, 1, 1000000, "rounds of work (default 20): the fixed amount of work"},
        {"ws-mb", CS_DOUBLE, &ws_mb, 0.0625, 1 << 20, "working set in MiB (default: this node's L3 size)"},
        {"seed", CS_LONG, &seed, 1, 1L << 40, "seed of the reuse order (default 1)"},
    };
    const char *pos[1];
    int npos;
    int rc = cs_parse(argc, argv, table, (int)(sizeof table / sizeof table[0]),
                      "cosched-probe [--rounds N] [--ws-mb M] [--seed N]", pos, 0, &npos);
    if (rc != CS_OK)
        return rc == CS_HELP ? 0 : 2;
    size_t ws = ws_mb > 0 ? (size_t)(ws_mb * 1048576.0) : cs_l3_bytes((size_t)32 << 20);
    size_t n;
    uint64_t *buf = cs_chase_alloc(ws, (uint64_t)seed, &n);
    if (!buf) {
        fprintf(stderr, "cosched-probe: cannot allocate %zu bytes\n", ws);
        return 1;
    }
    size_t p = 0;
    uint64_t sum = 0;
    double t0 = cs_now();
    for (long r = 0; r < rounds; r++)
        sum ^= cs_probe_round(buf, n, &p);
    double el = cs_now() - t0;
    printf("{\"program\": \"probe\", \"seconds\": %.6f, \"ws_bytes\": %zu, \"rounds\": %ld, \"checksum\": %llu}\n",
           el, n * (size_t)CS_LINE, rounds, (unsigned long long)(sum & 0xffff));
    free(buf);
    return 0;
}
