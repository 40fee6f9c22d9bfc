/* One option table per program: every option, its type, where it goes and its help line.
 * cs_parse() reads argv against the table (--name VALUE or --name=VALUE), prints --help from it,
 * and reports a bad option on one line of stderr. Shared by the measuring programs
 * (cosched-bubble, cosched-probe, cosched-membench). */
#ifndef COSCHED_OPTS_H
#define COSCHED_OPTS_H

typedef enum { CS_DOUBLE, CS_LONG, CS_STRING, CS_FLAG } cs_kind;

typedef struct {
    const char *name;  /* without the leading "--" */
    cs_kind kind;
    void *dst;         /* double*, long*, const char**, int* */
    double min, max;   /* inclusive range for CS_DOUBLE / CS_LONG */
    const char *help;
} cs_opt;

enum { CS_OK = 0, CS_HELP = 1, CS_BAD = 2 };

/* Parses argv[1..]. Positional arguments (not starting with "--") are stored in pos[0..*npos)
 * up to max_pos of them. Returns CS_OK, CS_HELP (help printed on stdout) or CS_BAD (one line on
 * stderr naming the option and what it takes). */
int cs_parse(int argc, char **argv, const cs_opt *table, int nopts, const char *usage,
             const char **pos, int max_pos, int *npos);

/* Prints the help text built from the table. */
void cs_help(const char *usage, const cs_opt *table, int nopts);

#endif
