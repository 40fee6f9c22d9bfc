#include "learner.h"

#include <stdlib.h>
#include <string.h>

/* ---- PRNG ------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void pl_rng_seed(pl_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t pl_rng_next(pl_rng *r)
{
    uint64_t *s = r->s;
    uint64_t res = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return res;
}

double pl_rng_unif(pl_rng *r) { return (double)(pl_rng_next(r) >> 11) * 0x1.0p-53; }

int pl_rng_below(pl_rng *r, int n)
{
    if (n <= 1)
        return 0;
    return (int)(((pl_rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

/* ---- parameters --------------------------------------------------------- */

void pl_params_default(pl_params *p)
{
    memset(p, 0, sizeof *p);
    p->objective = PL_O2; /* the papers' experiments: O2 with gamma = 0.04 */
    p->gamma = 0.04;
    p->utility = PL_UTIL_SHARED;
    p->core_rl = 1;
    p->domain_al = 1;
    p->eps = 0.3;
    p->nu = 0.05;
    p->lambda = 0.02;
    p->eps_a = 0.5;
    p->lambda_a = 0.05;
    p->eta = 1.25;
    p->numa_every = 5;
    p->seed = 1;
}

/* ---- learner ------------------------------------------------------------ */

struct pl_thread {
    int used;
    int domain, unit;
    double u_last;
    double ubar;
    int ubar_init;
    /* aspiration learning state */
    double vbar, b_low, b_high, v_acc;
    int v_n, al_init;
};

struct pl_learner {
    pl_params p;
    int nunits, ndomains;
    int *unit_domain;     /* effective domain of each unit */
    int *dom_first;       /* first unit of each domain */
    int *dom_count;       /* units in each domain */
    int max_threads;
    struct pl_thread *th;
    double *x;            /* max_threads * nunits nominal strategies */
    double *vn;           /* scratch: normalised speeds (compact) */
    int *idx;             /* scratch: slots of used threads */
    int nthreads;
    int rr_next;
    long epoch;
    double vref, last_f;
    pl_rng rng;
};

pl_learner *pl_create(const pl_params *p, int nunits, const int *unit_domain, int max_threads)
{
    if (!p || nunits <= 0 || !unit_domain || max_threads <= 0)
        return NULL;
    if (p->eta <= 1.0 || p->numa_every < 1 || p->eps <= 0 || p->gamma < 0)
        return NULL;
    for (int u = 0; u < nunits; u++) {
        if (unit_domain[u] < 0 || (u > 0 && unit_domain[u] < unit_domain[u - 1]))
            return NULL;
        if (u > 0 && unit_domain[u] > unit_domain[u - 1] + 1)
            return NULL; /* a domain without units */
        if (u == 0 && unit_domain[0] != 0)
            return NULL;
    }
    pl_learner *L = calloc(1, sizeof *L);
    if (!L)
        return NULL;
    L->p = *p;
    L->nunits = nunits;
    L->ndomains = p->domain_al ? unit_domain[nunits - 1] + 1 : 1;
    L->max_threads = max_threads;
    L->unit_domain = calloc((size_t)nunits, sizeof(int));
    L->dom_first = calloc((size_t)L->ndomains, sizeof(int));
    L->dom_count = calloc((size_t)L->ndomains, sizeof(int));
    L->th = calloc((size_t)max_threads, sizeof(struct pl_thread));
    L->x = calloc((size_t)max_threads * (size_t)nunits, sizeof(double));
    L->vn = calloc((size_t)max_threads, sizeof(double));
    L->idx = calloc((size_t)max_threads, sizeof(int));
    if (!L->unit_domain || !L->dom_first || !L->dom_count || !L->th || !L->x || !L->vn || !L->idx) {
        pl_destroy(L);
        return NULL;
    }
    for (int u = 0; u < nunits; u++) {
        int d = p->domain_al ? unit_domain[u] : 0;
        L->unit_domain[u] = d;
        if (L->dom_count[d]++ == 0)
            L->dom_first[d] = u;
    }
    pl_rng_seed(&L->rng, p->seed);
    return L;
}

void pl_destroy(pl_learner *L)
{
    if (!L)
        return;
    free(L->unit_domain);
    free(L->dom_first);
    free(L->dom_count);
    free(L->th);
    free(L->x);
    free(L->vn);
    free(L->idx);
    free(L);
}

static double *xrow(const pl_learner *L, int slot) { return L->x + (size_t)slot * (size_t)L->nunits; }

