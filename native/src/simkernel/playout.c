/* The continuous search's play-out with Fill deciding; see playout.h. Each
 * step mirrors env/planners/continuous.py (Fill.next_start, play_out, advance)
 * and env/sim/stream.py (StreamNode.advance) expression by expression. */
#include "playout.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "simgroup.h"

#define DONE 1e-9         /* env/sim/stream.py DONE */
#define RATE_TIE 1e-12    /* Fill: a job replaces the best only when its rate is higher by more */
#define MEMO_BITS 16      /* solves kept: 2^16 slots, emptied at 3/4 full */
#define MAX_DOMS 64

typedef struct {
    int k;                    /* 0: empty slot */
    int recs[SG_MAX_JOBS];
    double times[SG_MAX_JOBS];
} memo_slot;

typedef struct {
    int kind;                 /* -1: empty */
    uint64_t mask[SP_MASK_WORDS];
    int rec;
} kind_slot;

struct sp_ctx {
    double *node;
    int node_len, ndom, ncpus;
    int dom_id[MAX_DOMS], dom_ncpu[MAX_DOMS];
    int *dom_cpus[MAX_DOMS];
    uint64_t all[SP_MASK_WORDS];
    /* job records, one after another */
    double *rec_buf;
    size_t rec_used, rec_cap;
    size_t *rec_off;
    int *rec_len, nrec, rec_slots;
    /* (kind, CPUs) -> record */
    kind_slot *kinds;
    int kind_cap, kind_used;
    /* solves */
    memo_slot *memo;
    int memo_used;
    /* scratch for one solve's records */
    double *group;
    size_t group_cap;
    int py312; /* Python >= 3.12 sums floats with Neumaier's compensation */
};

static uint64_t hash_ints(const int *v, int n, uint64_t h) {
    for (int i = 0; i < n; i++)
        h = (h ^ (uint64_t)(uint32_t)v[i]) * 0x100000001b3ULL;
    return h;
}

static uint64_t hash_kind(int kind, const uint64_t *mask) {
    uint64_t h = 0xcbf29ce484222325ULL ^ (uint64_t)(uint32_t)kind;
    for (int w = 0; w < SP_MASK_WORDS; w++)
        h = (h ^ mask[w]) * 0x100000001b3ULL;
    return h ^ (h >> 29);
}

__attribute__((visibility("default"))) void sp_delete(sp_ctx *c) {
    if (!c)
        return;
    for (int d = 0; d < c->ndom; d++)
        free(c->dom_cpus[d]);
    free(c->node);
    free(c->rec_buf);
    free(c->rec_off);
    free(c->rec_len);
    free(c->kinds);
    free(c->memo);
    free(c->group);
    free(c);
}

__attribute__((visibility("default"))) sp_ctx *sp_new(const double *node, int node_len, int ndom, const int *dom_ids,
                                                      const int *dom_ncpu, const int *dom_cpus, int ncpus) {
    if (node_len < 1 || ndom < 1 || ndom > MAX_DOMS || ncpus < 1)
        return NULL;
    sp_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->node = malloc(sizeof(double) * (size_t)node_len);
    c->kinds = malloc(sizeof(kind_slot) * 1024);
    c->memo = calloc((size_t)1 << MEMO_BITS, sizeof(memo_slot));
    if (!c->node || !c->kinds || !c->memo) {
        sp_delete(c);
        return NULL;
    }
    memcpy(c->node, node, sizeof(double) * (size_t)node_len);
    c->node_len = node_len;
    c->ncpus = ncpus;
    c->kind_cap = 1024;
    for (int i = 0; i < c->kind_cap; i++)
        c->kinds[i].kind = -1;
    int off = 0;
    for (int d = 0; d < ndom; d++) {
        c->dom_id[d] = dom_ids[d];
        c->dom_ncpu[d] = dom_ncpu[d];
        c->dom_cpus[d] = malloc(sizeof(int) * (size_t)(dom_ncpu[d] > 0 ? dom_ncpu[d] : 1));
        c->ndom = d + 1;
        if (!c->dom_cpus[d]) {
            sp_delete(c);
            return NULL;
        }
        for (int i = 0; i < dom_ncpu[d]; i++) {
            int cpu = dom_cpus[off++];
            if (cpu < 0 || cpu >= SP_MAX_CPUS) {
                sp_delete(c);
                return NULL;
            }
            c->dom_cpus[d][i] = cpu;
            c->all[cpu / 64] |= 1ULL << (cpu % 64);
        }
    }
    return c;
}

__attribute__((visibility("default"))) void sp_set_py312(sp_ctx *c, int on) { c->py312 = on; }

