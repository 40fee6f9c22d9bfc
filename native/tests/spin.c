/* spin [-t threads] [-d seconds] [-w work] [-x exitcode]: threads that burn
 * CPU for a duration (-d) or a fixed amount of work (-w, deterministic
 * checksum on stdout). A host program for runtime tests and benches. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double dur = 0;
static long work = 20000000;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *run(void *arg)
{
    uint64_t x = (uint64_t)(intptr_t)arg + 1;
    if (dur > 0) {
        double end = now() + dur;
        while (now() < end)
            for (int i = 0; i < 100000; i++)
                x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    } else {
        for (long i = 0; i < work; i++)
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    }
    return (void *)(uintptr_t)x;
}

int main(int argc, char **argv)
{
    int nt = 4, code = 0, o;
    while ((o = getopt(argc, argv, "t:d:w:x:")) != -1) {
        switch (o) {
        case 't': nt = atoi(optarg); break;
        case 'd': dur = atof(optarg); break;
        case 'w': work = atol(optarg); break;
        case 'x': code = atoi(optarg); break;
        default: return 2;
        }
    }
    if (nt < 1 || nt > 4096)
        return 2;
    pthread_t *th = malloc((size_t)nt * sizeof *th);
    for (int i = 0; i < nt; i++)
        if (pthread_create(&th[i], NULL, run, (void *)(intptr_t)i))
            return 3;
    uint64_t sum = 0;
    for (int i = 0; i < nt; i++) {
        void *r;
        pthread_join(th[i], &r);
        sum ^= (uint64_t)(uintptr_t)r;
    }
    if (dur <= 0)
        printf("spin: threads=%d checksum=%016llx\n", nt, (unsigned long long)sum);
    else
        printf("spin: threads=%d done\n", nt);
    free(th);
    return code;
}