/* Every domain's sub-vector is its own simplex, so a thread that changes
 * domain resumes the strategy it had there (uniform the first time). */
static void reset_strategy(pl_learner *L, int slot)
{
    double *x = xrow(L, slot);
    for (int d = 0; d < L->ndomains; d++)
        for (int k = 0; k < L->dom_count[d]; k++)
            x[L->dom_first[d] + k] = 1.0 / L->dom_count[d];
    L->th[slot].ubar_init = 0;
}

static void place_rr(pl_learner *L, int slot)
{
    struct pl_thread *t = &L->th[slot];
    int u = L->rr_next++ % L->nunits;
    t->unit = u;
    t->domain = L->unit_domain[u];
    if (!L->p.core_rl)
        t->unit = -1;
}

int pl_add_thread(pl_learner *L)
{
    for (int s = 0; s < L->max_threads; s++) {
        if (L->th[s].used)
            continue;
        memset(&L->th[s], 0, sizeof L->th[s]);
        L->th[s].used = 1;
        reset_strategy(L, s);
        place_rr(L, s);
        L->nthreads++;
        return s;
    }
    return -1;
}

void pl_remove_thread(pl_learner *L, int slot)
{
    if (slot < 0 || slot >= L->max_threads || !L->th[slot].used)
        return;
    L->th[slot].used = 0;
    L->nthreads--;
    L->rr_next = 0;
    for (int s = 0; s < L->max_threads; s++) {
        if (!L->th[s].used)
            continue;
        reset_strategy(L, s);
        place_rr(L, s);
        L->th[s].al_init = 0;
        L->th[s].v_acc = 0;
        L->th[s].v_n = 0;
    }
}

static int sample_unit(pl_learner *L, int slot, int d)
{
    const double *x = xrow(L, slot);
    int first = L->dom_first[d], n = L->dom_count[d];
    /* sigma = (1-lambda) x + lambda/|A| is the mixture "uniform with
     * probability lambda, else x": one draw picks the branch. */
    double r = pl_rng_unif(&L->rng), lam = L->p.lambda;
    if (r < lam)
        return first + (int)(r / lam * n < n ? r / lam * n : n - 1);
    r = (r - lam) / (1.0 - lam);
    double acc = 0;
    for (int k = 0; k < n; k++) {
        acc += x[first + k];
        if (r < acc)
            return first + k;
    }
    return first + n - 1; /* rounding */
}

void pl_set_domain(pl_learner *L, int slot, int domain)
{
    if (slot < 0 || slot >= L->max_threads || !L->th[slot].used || domain < 0 || domain >= L->ndomains)
        return;
    struct pl_thread *t = &L->th[slot];
    if (t->domain == domain)
        return;
    t->domain = domain;
    t->unit = L->p.core_rl ? sample_unit(L, slot, domain) : -1;
}

double pl_objective_of(int objective, double gamma, const double *v, int n)
{
    if (n <= 0)
        return 0;
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += v[i];
    double mean = sum / n;
    if (objective != PL_O2)
        return mean;
    double f = 0;
    for (int i = 0; i < n; i++)
        f += v[i] - gamma * (v[i] - mean) * (v[i] - mean);
    return f / n;
}

static void rl_update(pl_learner *L, int slot, double u)
{
    struct pl_thread *t = &L->th[slot];
    if (!t->ubar_init) {
        t->ubar = u;
        t->ubar_init = 1;
        return;
    }
    if (u > t->ubar && t->unit >= 0) {
        double step = t->ubar > 0 ? L->p.eps * u / t->ubar : 1.0;
        if (step > 1.0)
            step = 1.0; /* keeps x in the simplex */
        double *x = xrow(L, slot) + L->dom_first[t->domain];
        int n = L->dom_count[t->domain];
        double keep = 1.0 - step;
        for (int k = 0; k < n; k++) /* x + step (e_a - x), branch-free */
            x[k] *= keep;
        x[t->unit - L->dom_first[t->domain]] += step;
    }
    t->ubar += L->p.nu * (u - t->ubar);
}