static int kind_find(const sp_ctx *c, int kind, const uint64_t *mask) {
    uint64_t m = (uint64_t)c->kind_cap - 1;
    for (uint64_t i = hash_kind(kind, mask) & m;; i = (i + 1) & m) {
        const kind_slot *s = &c->kinds[i];
        if (s->kind < 0)
            return -1;
        if (s->kind == kind && !memcmp(s->mask, mask, sizeof s->mask))
            return s->rec;
    }
}

static int kind_put(sp_ctx *c, int kind, const uint64_t *mask, int rec) {
    if (2 * (c->kind_used + 1) > c->kind_cap) { /* grow, keeping every entry */
        int cap = 2 * c->kind_cap;
        kind_slot *k = malloc(sizeof(kind_slot) * (size_t)cap);
        if (!k)
            return -1;
        for (int i = 0; i < cap; i++)
            k[i].kind = -1;
        for (int j = 0; j < c->kind_cap; j++) {
            if (c->kinds[j].kind < 0)
                continue;
            uint64_t i = hash_kind(c->kinds[j].kind, c->kinds[j].mask) & (uint64_t)(cap - 1);
            while (k[i].kind >= 0)
                i = (i + 1) & (uint64_t)(cap - 1);
            k[i] = c->kinds[j];
        }
        free(c->kinds);
        c->kinds = k;
        c->kind_cap = cap;
    }
    uint64_t m = (uint64_t)c->kind_cap - 1;
    uint64_t i = hash_kind(kind, mask) & m;
    while (c->kinds[i].kind >= 0)
        i = (i + 1) & m;
    c->kinds[i].kind = kind;
    memcpy(c->kinds[i].mask, mask, sizeof c->kinds[i].mask);
    c->kinds[i].rec = rec;
    c->kind_used++;
    return 0;
}

__attribute__((visibility("default"))) int sp_add_record(sp_ctx *c, int kind, const uint64_t *mask, const double *rec,
                                                         int len) {
    if (len < 1)
        return -1;
    if (c->rec_used + (size_t)len > c->rec_cap) {
        size_t cap = c->rec_cap ? c->rec_cap : 4096;
        while (cap < c->rec_used + (size_t)len)
            cap *= 2;
        double *b = realloc(c->rec_buf, sizeof(double) * cap);
        if (!b)
            return -1;
        c->rec_buf = b;
        c->rec_cap = cap;
    }
    if (c->nrec == c->rec_slots) {
        int slots = c->rec_slots ? 2 * c->rec_slots : 256;
        size_t *o = realloc(c->rec_off, sizeof(size_t) * (size_t)slots);
        if (!o)
            return -1;
        c->rec_off = o;
        int *l = realloc(c->rec_len, sizeof(int) * (size_t)slots);
        if (!l)
            return -1;
        c->rec_len = l;
        c->rec_slots = slots;
    }
    if (kind >= 0 && kind_put(c, kind, mask, c->nrec))
        return -1;
    memcpy(c->rec_buf + c->rec_used, rec, sizeof(double) * (size_t)len);
    c->rec_off[c->nrec] = c->rec_used;
    c->rec_len[c->nrec] = len;
    c->rec_used += (size_t)len;
    return c->nrec++;
}

/* model.solve over the records, memoised; 0, or -1 when the kernel refuses them. */
static int solve_memo(sp_ctx *c, const int *recs, int k, double *times) {
    uint64_t m = ((uint64_t)1 << MEMO_BITS) - 1;
    uint64_t h = hash_ints(recs, k, 0xcbf29ce484222325ULL ^ (uint64_t)k);
    uint64_t i = (h ^ (h >> 31)) & m;
    for (;; i = (i + 1) & m) {
        memo_slot *s = &c->memo[i];
        if (!s->k)
            break;
        if (s->k == k && !memcmp(s->recs, recs, sizeof(int) * (size_t)k)) {
            memcpy(times, s->times, sizeof(double) * (size_t)k);
            return 0;
        }
    }
    size_t len = 0;
    for (int a = 0; a < k; a++)
        len += (size_t)c->rec_len[recs[a]];
    if (len > c->group_cap) {
        double *g = realloc(c->group, sizeof(double) * len);
        if (!g)
            return -1;
        c->group = g;
        c->group_cap = len;
    }
    size_t off = 0;
    for (int a = 0; a < k; a++) {
        memcpy(c->group + off, c->rec_buf + c->rec_off[recs[a]], sizeof(double) * (size_t)c->rec_len[recs[a]]);
        off += (size_t)c->rec_len[recs[a]];
    }
    if (sg_solve(c->node, c->node_len, c->group, (int)len, k, times))
        return -1;
    if (4 * (c->memo_used + 1) > 3 * (1 << MEMO_BITS)) { /* start afresh rather than probe a full table */
        memset(c->memo, 0, sizeof(memo_slot) * ((size_t)1 << MEMO_BITS));
        c->memo_used = 0;
        i = (h ^ (h >> 31)) & m;
    }
    while (c->memo[i].k)
        i = (i + 1) & m;
    c->memo[i].k = k;
    memcpy(c->memo[i].recs, recs, sizeof(int) * (size_t)k);
    memcpy(c->memo[i].times, times, sizeof(double) * (size_t)k);
    c->memo_used++;
    return 0;
}

