/* pinrt-run [options] -- CMD [ARGS...]
 * Maps options onto PINRT_* variables, puts libpinrt.so (next to this
 * binary unless --lib) in front of LD_PRELOAD and execs CMD. Values are
 * validated by the runtime itself, so a bad value gets the same one-line
 * message and the command still runs. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct {
    const char *opt, *var, *help;
} OPTS[] = {
    {"period", "PINRT_PERIOD", "seconds between epochs (0.2)"},
    {"objective", "PINRT_OBJECTIVE", "O1 or O2 (O2)"},
    {"gamma", "PINRT_GAMMA", "O2 imbalance weight (0.04)"},
    {"utility", "PINRT_UTILITY", "shared or own (shared)"},
    {"core-method", "PINRT_CORE_METHOD", "RL or NULL (RL)"},
    {"domain-method", "PINRT_DOMAIN_METHOD", "AL or NULL (AL)"},
    {"resources", "PINRT_RESOURCES", "papers' names: NUMA_BANDWIDTH,NUMA_MEMORY"},
    {"child-resources", "PINRT_CHILD_RESOURCES", "papers' names: CPU_BANDWIDTH or NULL"},
    {"opt-methods", "PINRT_OPT_METHODS", "alias of --domain-method"},
    {"child-opt-methods", "PINRT_CHILD_OPT_METHODS", "alias of --core-method"},
    {"eps", "PINRT_EPS", "RL step size (0.3)"},
    {"nu", "PINRT_NU", "RL running-average rate (0.05)"},
    {"lambda", "PINRT_LAMBDA", "RL perturbation (0.02)"},
    {"eps-a", "PINRT_EPS_A", "AL running-average rate (0.5)"},
    {"lambda-a", "PINRT_LAMBDA_A", "AL experimentation (0.05)"},
    {"eta", "PINRT_ETA", "AL benchmark ratio > 1 (1.25)"},
    {"numa-every", "PINRT_NUMA_EVERY", "epochs between domain decisions (5)"},
    {"zeta", "PINRT_ZETA", "bind stacks when > zeta of threads share a domain (off)"},
    {"mempolicy", "PINRT_MEMPOLICY", "preferred or bind (preferred)"},
    {"group", "PINRT_GROUP", "pin to groups of g CPUs (1)"},
    {"topology", "PINRT_TOPOLOGY", "force domains, e.g. '0:0;1:1'"},
    {"cpus", "PINRT_CPUS", "restrict to a cpulist inside the allowed set"},
    {"trace", "PINRT_TRACE", "trace file (.csv or .jsonl)"},
    {"trace-format", "PINRT_TRACE_FORMAT", "csv or json"},
    {"summary", "PINRT_SUMMARY", "stderr, none, or a file to append to"},
    {"log", "PINRT_LOG", "quiet, error, info, debug (error)"},
    {"seed", "PINRT_SEED", "random seed (1)"},
    {"speed", "PINRT_SPEED", "auto, instructions, cputime, schedstat (auto)"},
    {"max-threads", "PINRT_MAX_THREADS", "threads followed at most (1024)"},
    {"pin-main", "PINRT_PIN_MAIN", "also pin the main thread, 0 or 1 (0)"},
    {"enable", "PINRT_ENABLE", "1 or 0"},
};
#define NOPTS (sizeof OPTS / sizeof OPTS[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: pinrt-run [options] -- CMD [ARGS...]\noptions (--opt VALUE or --opt=VALUE):\n");
    for (size_t i = 0; i < NOPTS; i++)
        fprintf(f, "  --%-17s %-23s %s\n", OPTS[i].opt, OPTS[i].var, OPTS[i].help);
    fprintf(f, "  --%-17s %-23s %s\n", "lib", "", "path of libpinrt.so (next to pinrt-run)");
}

int main(int argc, char **argv)
{
    char lib[PATH_MAX] = "";
    int i = 1;
    for (; i < argc; i++) {
        char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (strncmp(a, "--", 2)) {
            break; /* the command itself */
        }
        char name[64];
        const char *val = NULL;
        const char *eq = strchr(a + 2, '=');
        size_t nl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (nl >= sizeof name) {
            fprintf(stderr, "pinrt-run: unknown option %s\n", a);
            return 2;
        }
        memcpy(name, a + 2, nl);
        name[nl] = '\0';
        if (eq)
            val = eq + 1;
        else if (i + 1 < argc)
            val = argv[++i];
        else {
            fprintf(stderr, "pinrt-run: option --%s needs a value\n", name);
            return 2;
        }
        if (!strcmp(name, "lib")) {
            snprintf(lib, sizeof lib, "%s", val);
            continue;
        }
        size_t k;
        for (k = 0; k < NOPTS; k++)
            if (!strcmp(name, OPTS[k].opt))
                break;
        if (k == NOPTS) {
            fprintf(stderr, "pinrt-run: unknown option --%s (see --help)\n", name);
            return 2;
        }
        setenv(OPTS[k].var, val, 1);
    }
    if (i >= argc) {
        usage(stderr);
        return 2;
    }
    if (!lib[0]) {
        char self[PATH_MAX - 32];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n > 0) {
            self[n] = '\0';
            char *slash = strrchr(self, '/');
            if (slash)
                *slash = '\0';
            snprintf(lib, sizeof lib, "%s/libpinrt.so", self);
        }
    }
    if (access(lib, R_OK)) {
        /* The command still runs, only without the runtime. */
        fprintf(stderr, "pinrt-run: cannot read %s (%s); running without the runtime\n", lib, strerror(errno));
    } else {
        const char *old = getenv("LD_PRELOAD");
        size_t len = strlen(lib) + (old ? strlen(old) : 0) + 2;
        char *pre = malloc(len);
        if (pre) {
            snprintf(pre, len, "%s%s%s", lib, old && *old ? ":" : "", old && *old ? old : "");
            setenv("LD_PRELOAD", pre, 1);
            free(pre);
        }
    }
    execvp(argv[i], argv + i);
    fprintf(stderr, "pinrt-run: cannot run %s: %s\n", argv[i], strerror(errno));
    return errno == ENOENT ? 127 : 126;
}
