/* Tests of placement.c, the SPANK plugin's logic without Slurm: plugstack
 * arguments, --cosched options, placement files, the allocation check on a
 * fake sysfs, resctrl groups on a fake resctrl root (a plain directory), the
 * environment for the runtime, and the CPU / memory policy of a forked child. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spank/placement.h"

#include "check.h"

static char tmpdir[256];

static void put(const char *rel, const char *text)
{
    char path[512], dir[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
    /* mkdir -p of the parent */
    snprintf(dir, sizeof dir, "%s", path);
    for (char *s = dir + strlen(tmpdir) + 1; (s = strchr(s, '/')); s++) {
        *s = '\0';
        mkdir(dir, 0755);
        *s = '/';
    }
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static int slurp(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
    return 0;
}

static void test_conf_and_opts(void)
{
    cp_conf c;
    cp_opts o;
    char err[256];
    char *good[] = {"placement_dir=/var/spool/cosched", "pinrt_lib=/opt/libpinrt.so"};
    CHECK(cp_conf_parse(&c, 2, good, err, sizeof err) == 0 && !strcmp(c.placement_dir, "/var/spool/cosched") &&
          !strcmp(c.resctrl_root, "/sys/fs/resctrl") && !strcmp(c.pinrt_lib, "/opt/libpinrt.so"));
    char *root[] = {"placement_dir=/p", "resctrl_root=/tmp/fake"};
    CHECK(cp_conf_parse(&c, 2, root, err, sizeof err) == 0 && !strcmp(c.resctrl_root, "/tmp/fake") && !c.pinrt_lib[0]);
    char *none[] = {"resctrl_root=/x"};
    CHECK(cp_conf_parse(&c, 1, none, err, sizeof err) == -1 && strstr(err, "placement_dir"));
    char *bad[] = {"placement_dir=/p", "colour=blue"};
    CHECK(cp_conf_parse(&c, 2, bad, err, sizeof err) == -1 && strstr(err, "'colour=blue' is unknown"));
    char *rel[] = {"placement_dir=spool"};
    CHECK(cp_conf_parse(&c, 1, rel, err, sizeof err) == -1 && strstr(err, "absolute"));

    CHECK(cp_opts_parse(&o, NULL, err, sizeof err) == 0 && !o.strict && !o.pinrt);
    CHECK(cp_opts_parse(&o, "strict,pinrt", err, sizeof err) == 0 && o.strict && o.pinrt);
    CHECK(cp_opts_parse(&o, "pinrt", err, sizeof err) == 0 && !o.strict && o.pinrt);
    CHECK(cp_opts_parse(&o, "strict,fast", err, sizeof err) == -1 &&
          !strcmp(err, "--cosched option 'fast' is unknown (expected a comma list of strict, pinrt)"));
}

