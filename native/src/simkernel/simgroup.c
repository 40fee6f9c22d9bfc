/* The simulated node's group run; see simgroup.h. Every expression follows
 * env/sim/model.py's in the same order (built with -ffp-contract=off: no fused
 * multiply-add), so the doubles are the Python model's. */
#include "simgroup.h"

#include <stdint.h>

#define LRU_ROUNDS 3 /* model.LRU_ROUNDS */

typedef struct {
    int nd, nl3, iterations;
    double link, overlap;
    const double *bw, *way_mb;
} sg_node;

typedef struct {
    double tc, bmax, core_cap, ins_stream, ins_reuse, stream_gb, reuse_gb, ws_mb, ws2_mb, ws2_share;
    int n, n_routes, n_comm;
    const double *n_l3, *routes, *comm;
    uint64_t masks[SG_MAX_L3];
} sg_job;

static int whole(double x, double lo, double hi) { return x >= lo && x <= hi && (double)(int64_t)x == x; }

static int parse_node(sg_node *g, const double *r, int len) {
    if (len < 5 || !whole(r[0], 1, SG_MAX_DOMAINS) || !whole(r[1], 1, SG_MAX_L3) || !whole(r[4], 1, 1000))
        return -1;
    g->nd = (int)r[0];
    g->nl3 = (int)r[1];
    g->link = r[2];
    g->overlap = r[3];
    g->iterations = (int)r[4];
    if (len != 5 + g->nd + g->nl3)
        return -1;
    g->bw = r + 5;
    g->way_mb = r + 5 + g->nd;
    return 0;
}

/* One job record at r (at most len doubles left); returns its size or -1. */
static int parse_job(sg_job *j, const sg_node *g, const double *r, int len) {
    if (len < SG_HEAD || !whole(r[0], SG_HEAD, len) || !whole(r[11], 1, 1e9) ||
        !whole(r[12], 0, SG_MAX_DOMAINS * SG_MAX_DOMAINS) || !whole(r[13], 0, SG_MAX_DOMAINS * SG_MAX_DOMAINS))
        return -1;
    int size = (int)r[0];
    j->tc = r[1];
    j->bmax = r[2];
    j->core_cap = r[3];
    j->ins_stream = r[4];
    j->ins_reuse = r[5];
    j->stream_gb = r[6];
    j->reuse_gb = r[7];
    j->ws_mb = r[8];
    j->ws2_mb = r[9];
    j->ws2_share = r[10];
    j->n = (int)r[11];
    j->n_routes = (int)r[12];
    j->n_comm = (int)r[13];
    if (size != SG_HEAD + 2 * g->nl3 + 3 * j->n_routes + 3 * j->n_comm)
        return -1;
    j->n_l3 = r + SG_HEAD;
    for (int li = 0; li < g->nl3; li++) {
        if (!whole(j->n_l3[li], 0, j->n) || !whole(r[SG_HEAD + g->nl3 + li], 0, 9007199254740991.0))
            return -1;
        j->masks[li] = (uint64_t)r[SG_HEAD + g->nl3 + li];
    }
    j->routes = r + SG_HEAD + 2 * g->nl3;
    j->comm = j->routes + 3 * j->n_routes;
    for (int i = 0; i < j->n_routes; i++)
        if (!whole(j->routes[3 * i], 0, g->nd - 1) || !whole(j->routes[3 * i + 1], 0, g->nd - 1))
            return -1;
    for (int i = 0; i < j->n_comm; i++)
        if (!whole(j->comm[3 * i], 0, g->nd - 1) || !whole(j->comm[3 * i + 1], 0, g->nd - 1))
            return -1;
    return size;
}

static double miss_ratio(double mb, double ws1, double ws2, double share2) {
    if (mb <= 0.0)
        return 1.0;
    double r1 = mb / ws1;
    double r2 = mb / ws2;
    return (1.0 - share2) / (1.0 + r1 * r1 * r1) + share2 / (1.0 + r2 * r2 * r2);
}

static int popcount(uint64_t x) { return __builtin_popcountll(x); }

/* model._way_groups + model._share_ways: MB each holder gets of one L3 whose
 * holders' masks overlap without being all equal. */
