/* The registry the program's threads write (tid, stack range) under
 * rt.reg_lock; the manager reads stack ranges from it. */
#include <stdlib.h>
#include <string.h>

#include "rt.h"

void rt_reg_add(pid_t tid, uintptr_t lo, uintptr_t hi)
{
    pthread_mutex_lock(&rt.reg_lock);
    int i, fr = -1;
    for (i = 0; i < rt.reg_cap; i++) {
        if (rt.reg[i].tid == tid || (fr < 0 && rt.reg[i].tid == 0))
            fr = i;
        if (rt.reg[i].tid == tid)
            break;
    }
    if (fr < 0) {
        int ncap = rt.reg_cap ? 2 * rt.reg_cap : 64;
        struct reg_entry *n = realloc(rt.reg, (size_t)ncap * sizeof *n);
        if (n) {
            memset(n + rt.reg_cap, 0, (size_t)(ncap - rt.reg_cap) * sizeof *n);
            fr = rt.reg_cap;
            rt.reg = n;
            rt.reg_cap = ncap;
        }
    }
    if (fr >= 0) {
        rt.reg[fr].tid = tid;
        rt.reg[fr].lo = lo;
        rt.reg[fr].hi = hi;
    }
    pthread_mutex_unlock(&rt.reg_lock);
}

void rt_reg_del(pid_t tid)
{
    pthread_mutex_lock(&rt.reg_lock);
    for (int i = 0; i < rt.reg_cap; i++)
        if (rt.reg[i].tid == tid)
            rt.reg[i].tid = 0;
    pthread_mutex_unlock(&rt.reg_lock);
}

int rt_reg_stack(pid_t tid, uintptr_t *lo, uintptr_t *hi)
{
    int found = 0;
    pthread_mutex_lock(&rt.reg_lock);
    for (int i = 0; i < rt.reg_cap; i++) {
        if (rt.reg[i].tid == tid) {
            *lo = rt.reg[i].lo;
            *hi = rt.reg[i].hi;
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&rt.reg_lock);
    return found;
}

void rt_self_stack(uintptr_t *lo, uintptr_t *hi)
{
    pthread_attr_t a;
    void *addr = NULL;
    size_t size = 0;
    *lo = *hi = 0;
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
        if (pthread_attr_getstack(&a, &addr, &size) == 0) {
            *lo = (uintptr_t)addr;
            *hi = (uintptr_t)addr + size;
        }
        pthread_attr_destroy(&a);
    }
}