static void test_parse(void)
{
    cp_placement p;
    char err[512];
    const char *good = "# written by cosched\n"
                       "version=1\n"
                       "cpus = 0-3,8   # four plus one\n"
                       "mempolicy=interleave\n"
                       "mems=0,1\n"
                       "resctrl_group=cosched_42\n"
                       "l3_schemata=L3:0=7f;1=7f\n"
                       "mb_schemata=MB:0=50;1=50\n"
                       "pinrt=1\n"
                       "PINRT_PERIOD=0.1\n"
                       "PINRT_OBJECTIVE=O1\n";
    CHECK(cp_parse(&p, good, err, sizeof err) == 0);
    CHECK(p.has_cpus && cm_set_count(&p.cpus) == 5 && cm_set_has(&p.cpus, 8) && p.mempolicy == CM_MPOL_INTERLEAVE &&
          cm_set_count(&p.mems) == 2 && !strcmp(p.resctrl_group, "cosched_42") &&
          !strcmp(p.l3_schemata, "L3:0=7f;1=7f") && !strcmp(p.mb_schemata, "MB:0=50;1=50") && p.pinrt == 1 &&
          p.npinrt == 2 && !strcmp(p.pinrt_name[1], "PINRT_OBJECTIVE") && !strcmp(p.pinrt_value[0], "0.1"));
    CHECK(cp_parse(&p, "version=1", err, sizeof err) == 0 && !p.has_cpus && p.mempolicy == CP_MEM_UNSET &&
          p.pinrt == -1);
    /* mems= with local/default (or empty) is accepted and not used: a controller may always write it */
    CHECK(cp_parse(&p, "version=1\nmempolicy=default\nmems=0,7\n", err, sizeof err) == 0 && !p.has_mems);
    CHECK(cp_parse(&p, "version=1\nmempolicy=local\nmems=\n", err, sizeof err) == 0 && !p.has_mems);

    static const struct {
        const char *text, *want;
    } bad[] = {
        {"cpus=0\n", "no version=1 line"},
        {"version=2\n", "version=2 is not supported"},
        {"version=1\ncolour=red\n", "line 2: unknown key 'colour'"},
        {"version=1\ncpus=0-\n", "line 2: cpus='0-' is not a cpulist"},
        {"version=1\ncpus=0\ncpus=1\n", "line 3: cpus given twice"},
        {"version=1\njust words\n", "line 2: 'just words' is not key=value"},
        {"version=1\nmempolicy=bind\n", "mempolicy=bind or interleave needs mems=NODES"},
        {"version=1\nmempolicy=interleave\nmems=\n", "mempolicy=bind or interleave needs mems=NODES"},
        {"version=1\nmempolicy=spread\n", "mempolicy='spread' is unknown"},
        {"version=1\nresctrl_group=../etc\n", "resctrl_group='../etc' is not a plain name"},
        {"version=1\nresctrl_group=g\nl3_schemata=MB:0=50\n", "l3_schemata='MB:0=50' is not of the form"},
        {"version=1\nresctrl_group=g\nmb_schemata=MB:0=5x\n", "mb_schemata='MB:0=5x' is not of the form"},
        {"version=1\nl3_schemata=L3:0=f\n", "need resctrl_group=NAME"},
        {"version=1\npinrt=2\n", "pinrt='2' must be 0 or 1"},
        {"version=1\npinrt=1\nPINRT_COLOUR=red\n", "PINRT_COLOUR is not a runtime option"},
        {"version=1\npinrt=1\nPINRT_PERIOD=-1\n", "PINRT_PERIOD='-1' is not a number in [0.001, 3600]"},
        {"version=1\nPINRT_PERIOD=1\n", "PINRT_* lines need pinrt=1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        int rc = cp_parse(&p, bad[i].text, err, sizeof err);
        if (rc != -1 || !strstr(err, bad[i].want) || strchr(err, '\n')) {
            printf("placement %zu not rejected as '%s': rc %d '%s'\n", i, bad[i].want, rc, err);
            n_fail++;
        } else
            n_pass++;
    }
}

static void test_read(void)
{
    cp_placement p;
    char path[512], err[768], dir[300];
    snprintf(dir, sizeof dir, "%s/spool", tmpdir);
    CHECK(cp_read(&p, dir, 7, path, sizeof path, err, sizeof err) == 1 && strstr(path, "/spool/7.placement"));
    put("spool/7.placement", "version=1\ncpus=1\n");
    CHECK(cp_read(&p, dir, 7, path, sizeof path, err, sizeof err) == 0 && cm_set_has(&p.cpus, 1));
    put("spool/8.placement", "version=1\ncpus=x\n");
    CHECK(cp_read(&p, dir, 8, path, sizeof path, err, sizeof err) == -1 && strstr(err, "8.placement: line 2: cpus"));
}

static void fake_cpu(const char *root, int cpu, int pkg, int core)
{
    char rel[256], v[16];
    snprintf(rel, sizeof rel, "%s/sys/devices/system/cpu/cpu%d/topology/physical_package_id", root, cpu);
    snprintf(v, sizeof v, "%d\n", pkg);
    put(rel, v);
    snprintf(rel, sizeof rel, "%s/sys/devices/system/cpu/cpu%d/topology/core_id", root, cpu);
    snprintf(v, sizeof v, "%d\n", core);
    put(rel, v);
}

static void test_cores_and_check(void)
{
    /* 2 packages x 2 cores x 2 threads, Linux numbering across packages first:
     * cpu0 p0c0, cpu1 p1c0, cpu2 p0c1, cpu3 p1c1, cpu4..7 their siblings. */
    static const int PKG[8] = {0, 1, 0, 1, 0, 1, 0, 1}, CORE[8] = {0, 0, 1, 1, 0, 0, 1, 1};
    for (int c = 0; c < 8; c++)
        fake_cpu("ht", c, PKG[c], CORE[c]);
    put("ht/sys/devices/system/cpu/online", "0-7\n");
    put("ht/sys/devices/system/node/online", "0-1\n");
    char root[300], err[512], buf[64];
    snprintf(root, sizeof root, "%s/ht", tmpdir);
    cm_cpuset cpus;
    CHECK(cp_cores_to_cpus(root, "0", &cpus, err, sizeof err) == 0);
    cm_format_cpulist(&cpus, buf, sizeof buf);
    CHECK(!strcmp(buf, "0,4")); /* core 0 = package 0 core 0, both threads */
    CHECK(cp_cores_to_cpus(root, "1-2", &cpus, err, sizeof err) == 0);
    cm_format_cpulist(&cpus, buf, sizeof buf);
    CHECK(!strcmp(buf, "1-2,5-6")); /* p0c1 = 2,6; p1c0 = 1,5 */
    CHECK(cp_cores_to_cpus(root, "4", &cpus, err, sizeof err) == -1 && strstr(err, "core 4") && strstr(err, "4 cores"));
    CHECK(cp_cores_to_cpus(root, "a", &cpus, err, sizeof err) == -1);

    cp_placement p;
    CHECK(cp_parse(&p, "version=1\ncpus=1,5\nmempolicy=bind\nmems=1\n", err, sizeof err) == 0);
    CHECK(cp_cores_to_cpus(root, "1-2", &cpus, err, sizeof err) == 0 && cp_check(&p, &cpus, root, err, sizeof err) == 0);
    CHECK(cp_cores_to_cpus(root, "1", &cpus, err, sizeof err) == 0 && cp_check(&p, &cpus, root, err, sizeof err) == -1 &&
          strstr(err, "CPU 1 is outside the CPUs Slurm allocated to the step (2,6)"));
    CHECK(cp_parse(&p, "version=1\nmempolicy=interleave\nmems=0,2\n", err, sizeof err) == 0);
    CHECK(cp_check(&p, &cpus, root, err, sizeof err) == -1 && strstr(err, "NUMA node 2 is not online"));

    /* no topology files: one core per CPU */
    put("flat/sys/devices/system/cpu/online", "0-3\n");
    snprintf(root, sizeof root, "%s/flat", tmpdir);
    CHECK(cp_cores_to_cpus(root, "2-3", &cpus, err, sizeof err) == 0);
    cm_format_cpulist(&cpus, buf, sizeof buf);
    CHECK(!strcmp(buf, "2-3"));
    snprintf(root, sizeof root, "%s/nothing", tmpdir);
    CHECK(cp_cores_to_cpus(root, "0", &cpus, err, sizeof err) == -1 && strstr(err, "online CPUs"));
}

static void test_resctrl(void)
{
    char root[300], path[400], buf[512], err[512];
    cp_placement p;
    int created = -1;
    CHECK(cp_parse(&p, "version=1\nresctrl_group=job9\nl3_schemata=L3:0=f\nmb_schemata=MB:0=30\n", err,
                   sizeof err) == 0);
    snprintf(root, sizeof root, "%s/noresctrl", tmpdir);
    mkdir(root, 0755);
    CHECK(cp_resctrl_create(root, &p, &created, err, sizeof err) == -1 && strstr(err, "resctrl is not mounted") &&
          !created);
    /* FAKE resctrl root: a directory with the root group's files */
    put("resctrl/schemata", "L3:0=fff\nMB:0=100\n");
    put("resctrl/tasks", "");
    snprintf(root, sizeof root, "%s/resctrl", tmpdir);
    CHECK(cp_resctrl_create(root, &p, &created, err, sizeof err) == 0 && created == 1);
    snprintf(path, sizeof path, "%s/job9/schemata", root);
    CHECK(slurp(path, buf, sizeof buf) == 0 && !strcmp(buf, "L3:0=f\nMB:0=30\n"));
    cp_placement q = p;
    q.l3_schemata[0] = q.mb_schemata[0] = '\0';
    CHECK(cp_resctrl_create(root, &p, &created, err, sizeof err) == 0 && created == 0); /* another step's group */
    CHECK(slurp(path, buf, sizeof buf) == 0 && !strcmp(buf, "L3:0=f\nMB:0=30\n"));            /* written again, same */
    CHECK(cp_resctrl_create(root, &q, &created, err, sizeof err) == 0 && created == 0);
    CHECK(cp_resctrl_add(root, "job9", 1234, err, sizeof err) == 0 && cp_resctrl_add(root, "job9", 1235, err, sizeof err) == 0);
    snprintf(path, sizeof path, "%s/job9/tasks", root);
    CHECK(slurp(path, buf, sizeof buf) == 0 && !strcmp(buf, "1234\n1235\n"));
    CHECK(cp_resctrl_remove(root, "job9", err, sizeof err) == 0);
    snprintf(path, sizeof path, "%s/job9", root);
    struct stat st;
    CHECK(stat(path, &st) == -1 && errno == ENOENT);
    CHECK(cp_resctrl_remove(root, "job9", err, sizeof err) == 0); /* already gone: fine */
    CHECK(cp_resctrl_add(root, "job9", 1, err, sizeof err) == -1 && strstr(err, "job9/tasks"));
}

static void test_env(void)
{
    cp_placement p;
    cp_opts o = {0, 0};
    cp_env e;
    char err[512], lib[300];
    snprintf(lib, sizeof lib, "%s/libpinrt.so", tmpdir);
    put("libpinrt.so", "not really a library");
    CHECK(cp_parse(&p, "version=1\n", err, sizeof err) == 0);
    CHECK(!cp_runtime_wanted(&p, &o) && cp_build_env(&e, &p, &o, lib, NULL, err, sizeof err) == 0 && e.n == 0);
    o.pinrt = 1; /* --cosched=pinrt and the placement does not say */
    CHECK(cp_build_env(&e, &p, &o, lib, "", err, sizeof err) == 0 && e.n == 1 && !strcmp(e.name[0], "LD_PRELOAD") &&
          !strcmp(e.value[0], lib));
    CHECK(cp_parse(&p, "version=1\npinrt=0\n", err, sizeof err) == 0 && !cp_runtime_wanted(&p, &o));
    o.pinrt = 0;
    CHECK(cp_parse(&p, "version=1\npinrt=1\nPINRT_SEED=5\nPINRT_LOG=info\n", err, sizeof err) == 0);
    CHECK(cp_build_env(&e, &p, &o, lib, "/other.so", err, sizeof err) == 0 && e.n == 3);
    char want[400];
    snprintf(want, sizeof want, "%s:/other.so", lib);
    CHECK(!strcmp(e.name[0], "PINRT_SEED") && !strcmp(e.value[0], "5") && !strcmp(e.name[1], "PINRT_LOG") &&
          !strcmp(e.name[2], "LD_PRELOAD") && !strcmp(e.value[2], want));
    snprintf(want, sizeof want, "/a.so:%s", lib); /* a step inside a batch job: already there */
    CHECK(cp_build_env(&e, &p, &o, lib, want, err, sizeof err) == 0 && e.n == 3 && !strcmp(e.value[2], want));
    snprintf(want, sizeof want, "%s.old", lib); /* a longer name is another library */
    CHECK(cp_build_env(&e, &p, &o, lib, want, err, sizeof err) == 0 && strstr(e.value[2], ":") == e.value[2] + strlen(lib));
    CHECK(cp_build_env(&e, &p, &o, "", NULL, err, sizeof err) == -1 && strstr(err, "no pinrt_lib"));
    CHECK(cp_build_env(&e, &p, &o, "/nonexistent/libpinrt.so", NULL, err, sizeof err) == -1 &&
          strstr(err, "not readable"));
}

/* Runs cp_apply_self in a child; the child reports its affinity and policy. */
static int apply_in_child(const char *text, char *cpus_out, int *mode_out, char *err_out)
{
    int fd[2];
    if (pipe(fd))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        cp_placement p;
        char err[512] = "", line[1024];
        int rc = cp_parse(&p, text, err, sizeof err);
        if (!rc)
            rc = cp_apply_self(&p, err, sizeof err);
        cpu_set_t s;
        sched_getaffinity(0, sizeof s, &s);
        cm_cpuset now;
        cm_set_zero(&now);
        for (int c = 0; c < CPU_SETSIZE && c < CM_MAX_CPUS; c++)
            if (CPU_ISSET(c, &s))
                cm_set_add(&now, c);
        char buf[256];
        cm_format_cpulist(&now, buf, sizeof buf);
        int mode = -1;
        unsigned long mask[16] = {0};
        syscall(SYS_get_mempolicy, &mode, mask, 1025UL, NULL, 0UL);
        snprintf(line, sizeof line, "%d %s %d %s", rc, buf, mode, err);
        if (write(fd[1], line, strlen(line) + 1) < 0)
            _exit(2);
        _exit(0);
    }
    close(fd[1]);
    char line[1024] = "";
    ssize_t n = read(fd[0], line, sizeof line - 1);
    close(fd[0]);
    waitpid(pid, NULL, 0);
    if (n <= 0)
        return -1;
    line[n] = '\0';
    int rc, used = 0;
    if (sscanf(line, "%d %255s %d %n", &rc, cpus_out, mode_out, &used) < 3)
        return -1;
    strcpy(err_out, line + used);
    return rc;
}