static void share_ways(const uint64_t *masks, int h, const double *pressure, double wmb, double *eff) {
    uint64_t uni = 0;
    for (int i = 0; i < h; i++)
        uni |= masks[i];
    for (int i = 0; i < h; i++)
        eff[i] = 0.0;
    for (int pat = 1; pat < (1 << h); pat++) {
        uint64_t inside = uni, outside = 0;
        int members = 0, last = 0;
        for (int i = 0; i < h; i++) {
            if (pat >> i & 1) {
                inside &= masks[i];
                members++;
                last = i;
            } else {
                outside |= masks[i];
            }
        }
        int count = popcount(inside & ~outside);
        if (!count)
            continue;
        if (members == 1) {
            eff[last] += count * wmb;
            continue;
        }
        double tot = 0.0;
        for (int i = 0; i < h; i++)
            if (pat >> i & 1)
                tot += pressure[i];
        for (int i = 0; i < h; i++)
            if (pat >> i & 1)
                eff[i] += (tot > 0.0 ? count * pressure[i] / tot : (double)count / members) * wmb;
    }
}

/* model._cache_mb: MB of each L3 each running job holds, cache[a * SG_MAX_L3 + li]. */
static void cache_mb(const sg_node *g, const sg_job *const *jobs, int na, double *cache) {
    for (int a = 0; a < na; a++)
        for (int li = 0; li < g->nl3; li++)
            cache[a * SG_MAX_L3 + li] = 0.0;
    for (int li = 0; li < g->nl3; li++) {
        int who[SG_MAX_JOBS], h = 0;
        uint64_t masks[SG_MAX_JOBS];
        for (int a = 0; a < na; a++)
            if (jobs[a]->masks[li]) {
                who[h] = a;
                masks[h++] = jobs[a]->masks[li];
            }
        if (!h)
            continue;
        double wmb = g->way_mb[li];
        uint64_t uni = 0;
        int total_bits = 0;
        for (int i = 0; i < h; i++) {
            uni |= masks[i];
            total_bits += popcount(masks[i]);
        }
        if (total_bits == popcount(uni)) { /* no shared way */
            for (int i = 0; i < h; i++)
                cache[who[i] * SG_MAX_L3 + li] = popcount(masks[i]) * wmb;
            continue;
        }
        double miss[SG_MAX_JOBS], pressure[SG_MAX_JOBS], eff[SG_MAX_JOBS];
        int same = 1;
        for (int i = 0; i < h; i++) {
            miss[i] = 1.0;
            eff[i] = 0.0;
            same &= masks[i] == masks[0];
        }
        double pool = popcount(uni) * wmb;
        for (int r = 0; r < LRU_ROUNDS; r++) {
            for (int i = 0; i < h; i++) {
                const sg_job *j = jobs[who[i]];
                double rate = j->ins_stream + j->ins_reuse * miss[i];
                pressure[i] = j->n_l3[li] * (rate < j->core_cap ? rate : j->core_cap);
            }
            if (same) {
                double tot = 0.0;
                for (int i = 0; i < h; i++)
                    tot += pressure[i];
                for (int i = 0; i < h; i++)
                    eff[i] = tot > 0.0 ? pool * pressure[i] / tot : pool / h;
            } else {
                share_ways(masks, h, pressure, wmb, eff);
            }
            if (r == LRU_ROUNDS - 1)
                break;
            for (int i = 0; i < h; i++) {
                const sg_job *j = jobs[who[i]];
                double f = j->n_l3[li] / j->n;
                double nw = miss_ratio(eff[i] / f, j->ws_mb, j->ws2_mb, j->ws2_share);
                miss[i] = r == 0 ? nw : 0.5 * (miss[i] + nw);
            }
        }
        for (int i = 0; i < h; i++)
            cache[who[i] * SG_MAX_L3 + li] = eff[i];
    }
}