/* Python's sum() over floats, started from the int 0 (so the first term is exact): left to right before 3.12,
 * with Neumaier's compensation since. */
typedef struct {
    double f, comp;
    int n, py312;
} pysum;

static void pysum_add(pysum *s, double x) {
    if (s->n++ == 0) {
        s->f = x;
        return;
    }
    double t = s->f + x;
    if (s->py312) {
        if (fabs(s->f) >= fabs(x))
            s->comp += (s->f - t) + x;
        else
            s->comp += (x - t) + s->f;
    }
    s->f = t;
}

static double pysum_value(const pysum *s) {
    double f = s->f;
    if (s->py312 && s->comp != 0.0 && isfinite(s->comp))
        f += s->comp;
    return s->n ? f : 0.0;
}

static int has(const uint64_t *m, int cpu) { return (int)((m[cpu / 64] >> (cpu % 64)) & 1); }
static void put(uint64_t *m, int cpu) { m[cpu / 64] |= 1ULL << (cpu % 64); }

/* env.plan.allocate.assign_cpus(node, n, "compact", taken): the free CPUs are `free`; the CPUs chosen in `out`. */
static void compact(const sp_ctx *c, const uint64_t *free, int n, uint64_t *out) {
    int nfree[MAX_DOMS];
    memset(out, 0, sizeof(uint64_t) * SP_MASK_WORDS);
    for (int d = 0; d < c->ndom; d++) {
        nfree[d] = 0;
        for (int i = 0; i < c->dom_ncpu[d]; i++)
            nfree[d] += has(free, c->dom_cpus[d][i]);
    }
    int best = -1; /* the fitting domain with the fewest free CPUs, ties to the lowest id */
    for (int d = 0; d < c->ndom; d++)
        if (nfree[d] >= n && (best < 0 || nfree[d] < nfree[best] || (nfree[d] == nfree[best] && c->dom_id[d] < c->dom_id[best])))
            best = d;
    int order[MAX_DOMS], nd = 0;
    if (best >= 0) {
        order[nd++] = best;
    } else { /* the domains with the most free CPUs first, ties to the lowest id */
        for (int d = 0; d < c->ndom; d++)
            order[nd++] = d;
        for (int a = 1; a < nd; a++)
            for (int b = a; b > 0; b--) {
                int x = order[b - 1], y = order[b];
                if (nfree[y] > nfree[x] || (nfree[y] == nfree[x] && c->dom_id[y] < c->dom_id[x])) {
                    order[b - 1] = y;
                    order[b] = x;
                } else {
                    break;
                }
            }
    }
    int got = 0;
    for (int o = 0; o < nd && got < n; o++) {
        int d = order[o];
        for (int i = 0; i < c->dom_ncpu[d] && got < n; i++)
            if (has(free, c->dom_cpus[d][i])) {
                put(out, c->dom_cpus[d][i]);
                got++;
            }
    }
}

static int popcount_mask(const uint64_t *m) {
    int n = 0;
    for (int w = 0; w < SP_MASK_WORDS; w++)
        n += __builtin_popcountll(m[w]);
    return n;
}

