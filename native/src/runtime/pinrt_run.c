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

#include "config.h"

/* The option table as --help lines or as the README's markdown table (the
 * README's table is this output, verbatim: a test checks). */
static void print_options(FILE *f, int md)
{
    if (md)
        fprintf(f, "| variable | `pinrt-run` | default | accepted | meaning |\n| --- | --- | --- | --- | --- |\n");
    else
        fprintf(f, "usage: pinrt-run [options] -- CMD [ARGS...]\noptions (--opt VALUE or --opt=VALUE):\n");
    char range[256];
    for (size_t i = 0; i < pr_noptions; i++) {
        const pr_option *o = &pr_options[i];
        pr_option_range(o, range, sizeof range);
        if (!md) {
            fprintf(f, "  --%-17s %-23s %s (default %s; %s)\n", o->flag, o->env, o->help, pr_option_default(o), range);
            continue;
        }
        fprintf(f, "| `%s` | `--%s` | %s | %s | ", o->env, o->flag, pr_option_default(o), range);
        for (const char *h = o->help; *h; h++) /* a | would end the cell */
            fputs(*h == '|' ? "\\|" : (char[]){*h, 0}, f);
        fputs(" |\n", f);
    }
    if (!md) {
        fprintf(f, "  --%-17s %-23s %s\n", "lib", "", "path of libpinrt.so (default: next to pinrt-run)");
        fprintf(f, "  --%-17s %-23s %s\n", "help-markdown", "", "print the options as the README's markdown table");
    }
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
            print_options(stdout, 0);
            return 0;
        }
        if (!strcmp(a, "--help-markdown")) {
            print_options(stdout, 1);
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
        const pr_option *o = pr_option_by_flag(name);
        if (!o) {
            fprintf(stderr, "pinrt-run: unknown option --%s (see --help)\n", name);
            return 2;
        }
        setenv(o->env, val, 1);
    }
    if (i >= argc) {
        print_options(stderr, 0);
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