static void test_apply_self(void)
{
    cpu_set_t s;
    sched_getaffinity(0, sizeof s, &s);
    int last = -1;
    cm_cpuset all;
    cm_set_zero(&all);
    for (int c = 0; c < CPU_SETSIZE && c < CM_MAX_CPUS; c++)
        if (CPU_ISSET(c, &s)) {
            last = c;
            cm_set_add(&all, c);
        }
    char allbuf[256], text[512], cpus[256], err[512];
    cm_format_cpulist(&all, allbuf, sizeof allbuf);
    int mode;
    /* modes of get_mempolicy(2): 0 default, 2 bind, 3 interleave, 4 local */
    snprintf(text, sizeof text, "version=1\ncpus=%d\nmempolicy=bind\nmems=0\n", last);
    CHECK(apply_in_child(text, cpus, &mode, err) == 0 && atoi(cpus) == last && !strchr(cpus, ',') &&
          !strchr(cpus, '-') && mode == 2);
    CHECK(apply_in_child("version=1\nmempolicy=interleave\nmems=0\n", cpus, &mode, err) == 0 &&
          !strcmp(cpus, allbuf) && mode == 3);
    CHECK(apply_in_child("version=1\nmempolicy=local\n", cpus, &mode, err) == 0 && mode == 4);
    /* a node that does not exist: set_mempolicy fails, the CPUs are given back */
    snprintf(text, sizeof text, "version=1\ncpus=%d\nmempolicy=bind\nmems=1000\n", last);
    CHECK(apply_in_child(text, cpus, &mode, err) == -1 && strstr(err, "set_mempolicy(bind mems=1000) failed") &&
          !strcmp(cpus, allbuf) && mode == 0);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "%s/test_placement.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_conf_and_opts();
    test_parse();
    test_read();
    test_cores_and_check();
    test_resctrl();
    test_env();
    test_apply_self();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd))
        printf("could not remove %s\n", tmpdir);
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