__attribute__((visibility("default"))) int sp_play_fill(sp_ctx *c, const sp_state *s, double *value, int *need_kind,
                                                        uint64_t *need_mask) {
    if (s->cmax < 1 || s->cmax > SG_MAX_JOBS || s->nrun > s->cmax || s->nq > SP_MAX_QUEUE || s->window < 1)
        return SP_ERROR;
    int rec[SG_MAX_JOBS], ncpu[SG_MAX_JOBS], nrun = s->nrun;
    double left[SG_MAX_JOBS], factor[SG_MAX_JOBS], solo[SG_MAX_JOBS];
    uint64_t mask[SG_MAX_JOBS][SP_MASK_WORDS];
    for (int a = 0; a < nrun; a++) {
        rec[a] = s->run_rec[a];
        if (rec[a] < 0 || rec[a] >= c->nrec)
            return SP_ERROR;
        left[a] = s->run_left[a];
        factor[a] = s->run_factor[a];
        solo[a] = s->run_solo[a];
        memcpy(mask[a], s->run_mask + (size_t)a * SP_MASK_WORDS, sizeof mask[a]);
        ncpu[a] = popcount_mask(mask[a]);
    }
    static _Thread_local int qk[SP_MAX_QUEUE], qn[SP_MAX_QUEUE];
    int nq = s->nq;
    memcpy(qk, s->q_kind, sizeof(int) * (size_t)nq);
    memcpy(qn, s->q_name, sizeof(int) * (size_t)nq);
    pysum ends = {0.0, 0.0, 0, c->py312};
    double last = -INFINITY, now = s->now, held = s->held;
    for (int e = 0; e < s->nends; e++) {
        pysum_add(&ends, s->ends[e]);
        if (s->ends[e] > last)
            last = s->ends[e];
    }
    for (;;) {
        int places = s->cmax - nrun;
        while (nq > 0 && places >= 1) { /* Fill.next_start */
            uint64_t free[SP_MASK_WORDS];
            memcpy(free, c->all, sizeof free);
            for (int a = 0; a < nrun; a++)
                for (int w = 0; w < SP_MASK_WORDS; w++)
                    free[w] &= ~mask[a][w];
            int nfree = popcount_mask(free);
            if (!nfree)
                break;
            int win[SP_MAX_QUEUE], nw = 0; /* the first of each program among the first W queued */
            for (int q = 0; q < nq && q < s->window; q++) {
                int seen = 0;
                for (int x = 0; x < nw && !seen; x++)
                    seen = qn[win[x]] == qn[q];
                if (!seen)
                    win[nw++] = q;
            }
            int n = places == 1 ? nfree : (nfree / places > 1 ? nfree / places : 1);
            uint64_t cpus[SP_MASK_WORDS];
            compact(c, free, n, cpus);
            int best = -1, best_rec = -1;
            double best_rate = 0.0;
            for (int x = 0; x < nw; x++) { /* _Rates.with_job */
                int kind = qk[win[x]];
                int r = kind_find(c, kind, cpus);
                if (r < 0) {
                    *need_kind = kind;
                    memcpy(need_mask, cpus, sizeof cpus);
                    return SP_NEED_RECORD;
                }
                int trial[SG_MAX_JOBS];
                double times[SG_MAX_JOBS];
                memcpy(trial, rec, sizeof(int) * (size_t)nrun);
                trial[nrun] = r;
                if (solve_memo(c, trial, nrun + 1, times))
                    return SP_ERROR;
                pysum rate = {0.0, 0.0, 0, c->py312};
                for (int a = 0; a < nrun; a++)
                    pysum_add(&rate, solo[a] / times[a]);
                pysum_add(&rate, s->kind_solo[kind] / times[nrun]);
                double v = pysum_value(&rate);
                if (best < 0 || v > best_rate + RATE_TIE) {
                    best = x;
                    best_rate = v;
                    best_rec = r;
                }
            }
            int q = win[best], kind = qk[q];
            rec[nrun] = best_rec;
            left[nrun] = 1.0;
            factor[nrun] = 1.0;
            solo[nrun] = s->kind_run_solo[kind];
            memcpy(mask[nrun], cpus, sizeof cpus);
            ncpu[nrun] = n;
            nrun++;
            memmove(qk + q, qk + q + 1, sizeof(int) * (size_t)(nq - q - 1));
            memmove(qn + q, qn + q + 1, sizeof(int) * (size_t)(nq - q - 1));
            nq--;
            places--;
        }
        if (!nrun)
            break;
        /* advance: to the next end */
        double times[SG_MAX_JOBS], rates[SG_MAX_JOBS], dt = 0.0;
        if (solve_memo(c, rec, nrun, times))
            return SP_ERROR;
        int busy = 0;
        for (int a = 0; a < nrun; a++) {
            busy += ncpu[a];
            rates[a] = 1.0 / (times[a] * factor[a]);
            double x = left[a] / rates[a];
            if (a == 0 || x < dt)
                dt = x;
        }
        double t0 = now;
        now += dt;
        int still = 0, ended = 0;
        for (int a = 0; a < nrun; a++) {
            left[a] -= rates[a] * dt;
            if (left[a] <= DONE) {
                ended++;
                continue;
            }
            rec[still] = rec[a];
            left[still] = left[a];
            factor[still] = factor[a];
            solo[still] = solo[a];
            ncpu[still] = ncpu[a];
            memcpy(mask[still], mask[a], sizeof mask[a]);
            still++;
        }
        if (!ended && nrun)
            return SP_ERROR; /* NaN times: the Python play-out says what is wrong */
        nrun = still;
        for (int e = 0; e < ended; e++) {
            pysum_add(&ends, now);
            if (now > last)
                last = now;
        }
        held += (double)busy / (double)c->ncpus * (now - t0);
    }
    if (nq)
        return SP_ERROR; /* jobs left with nothing running: cannot happen with Fill; Python decides */
    if (!ends.n)
        *value = 0.0;
    else
        *value = s->objective == SP_MAKESPAN ? last : pysum_value(&ends) + s->hold_weight * held;
    return SP_DONE;
}
