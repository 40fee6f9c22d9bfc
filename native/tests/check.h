/* The C tests' one assertion: counts, prints the failing condition, goes on.
 * Each test program ends with "N passed, N failed". */
#ifndef PINRT_CHECK_H
#define PINRT_CHECK_H
#include <stdio.h>

static int n_pass, n_fail;
#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (cond)                                                                                                      \
            n_pass++;                                                                                                  \
        else {                                                                                                         \
            n_fail++;                                                                                                  \
            printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                                                     \
        }                                                                                                              \
    } while (0)
#endif