/* model.solve: each running job's time for its whole work. */
static void solve(const sg_node *g, const sg_job *const *jobs, int na, double *times) {
    double cache[SG_MAX_JOBS * SG_MAX_L3], vols[SG_MAX_JOBS], base[SG_MAX_JOBS];
    cache_mb(g, jobs, na, cache);
    for (int a = 0; a < na; a++) { /* model.traffic_gb */
        const sg_job *j = jobs[a];
        if (j->reuse_gb <= 0.0) {
            vols[a] = j->stream_gb;
            continue;
        }
        double m = 0.0;
        for (int li = 0; li < g->nl3; li++) {
            if (!j->n_l3[li])
                continue;
            double f = j->n_l3[li] / j->n;
            m += f * miss_ratio(cache[a * SG_MAX_L3 + li] / f, j->ws_mb, j->ws2_mb, j->ws2_share);
        }
        vols[a] = j->stream_gb + j->reuse_gb * m;
    }
    int nd = g->nd, nr = nd + nd * nd;
    double ov = 1.0 - g->overlap;
    double kap[SG_MAX_DOMAINS + SG_MAX_DOMAINS * SG_MAX_DOMAINS], load[SG_MAX_DOMAINS + SG_MAX_DOMAINS * SG_MAX_DOMAINS];
    for (int r = 0; r < nr; r++)
        kap[r] = 1.0;
    for (int a = 0; a < na; a++) {
        base[a] = vols[a] > 0.0 ? vols[a] / jobs[a]->bmax : 0.0;
        times[a] = 0.0;
    }
    for (int it = 0; it < g->iterations; it++) {
        for (int r = 0; r < nr; r++)
            load[r] = 0.0;
        for (int a = 0; a < na; a++) {
            const sg_job *j = jobs[a];
            double slow = 0.0;
            for (int i = 0; i < j->n_routes; i++) {
                int s = (int)j->routes[3 * i], m = (int)j->routes[3 * i + 1];
                double kp = kap[m];
                if (s != m) {
                    double kl = kap[nd + s * nd + m];
                    if (kl < kp)
                        kp = kl;
                }
                slow += j->routes[3 * i + 2] / kp;
            }
            double tm = base[a] * slow, tc = j->tc;
            double t = tm > tc ? (tm + ov * tc) : (tc + ov * tm);
            times[a] = t;
            double d = vols[a] / t;
            for (int i = 0; i < j->n_routes; i++) {
                int s = (int)j->routes[3 * i], m = (int)j->routes[3 * i + 1];
                double f = j->routes[3 * i + 2];
                load[m] += d * f;
                if (s != m)
                    load[nd + s * nd + m] += d * f;
            }
            for (int i = 0; i < j->n_comm; i++)
                load[nd + (int)j->comm[3 * i] * nd + (int)j->comm[3 * i + 1]] += j->comm[3 * i + 2] / t;
        }
        double change = 0.0;
        for (int r = 0; r < nr; r++) {
            double ld = load[r], nw = 1.0;
            if (ld > 0.0) {
                nw = kap[r] * (r < nd ? g->bw[r] : g->link) / ld;
                if (nw > 1.0)
                    nw = 1.0;
            }
            double dlt = nw - kap[r];
            if (dlt < 0.0)
                dlt = -dlt;
            if (dlt > change)
                change = dlt;
            kap[r] = nw;
        }
        if (change < 1e-5)
            break;
    }
}

/* Parses a node and k job records (one after another); 0, or -1 when malformed. */
static int parse_group(sg_node *g, const double *node, int node_len, const double *rec, int rec_len, int k,
                       sg_job *jobs) {
    if (k < 1 || k > SG_MAX_JOBS || parse_node(g, node, node_len))
        return -1;
    int off = 0;
    for (int a = 0; a < k; a++) {
        int size = parse_job(&jobs[a], g, rec + off, rec_len - off);
        if (size < 0)
            return -1;
        off += size;
    }
    return off == rec_len ? 0 : -1;
}

__attribute__((visibility("default"))) int sg_solve(const double *node, int node_len, const double *rec, int rec_len,
                                                    int k, double *times) {
    sg_node g;
    sg_job jobs[SG_MAX_JOBS];
    if (parse_group(&g, node, node_len, rec, rec_len, k, jobs))
        return -1;
    const sg_job *run[SG_MAX_JOBS];
    for (int a = 0; a < k; a++)
        run[a] = &jobs[a];
    solve(&g, run, k, times);
    return 0;
}

__attribute__((visibility("default"))) int sg_run_group(const double *node, int node_len, const double *rec, int rec_len,
                                                        int k, const double *factors, double *ends) {
    sg_node g;
    sg_job jobs[SG_MAX_JOBS];
    if (parse_group(&g, node, node_len, rec, rec_len, k, jobs))
        return -1;
    double left[SG_MAX_JOBS], out[SG_MAX_JOBS], times[SG_MAX_JOBS], rates[SG_MAX_JOBS], now = 0.0;
    int active[SG_MAX_JOBS], na = k;
    for (int a = 0; a < k; a++) {
        left[a] = 1.0;
        out[a] = 0.0;
        active[a] = a;
    }
    for (int round = 0; na; round++) {
        if (round >= k)
            return -1; /* each event ends a job: only NaN times get here */
        const sg_job *run[SG_MAX_JOBS];
        for (int i = 0; i < na; i++)
            run[i] = &jobs[active[i]];
        solve(&g, run, na, times);
        double dt = 0.0;
        for (int i = 0; i < na; i++) {
            if (factors)
                times[i] = times[i] * factors[active[i]];
            rates[i] = 1.0 / times[i];
            double x = left[active[i]] / rates[i];
            if (i == 0 || x < dt)
                dt = x;
        }
        now += dt;
        int still = 0;
        for (int i = 0; i < na; i++) {
            int a = active[i];
            left[a] -= rates[i] * dt;
            if (left[a] <= 1e-9)
                out[a] = now;
            else
                active[still++] = a;
        }
        na = still;
    }
    for (int a = 0; a < k; a++)
        ends[a] = out[a];
    return 0;
}
