#include "harness.h"

#include <string.h>

void hx_init(hx_world *w, int nunits, const double *cap, const int *unit_domain, uint64_t seed)
{
    memset(w, 0, sizeof *w);
    w->nunits = nunits;
    for (int u = 0; u < nunits; u++) {
        w->cap[u] = cap[u];
        w->unit_domain[u] = unit_domain ? unit_domain[u] : 0;
        if (w->unit_domain[u] + 1 > w->ndomains)
            w->ndomains = w->unit_domain[u] + 1;
    }
    for (int i = 0; i < HX_MAX_THREADS; i++)
        w->home[i] = -1;
    pl_rng_seed(&w->rng, seed ^ 0x5eedULL);
}

static void speeds_of(const hx_world *w, int n, const int *unit, const int *dom, const int *home, double *v)
{
    int cnt[HX_MAX_UNITS] = {0}, dcnt[HX_MAX_UNITS] = {0};
    double dcap[HX_MAX_UNITS] = {0};
    for (int u = 0; u < w->nunits; u++)
        dcap[w->unit_domain[u]] += w->cap[u];
    for (int i = 0; i < n; i++) {
        if (unit[i] >= 0)
            cnt[unit[i]]++;
        else
            dcnt[dom[i]]++;
    }
    for (int i = 0; i < n; i++) {
        double s = unit[i] >= 0 ? w->cap[unit[i]] / cnt[unit[i]] : dcap[dom[i]] / dcnt[dom[i]];
        if (home[i] >= 0 && home[i] != dom[i])
            s *= 1.0 - w->remote_penalty;
        v[i] = s;
    }
}

static int collect(const hx_world *w, const pl_learner *L, int *slot, int *unit, int *dom, int *home)
{
    int n = 0;
    for (int s = 0; s < pl_max_threads(L) && n < HX_MAX_THREADS; s++) {
        if (!pl_used(L, s))
            continue;
        pl_assign a = pl_current(L, s);
        slot[n] = s;
        unit[n] = a.unit;
        dom[n] = a.domain;
        home[n] = w->home[s % HX_MAX_THREADS];
        n++;
    }
    return n;
}

void hx_speeds(hx_world *w, const pl_learner *L, double *speed, int noisy)
{
    int slot[HX_MAX_THREADS], unit[HX_MAX_THREADS], dom[HX_MAX_THREADS], home[HX_MAX_THREADS];
    double v[HX_MAX_THREADS];
    int n = collect(w, L, slot, unit, dom, home);
    speeds_of(w, n, unit, dom, home, v);
    for (int i = 0; i < n; i++) {
        double s = v[i];
        if (noisy && w->noise > 0)
            s *= 1.0 + w->noise * (2.0 * pl_rng_unif(&w->rng) - 1.0);
        speed[slot[i]] = s;
    }
}

double hx_objective(hx_world *w, const pl_learner *L, int objective, double gamma)
{
    int slot[HX_MAX_THREADS], unit[HX_MAX_THREADS], dom[HX_MAX_THREADS], home[HX_MAX_THREADS];
    double v[HX_MAX_THREADS];
    int n = collect(w, L, slot, unit, dom, home);
    speeds_of(w, n, unit, dom, home, v);
    return pl_objective_of(objective, gamma, v, n);
}

double hx_best(const hx_world *w, int n, int objective, double gamma)
{
    int unit[HX_MAX_THREADS] = {0}, dom[HX_MAX_THREADS] = {0}, home[HX_MAX_THREADS];
    double v[HX_MAX_THREADS], best = -1e300;
    for (int i = 0; i < n; i++)
        home[i] = w->home[i];
    for (;;) {
        for (int i = 0; i < n; i++)
            dom[i] = w->unit_domain[unit[i]];
        speeds_of(w, n, unit, dom, home, v);
        double f = pl_objective_of(objective, gamma, v, n);
        if (f > best)
            best = f;
        int i = 0;
        while (i < n && ++unit[i] == w->nunits)
            unit[i++] = 0;
        if (i == n)
            break;
    }
    return best;
}

int hx_epochs_to_reach(const pl_params *p, int nunits, const double *cap, int nthreads,
                       double noise, double frac, int win, int max_epochs)
{
    hx_world w;
    int ud[HX_MAX_UNITS] = {0};
    hx_init(&w, nunits, cap, ud, p->seed);
    w.noise = noise;
    pl_learner *L = pl_create(p, nunits, ud, nthreads);
    if (!L)
        return -2;
    for (int i = 0; i < nthreads; i++)
        pl_add_thread(L);
    double best = hx_best(&w, nthreads, p->objective, p->gamma);
    double speed[HX_MAX_THREADS], hist[1024] = {0}, acc = 0;
    int res = -1;
    if (win > 1024)
        win = 1024;
    for (int k = 0; k < max_epochs; k++) {
        double f = hx_objective(&w, L, p->objective, p->gamma);
        acc += f - hist[k % win];
        hist[k % win] = f;
        if (k + 1 >= win && acc / win >= frac * best) {
            res = k + 1 - win;
            break;
        }
        hx_speeds(&w, L, speed, 1);
        pl_epoch(L, speed, NULL);
    }
    pl_destroy(L);
    return res;
}

int hx_drop_response(const pl_params *p, double drop_cap, int drop_at, int max_epochs, double noise)
{
    hx_world w;
    double cap[4] = {1, 1, 1, 1};
    int ud[4] = {0, 0, 1, 1};
    hx_init(&w, 4, cap, ud, p->seed);
    w.noise = noise;
    pl_learner *L = pl_create(p, 4, ud, 4);
    if (!L)
        return -2;
    for (int i = 0; i < 4; i++)
        pl_add_thread(L);
    double speed[4];
    for (int k = 0; k < drop_at; k++) {
        hx_speeds(&w, L, speed, 1);
        pl_epoch(L, speed, NULL);
    }
    /* Drop the domain holding most threads (domain 0 on a tie). */
    int cnt[2] = {0, 0};
    for (int s = 0; s < 4; s++)
        cnt[pl_current(L, s).domain]++;
    int dd = cnt[1] > cnt[0] ? 1 : 0;
    int on0[4], left[4], worst = 0, any = 0;
    for (int s = 0; s < 4; s++) {
        on0[s] = pl_current(L, s).domain == dd;
        left[s] = -1;
        any |= on0[s];
    }
    w.cap[2 * dd] = w.cap[2 * dd + 1] = drop_cap;
    for (int k = 1; k <= max_epochs; k++) {
        hx_speeds(&w, L, speed, 1);
        pl_epoch(L, speed, NULL);
        for (int s = 0; s < 4; s++)
            if (on0[s] && left[s] < 0 && pl_current(L, s).domain != dd)
                left[s] = k;
    }
    for (int s = 0; s < 4; s++) {
        if (!on0[s])
            continue;
        int e = left[s] < 0 ? max_epochs + 1 : left[s];
        if (e > worst)
            worst = e;
    }
    pl_destroy(L);
    return any ? worst : -3;
}