static void al_update(pl_learner *L, int slot)
{
    struct pl_thread *t = &L->th[slot];
    if (t->v_n == 0)
        return;
    double v = t->v_acc / t->v_n;
    t->v_acc = 0;
    t->v_n = 0;
    if (!t->al_init) {
        t->vbar = v;
        t->b_high = v;
        t->b_low = v / L->p.eta;
        t->al_init = 1;
        return;
    }
    t->vbar += L->p.eps_a * (v - t->vbar);
    int sw = 0;
    if (t->vbar < t->b_low)
        sw = 1; /* performance fell: explore at once */
    else if (t->vbar < t->b_high)
        sw = pl_rng_unif(&L->rng) < L->p.lambda_a;
    if (t->vbar >= t->b_high) {
        t->b_high = t->vbar;
        t->b_low = t->vbar / L->p.eta;
    } else if (t->vbar <= t->b_low) {
        t->b_low = t->vbar;
        t->b_high = L->p.eta * t->vbar;
    }
    if (sw && L->ndomains > 1) {
        int d = pl_rng_below(&L->rng, L->ndomains - 1);
        if (d >= t->domain)
            d++;
        t->domain = d;
        t->unit = -1; /* chosen below from the domain's strategy */
    }
}

int pl_epoch(pl_learner *L, const double *speed, pl_assign *out)
{
    int n = 0;
    double vmax = 0;
    for (int s = 0; s < L->max_threads; s++) {
        if (!L->th[s].used)
            continue;
        if (speed[s] < 0)
            continue; /* not measured this epoch: left out, keeps its action */
        double v = speed[s];
        if (v > vmax)
            vmax = v;
        L->idx[n] = s;
        L->vn[n++] = v;
    }
    if (n == 0) {
        L->epoch++;
        if (out)
            for (int s = 0; s < L->max_threads; s++)
                if (L->th[s].used)
                    out[s] = pl_current(L, s);
        return 0;
    }
    /* O2's penalty is taken on speeds normalised by the largest speed seen,
     * so gamma is unit-free while f keeps the unit of a speed (and the ratio
     * u/ubar of the RL step stays meaningful). */
    if (vmax > L->vref)
        L->vref = vmax;
    double g = L->vref > 0 ? L->p.gamma / L->vref : 0;
    double mean = 0;
    for (int i = 0; i < n; i++)
        mean += L->vn[i];
    mean /= n;
    double f = pl_objective_of(L->p.objective, g, L->vn, n);
    L->last_f = f;
    int al_now = L->p.domain_al && L->ndomains > 1 && (L->epoch + 1) % L->p.numa_every == 0;
    int changed = 0;
    for (int i = 0; i < n; i++) {
        int s = L->idx[i];
        struct pl_thread *t = &L->th[s];
        double v = L->vn[i];
        double u = f;
        if (L->p.utility == PL_UTIL_OWN)
            u = L->p.objective == PL_O2 ? v - g * (v - mean) * (v - mean) : v;
        t->u_last = u;
        int od = t->domain, ou = t->unit;
        if (L->p.core_rl)
            rl_update(L, s, u);
        if (L->p.domain_al && L->ndomains > 1) {
            t->v_acc += v;
            t->v_n++;
            if (al_now)
                al_update(L, s);
        }
        if (L->p.core_rl)
            t->unit = sample_unit(L, s, t->domain);
        else
            t->unit = -1;
        if (t->unit != ou || t->domain != od)
            changed++;
        if (out) {
            out[s].domain = t->domain;
            out[s].unit = t->unit;
        }
    }
    if (out)
        for (int s = 0; s < L->max_threads; s++)
            if (L->th[s].used && speed[s] < 0)
                out[s] = pl_current(L, s);
    L->epoch++;
    return changed;
}

pl_assign pl_current(const pl_learner *L, int slot)
{
    pl_assign a = {-1, -1};
    if (slot >= 0 && slot < L->max_threads && L->th[slot].used) {
        a.domain = L->th[slot].domain;
        a.unit = L->th[slot].unit;
    }
    return a;
}

int pl_used(const pl_learner *L, int slot) { return slot >= 0 && slot < L->max_threads && L->th[slot].used; }
int pl_nthreads(const pl_learner *L) { return L->nthreads; }
int pl_max_threads(const pl_learner *L) { return L->max_threads; }
long pl_epochs(const pl_learner *L) { return L->epoch; }
double pl_last_objective(const pl_learner *L) { return L->last_f; }
double pl_last_utility(const pl_learner *L, int slot) { return pl_used(L, slot) ? L->th[slot].u_last : 0; }

double pl_strategy(const pl_learner *L, int slot, int unit)
{
    if (!pl_used(L, slot) || unit < 0 || unit >= L->nunits)
        return 0;
    return xrow(L, slot)[unit];
}
