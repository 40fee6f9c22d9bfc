/* cosched-ompbarrier: a fixed amount of OpenMP work with a barrier after every sweep.
 *
 * A 1-D stencil over --cells cells, --sweeps times, the cells of each sweep split statically over the threads
 * (OpenMP's default: as many as the CPUs the process may use when it starts), and every thread waiting for all
 * at the end of each sweep. How its threads wait is the OpenMP runtime's (OMP_WAIT_POLICY). It exists to measure
 * what re-pinning a running job onto fewer CPUs costs a program whose thread count was fixed at its start
 * (bench/giveback_cost.py). Prints one JSON line: threads, sweeps, seconds. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "opts.h"

int main(int argc, char **argv)
{
    long sweeps = 20000, cells = 4096;
    const cs_opt table[] = {
        {"sweeps", CS_LONG, &sweeps, 1, 1e12, "sweeps over the cells, each ended by a barrier (default 20000)"},
        {"cells", CS_LONG, &cells, 3, 1e9, "cells of the stencil (default 4096)"},
    };
    int npos = 0;
    int rc = cs_parse(argc, argv, table, (int)(sizeof table / sizeof table[0]), "cosched-ompbarrier [options]",
                      NULL, 0, &npos);
    if (rc != CS_OK)
        return rc == CS_HELP ? 0 : 2;
    double *a = malloc((size_t)cells * sizeof *a), *b = malloc((size_t)cells * sizeof *b);
    if (a == NULL || b == NULL) {
        fprintf(stderr, "cosched-ompbarrier: out of memory for %ld cells\n", cells);
        return 1;
    }
    for (long i = 0; i < cells; i++)
        a[i] = b[i] = (double)(i % 97) / 97.0;
    double t = omp_get_wtime();
    for (long s = 0; s < sweeps; s++) {
#pragma omp parallel for schedule(static)
        for (long i = 1; i < cells - 1; i++) {
            double x = a[i];
            for (int k = 0; k < 20; k++)
                x = x * 0.999 + 0.0005 * (a[i - 1] + a[i + 1]);
            b[i] = x;
        }
        double *tmp = a;
        a = b;
        b = tmp;
    }
    printf("{\"threads\": %d, \"sweeps\": %ld, \"seconds\": %.6f, \"check\": %.6f}\n", omp_get_max_threads(), sweeps,
           omp_get_wtime() - t, a[cells / 2]);
    free(a);
    free(b);
    return 0;
}
