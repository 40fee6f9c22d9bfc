/* cosched-bubble: the memory-pressure generator (Bubble-Up, Mars et al. MICRO 2011).
 *
 * Streams over a working set at a rate set by one pressure level in [0, 1] (mapping in memkern.h,
 * cs_bubble_map: working set = max(64 KiB, level x --max-mb), busy level x 10 ms of every 10 ms; level 0
 * idles), with --threads threads each streaming its share, until SIGTERM/SIGINT or --seconds. On exit it
 * prints one JSON line: what it streamed and at what rate. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>

#include "memkern.h"
#include "memthreads.h"
#include "opts.h"

typedef struct {
    sigset_t set;
    double seconds;
    int sig;
} wait_arg;

/* In the main thread: until SIGTERM/SIGINT arrives, or --seconds pass. */
static void wait_signal(void *p)
{
    wait_arg *w = p;
    if (w->seconds > 0) {
        struct timespec ts = {(time_t)w->seconds, (long)((w->seconds - (double)(time_t)w->seconds) * 1e9)};
        int sig = sigtimedwait(&w->set, NULL, &ts);
        w->sig = sig > 0 ? sig : 0;
    } else {
        sigwait(&w->set, &w->sig);
    }
}

int main(int argc, char **argv)
{
    double level = 1.0, seconds = 0.0, max_mb = 0.0;
    long threads = 1;
    const cs_opt table[] = {
        {"level", CS_DOUBLE, &level, 0, 1, "pressure 0..1 (default 1): working set and busy fraction grow with it"},
        {"threads", CS_LONG, &threads, 1, 1024, "streaming threads (default 1); each streams its share"},
        {"seconds", CS_DOUBLE, &seconds, 0, 1e9, "stop after this time (default 0: run until SIGTERM/SIGINT)"},
        {"max-mb", CS_DOUBLE, &max_mb, 0.0625, 1 << 20, "working set at level 1 in MiB (default: 2 x this node's L3)"},
    };
    const char *pos[1];
    int npos;
    int rc = cs_parse(argc, argv, table, (int)(sizeof table / sizeof table[0]),
                      "cosched-bubble [--level X] [--threads N] [--seconds S] [--max-mb M]", pos, 0, &npos);
    if (rc != CS_OK)
        return rc == CS_HELP ? 0 : 2;
    size_t max_ws = max_mb > 0 ? (size_t)(max_mb * 1048576.0) : 2 * cs_l3_bytes((size_t)32 << 20);

    wait_arg w = {.seconds = seconds};
    sigemptyset(&w.set);  /* blocked in every thread (inherited); the main thread waits for them */
    sigaddset(&w.set, SIGTERM);
    sigaddset(&w.set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &w.set, NULL);

    cs_bubble_stats st;
    if (cs_bubble_run(level, max_ws, (int)threads, wait_signal, &w, &st) != 0) {
        fprintf(stderr, "cosched-bubble: cannot allocate %zu bytes or start %ld threads\n", st.ws_bytes, threads);
        return 1;
    }
    printf("{\"program\": \"bubble\", \"level\": %.4f, \"ws_bytes\": %zu, \"busy\": %.4f, \"threads\": %d, "
           "\"seconds\": %.6f, \"bytes\": %.0f, \"gbs\": %.4f, \"signal\": %d}\n",
           level, st.ws_bytes, st.busy, st.threads, st.seconds, st.bytes, st.seconds > 0 ? st.bytes / st.seconds / 1e9 : 0.0,
           w.sig);
    fflush(stdout);
    return 0;
}
