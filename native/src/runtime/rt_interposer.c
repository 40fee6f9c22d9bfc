/* Discovery: pthread_create is interposed (dlsym(RTLD_NEXT)); each new
 * thread registers its tid and stack and deregisters on return, pthread_exit
 * or cancellation. The manager starts with the first pthread_create. */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "rt.h"

create_fn rt_real_create(void)
{
    create_fn f = atomic_load(&rt.real_create);
    if (!f) {
        f = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
        atomic_store(&rt.real_create, f);
    }
    return f;
}

struct start {
    void *(*fn)(void *);
    void *arg;
};

static void thread_gone(void *p) { rt_reg_del((pid_t)(intptr_t)p); }

static void *trampoline(void *p)
{
    struct start st = *(struct start *)p;
    free(p);
    pid_t tid = gettid();
    uintptr_t lo, hi;
    rt_self_stack(&lo, &hi);
    rt_reg_add(tid, lo, hi);
    void *ret;
    /* Runs on return, pthread_exit and cancellation alike. */
    pthread_cleanup_push(thread_gone, (void *)(intptr_t)tid);
    ret = st.fn(st.arg);
    pthread_cleanup_pop(1);
    return ret;
}

PR_EXPORT int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    create_fn real = rt_real_create();
    if (!real)
        return EAGAIN;
    if (atomic_load(&rt.level) == LV_OFF)
        return real(t, attr, fn, arg);
    /* The manager starts with the program's first thread: programs that never
     * create one (shells, numactl, taskset...) are left alone, and nothing a
     * wrapper sets before exec is disturbed. */
    if (atomic_load(&rt.restart) && atomic_exchange(&rt.restart, 0))
        rt_start_manager();
    struct start *st = malloc(sizeof *st);
    if (!st)
        return real(t, attr, fn, arg);
    st->fn = fn;
    st->arg = arg;
    int rc = real(t, attr, trampoline, st);
    if (rc)
        free(st);
    return rc;
}
