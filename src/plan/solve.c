/*
 * solve.c -- the exact partition solver (see plan.h for the algorithm and
 * plan_int.h for the problem it solves).
 *
 * NOTES ON THE DESIGN
 *
 * (1) Positions.  A cut is kept as p = number of layers before it (1..g-1);
 *     stage t spans layers [p_t, p_{t+1}) with p_0 = 0, p_{s+1} = g.  Cut k
 *     (1-based) can only sit in [k, k + g - s - 1]: every DP row has g - s
 *     entries, which is what makes 102 layers / 63 cuts cheap.
 * (2) Windows.  For a bound T, lox[b] is the least a with X[a..b) <= T; as b
 *     grows lox[b] never decreases, so the feasible previous cuts of a stage
 *     ending at b form a window [lo, b-1] that slides right: a monotone
 *     deque yields its minimum in amortised O(1).  The second bottleneck
 *     (loy) and the per-stage memory caps (lom[t]) are more windows of the
 *     same kind; a stage's window is the intersection (largest left end).
 * (3) Floating point.  Stage sums are always prefix differences pre[b] -
 *     pre[a]; the candidate bounds are those same differences, so "stage <=
 *     T" is decided on identical doubles everywhere.  The DP min commutes with
 *     the (monotone) rounding of "+ c", so f(T) is exactly the least
 *     left-to-right sum over feasible paths and is non-increasing in T.
 * (4) Search, x level (label_search).  min over partitions of w * (largest
 *     stage) + comm: a bi-criteria DP with Pareto fronts of (largest stage
 *     so far b, comm so far c) per state.  b starts at the least feasible
 *     bottleneck vlo (least_feasible), an incumbent comes from a few
 *     golden-section probes of the plain DP (dp_run), stages of sum >=
 *     (incumbent - least comm) / w are cut from the windows, and labels with
 *     w*b + c + rem >= incumbent are dropped (rem: least comm of the cuts
 *     still to place, ignoring windows).
 * (5) Search, y level (search with lvl 1).  min over U of wy*U + g(U), g(U)
 *     = the x level under "every stage's y sum <= U", non-increasing in U:
 *     the least feasible U, then g at it and at +inf bound the useful
 *     candidates to (U_lo, (best - g(inf)) / wy); those are sorted and
 *     searched by interval bisection: between two evaluated candidates a < b
 *     every U inside costs at least wy*U_{a+1} + g(U_b), and nothing inside
 *     can win when g(U_a) == g(U_b).  g is asked with a limit: it only needs
 *     to be exact below it.
 * (6) Memory caps depend on the stage index (1F1B keeps more micro-batches
 *     in flight early), so greedy feasibility is not exact there (filling
 *     early stages can push a heavy layer into a stricter one); with caps,
 *     feasibility is decided by the DP over sorted candidates.
 */
#include "plan/plan_int.h"

#include "core/xalloc.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define INF HUGE_VAL
#define PROBES 4

struct gv {
	double v;   /* exact value, or a lower bound when !exact */
	bool exact;
};

/* A label of the x level: some path to a state, with its largest stage so
 * far (b, never below the least feasible bottleneck) and its comm sum c. */
struct lab {
	double b, c;
};

struct solver {
	const struct plan_problem *p;
	int g, s, span;          /* span = g - s positions per cut */
	double wx, wy;
	double *px, *py;         /* prefix sums, g+1 (py NULL: no y level) */
	double *qm;              /* (s+1) x (g+1) memory prefixes, or NULL */
	int *lom;                /* (s+1) x (g+1) memory windows, or NULL */
	int *lox, *loy;          /* g+1 */
	bool use_loy;
	double cur_t, cur_u;     /* bounds the windows are set for */
	double *rem;             /* (s+1) x (g+1): least comm of the cuts after */
	double *d0, *d1;         /* DP rows, g+1 */
	int *dq;                 /* deque, g+1 */
	double *cand;            /* candidate scratch */
	size_t cand_alloc;
	struct lab *la, *lb, *lt; /* label pools (two rows) and merge scratch */
	size_t la_alloc, lb_alloc, lt_alloc;
	int *aoff, *acnt, *boff, *bcnt; /* per position: first label, count */
	/* search results */
	double arg_t, arg_u;
	double inner_arg_t;
};

static _Thread_local long dp_runs;

long plan_solve_dp_runs(void)
{
	return dp_runs;
}

static void set_lo(const double *pre, int g, double bound, int *lo)
{
	int a = 0;
	for (int b = 0; b <= g; b++) {
		while (pre[b] - pre[a] > bound)
			a++;
		lo[b] = a;
	}
}

static void set_t(struct solver *sv, double t)
{
	if (t != sv->cur_t) {
		set_lo(sv->px, sv->g, t, sv->lox);
		sv->cur_t = t;
	}
}

static void set_u(struct solver *sv, double u)
{
	if (!sv->py)
		return;
	if (u != sv->cur_u) {
		set_lo(sv->py, sv->g, u, sv->loy);
		sv->cur_u = u;
	}
	sv->use_loy = u < INF;
}

/* Does stage t fit on layers [a, b)? */
static inline bool fits(const struct solver *sv, int t, int a, int b, double tb, double ub)
{
	if (sv->px[b] - sv->px[a] > tb)
		return false;
	if (sv->py && sv->py[b] - sv->py[a] > ub)
		return false;
	if (sv->qm) {
		const double *q = sv->qm + (size_t)t * (sv->g + 1);
		if (q[b] - q[a] > sv->p->cap[t])
			return false;
	}
	return true;
}

/* Without memory caps (limits the same for every stage): greedy (each stage
 * as long as it fits) needs at most s+1 stages iff some partition fits, as
 * its boundaries are never left of any feasible one's and a stage can be
 * split without breaking a limit. */
static bool feasible(const struct solver *sv, double tb, double ub)
{
	int a = 0, t = 0;
	while (a < sv->g) {
		if (t > sv->s)
			return false;
		int b = a;
		while (b < sv->g && fits(sv, t, a, b + 1, tb, ub))
			b++;
		if (b == a)
			return false;
		a = b;
		t++;
	}
	return true;
}

/*
 * f(cur_t, cur_u): least communication sum; exact when below lim, otherwise
 * a lower bound (lim itself).  With par, records each state's predecessor and
 * returns the last cut in *lastq.
 */
static struct gv dp_run(struct solver *sv, double lim, int *par, int *lastq)
{
	int g = sv->g, s = sv->s, span = sv->span, w = g + 1;
	const double *c = sv->p->c;
	double *prev = sv->d0, *cur = sv->d1;
	/* Paths are sums of non-negative terms, so rounding moves them by a
	 * relative 1e-13 at most; the slack keeps every path under lim. */
	double cut = lim < INF ? lim * (1 + 1e-9) : INF;
	struct gv out = { lim, false };

	dp_runs++;
	if (lim <= 0 || sv->rem[0] >= cut)
		return out;
	prev[0] = 0;
	for (int q = 1; q < span; q++)
		prev[q] = INF;
	for (int k = 1; k <= s; k++) {
		const int *lom = sv->lom ? sv->lom + (size_t)(k - 1) * w : NULL;
		const double *rk = sv->rem + (size_t)k * w;
		const double *ck = c + (k - 1);
		int head = 0, tail = 0, *dq = sv->dq;
		bool any = false;
		for (int p = k; p < k + span; p++) {
			int q = p - 1;
			double v = prev[q];
			while (tail > head && prev[dq[tail - 1]] >= v)
				tail--;
			dq[tail++] = q;
			int lo = sv->lox[p];
			if (sv->use_loy && sv->loy[p] > lo)
				lo = sv->loy[p];
			if (lom && lom[p] > lo)
				lo = lom[p];
			while (head < tail && dq[head] < lo)
				head++;
			double val = INF;
			if (head < tail) {
				val = prev[dq[head]] + ck[(size_t)(p - 1) * s];
				if (val + rk[p] >= cut)
					val = INF;
				else
					any = true;
				if (par)
					par[(size_t)k * w + p] = dq[head];
			}
			cur[p] = val;
		}
		if (!any)
			return out;
		double *tmp = prev;
		prev = cur;
		cur = tmp;
	}
	/* The last stage spans [q, g). */
	int lo = sv->lox[g];
	if (sv->use_loy && sv->loy[g] > lo)
		lo = sv->loy[g];
	if (sv->lom && sv->lom[(size_t)s * w + g] > lo)
		lo = sv->lom[(size_t)s * w + g];
	if (lo < s)
		lo = s;
	double best = INF;
	int bq = -1;
	for (int q = lo; q <= g - 1; q++)
		if (prev[q] < best) {
			best = prev[q];
			bq = q;
		}
	if (lastq)
		*lastq = bq;
	if (best < lim) {
		out.v = best;
		out.exact = true;
	}
	return out;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Sorted distinct segment sums of pre strictly inside (lo, hi). */
static int gen_cands(struct solver *sv, const double *pre, double lo, double hi)
{
	int g = sv->g, n = 0;
	int b1 = 1, b2 = 1;
	for (int a = 0; a < g; a++) {
		if (b1 < a + 1)
			b1 = a + 1;
		while (b1 <= g && pre[b1] - pre[a] <= lo)
			b1++;
		if (b2 < b1)
			b2 = b1;
		while (b2 <= g && pre[b2] - pre[a] < hi)
			b2++;
		for (int b = b1; b < b2; b++) {
			XGROW(sv->cand, (size_t)n + 1, sv->cand_alloc);
			sv->cand[n++] = pre[b] - pre[a];
		}
	}
	if (n > 1) {
		qsort(sv->cand, (size_t)n, sizeof(double), cmp_double);
		int m = 1;
		for (int i = 1; i < n; i++)
			if (sv->cand[i] != sv->cand[m - 1])
				sv->cand[m++] = sv->cand[i];
		n = m;
	}
	return n;
}

static struct gv search(struct solver *sv, int lvl, double lim);

/* g at one level: the DP (x level) or the whole x search (y level). */
static struct gv eval_at(struct solver *sv, int lvl, double v, double lim)
{
	if (lvl == 0) {
		set_t(sv, v);
		return dp_run(sv, lim, NULL, NULL);
	}
	set_u(sv, v);
	return search(sv, 0, lim);
}

/* Is the DP feasible at this level's bound v (the other level as set)? */
static bool dp_feasible(struct solver *sv, int lvl, double v)
{
	if (lvl == 0) {
		set_t(sv, v);
	} else {
		set_t(sv, INF);
		set_u(sv, v);
	}
	return dp_run(sv, INF, NULL, NULL).exact;
}

/*
 * The least bound v at this level for which some partition fits.  Without
 * memory caps the greedy test is exact and cheap, and the threshold is found
 * by bisection on the bits of the double (it is a segment sum, as feasibility
 * only changes there).  With caps a stage's limit depends on its index and
 * greedy is not exact (filling early stages can push a heavy layer into a
 * stricter stage), so the DP decides, by binary search over the candidates.
 */
static bool least_feasible(struct solver *sv, int lvl, const double *pre, double ou, double *out)
{
	double total = pre[sv->g];
	if (!sv->qm) {
		if (lvl ? feasible(sv, INF, 0) : feasible(sv, 0, ou)) {
			*out = 0;
			return true;
		}
		if (!(lvl ? feasible(sv, INF, total) : feasible(sv, total, ou)))
			return false;
		uint64_t lb, hb;
		double zero = 0;
		memcpy(&lb, &zero, sizeof(lb));
		memcpy(&hb, &total, sizeof(hb));
		while (hb - lb > 1) {
			uint64_t mb = lb + (hb - lb) / 2;
			double m;
			memcpy(&m, &mb, sizeof(m));
			if (lvl ? feasible(sv, INF, m) : feasible(sv, m, ou))
				hb = mb;
			else
				lb = mb;
		}
		memcpy(out, &hb, sizeof(*out));
		return true;
	}
	int n = gen_cands(sv, pre, -1, INF);
	double *v = xmalloc(((size_t)n + 1) * sizeof(double));
	if (n)
		memcpy(v, sv->cand, (size_t)n * sizeof(double));
	bool ok = n > 0 && dp_feasible(sv, lvl, v[n - 1]);
	if (ok) {
		int lo = 0, hi = n - 1;
		while (lo < hi) {
			int mid = lo + (hi - lo) / 2;
			if (dp_feasible(sv, lvl, v[mid]))
				hi = mid;
			else
				lo = mid + 1;
		}
		*out = v[lo];
	}
	free(v);
	return ok;
}


static int cmp_lab(const void *a, const void *b)
{
	const struct lab *x = a, *y = b;
	if (x->b != y->b)
		return (x->b > y->b) - (x->b < y->b);
	return (x->c > y->c) - (x->c < y->c);
}

static void sort_labs(struct lab *l, size_t n)
{
	if (n > 24) {
		qsort(l, n, sizeof(*l), cmp_lab);
		return;
	}
	for (size_t i = 1; i < n; i++) {
		struct lab t = l[i];
		size_t j = i;
		while (j > 0 && cmp_lab(&l[j - 1], &t) > 0) {
			l[j] = l[j - 1];
			j--;
		}
		l[j] = t;
	}
}

/*
 * The x level for the current y bound and memory caps: min over partitions
 * of wx * (largest stage) + comm, exact when below lim, argmin bottleneck in
 * sv->inner_arg_t.  A bi-criteria DP: each state (cut k at p) keeps the
 * Pareto front of (largest stage so far, comm so far) over its paths.
 * Fronts stay small because (a) b starts at the least feasible bottleneck
 * vlo (no final bottleneck is below it, so smaller b are all alike), (b) a
 * stage of sum >= ub = (best - least comm) / wx can never win, which
 * narrows the windows, and (c) labels with wx*b + c + rem >= best go.
 * best starts at wx*vlo + f(vlo), one plain DP.
 */
static struct gv label_search(struct solver *sv, double lim)
{
	struct gv none = { lim, false };
	double w = sv->wx;
	double ou = sv->py ? sv->cur_u : INF;
	double vlo;
	int g = sv->g, s = sv->s, span = sv->span, W = g + 1;

	if (!least_feasible(sv, 0, sv->px, ou, &vlo))
		return none;
	if (w * vlo >= lim)
		return none;
	double best = lim, bt = INF;
	set_t(sv, vlo);
	struct gv f0 = dp_run(sv, lim - w * vlo, NULL, NULL);
	if (f0.exact && w * vlo + f0.v < best) {
		best = w * vlo + f0.v;
		bt = vlo;
	}
	double ub = (best - sv->rem[0]) / w;
	/* A near-optimal incumbent makes ub and the label pruning tight:
	 * golden-section probes of w*T + f(T) over real T in (vlo, ub).  Any T
	 * will do: the partition behind f(T) costs at most w*T + f(T), and if
	 * its bottleneck is below T the label DP finds it strictly cheaper. */
	double pa = vlo, pb = ub < 4 * vlo ? ub : 4 * vlo;
	for (int it = 0; it < PROBES && pb > pa; it++) {
		double m1 = pa + 0.381966 * (pb - pa), m2 = pa + 0.618034 * (pb - pa);
		double v[2], m[2] = { m1, m2 };
		for (int i = 0; i < 2; i++) {
			set_t(sv, m[i]);
			struct gv f = dp_run(sv, best - w * m[i], NULL, NULL);
			v[i] = f.exact ? w * m[i] + f.v : INF;
			if (v[i] < best) {
				best = v[i];
				bt = m[i];
			}
		}
		if (v[0] <= v[1])
			pb = m2;
		else
			pa = m1;
	}
	ub = (best - sv->rem[0]) / w;
	if (!(ub > vlo))
		goto done;
	set_t(sv, ub);
	double cutoff = best < INF ? best * (1 + 1e-9) : INF;

	/* row 0: the start, one label */
	XGROW(sv->la, 1, sv->la_alloc);
	sv->la[0].b = vlo;
	sv->la[0].c = 0;
	sv->aoff[0] = 0;
	sv->acnt[0] = 1;
	for (int q = 1; q < span; q++)
		sv->acnt[q] = 0;
	for (int k = 1; k <= s; k++) {
		const int *lom = sv->lom ? sv->lom + (size_t)(k - 1) * W : NULL;
		const double *rk = sv->rem + (size_t)k * W;
		const double *ck = sv->p->c + (k - 1);
		size_t nb = 0;
		bool any = false;
		for (int p = k; p < k + span; p++) {
			int lo = sv->lox[p];
			if (sv->use_loy && sv->loy[p] > lo)
				lo = sv->loy[p];
			if (lom && lom[p] > lo)
				lo = lom[p];
			if (lo < k - 1)
				lo = k - 1;
			double cc = ck[(size_t)(p - 1) * s];
			size_t nt = 0;
			for (int q = p - 1; q >= lo; q--) {
				int m = sv->acnt[q];
				if (!m)
					continue;
				const struct lab *l = sv->la + sv->aoff[q];
				double seg = sv->px[p] - sv->px[q];
				XGROW(sv->lt, nt + (size_t)m, sv->lt_alloc);
				int i = 0;
				while (i < m && l[i].b <= seg)
					i++;
				if (i > 0) {
					sv->lt[nt].b = seg;
					sv->lt[nt++].c = l[i - 1].c + cc;
				}
				for (; i < m; i++) {
					sv->lt[nt].b = l[i].b;
					sv->lt[nt++].c = l[i].c + cc;
				}
			}
			sort_labs(sv->lt, nt);
			XGROW(sv->lb, nb + nt, sv->lb_alloc);
			sv->boff[p] = (int)nb;
			double lastc = INF;
			int kept = 0;
			for (size_t i = 0; i < nt; i++) {
				const struct lab *t = &sv->lt[i];
				if (!(t->c < lastc))
					continue;
				lastc = t->c;
				if (w * t->b + t->c + rk[p] >= cutoff)
					continue;
				sv->lb[nb++] = *t;
				kept++;
			}
			sv->bcnt[p] = kept;
			if (kept)
				any = true;
		}
		if (!any)
			goto done;
		struct lab *tl = sv->la;
		sv->la = sv->lb;
		sv->lb = tl;
		size_t ta = sv->la_alloc;
		sv->la_alloc = sv->lb_alloc;
		sv->lb_alloc = ta;
		int *t1 = sv->aoff, *t2 = sv->acnt;
		sv->aoff = sv->boff;
		sv->acnt = sv->bcnt;
		sv->boff = t1;
		sv->bcnt = t2;
	}
	/* the last stage spans [q, g) */
	{
		int lo = sv->lox[g];
		if (sv->use_loy && sv->loy[g] > lo)
			lo = sv->loy[g];
		if (sv->lom && sv->lom[(size_t)s * W + g] > lo)
			lo = sv->lom[(size_t)s * W + g];
		if (lo < s)
			lo = s;
		for (int q = lo; q <= g - 1; q++) {
			const struct lab *l = sv->la + sv->aoff[q];
			double seg = sv->px[g] - sv->px[q];
			for (int i = 0; i < sv->acnt[q]; i++) {
				double t = l[i].b > seg ? l[i].b : seg;
				double v = w * t + l[i].c;
				if (v < best) {
					best = v;
					bt = t;
				}
			}
		}
	}
done:
	if (best < lim) {
		sv->inner_arg_t = bt;
		struct gv out = { best, true };
		return out;
	}
	return none;
}

struct rec {
	struct solver *sv;
	int lvl;
	double w;
	const double *v;         /* candidates, v[n-1] = +inf sentinel */
	double best;
	double arg, arg2;
};

static void consider(struct rec *r, double v, struct gv f)
{
	if (f.exact && r->w * v + f.v < r->best) {
		r->best = r->w * v + f.v;
		r->arg = v;
		r->arg2 = r->sv->inner_arg_t;
	}
}

static void rec_search(struct rec *r, int a, struct gv fa, int b, struct gv fb)
{
	while (b - a > 1) {
		if (fa.exact && fb.exact && fa.v == fb.v)
			return;
		/* Inside (a, b) every candidate costs at least w*v + fb. */
		if (r->w * r->v[a + 1] + fb.v >= r->best)
			return;
		int lo = a + 1, hi = b - 1;
		while (lo < hi) {
			int mid = lo + (hi - lo + 1) / 2;
			if (r->w * r->v[mid] + fb.v < r->best)
				lo = mid;
			else
				hi = mid - 1;
		}
		int m = (a + 1 + lo) / 2;
		struct gv fm = eval_at(r->sv, r->lvl, r->v[m], r->best - r->w * r->v[m]);
		consider(r, r->v[m], fm);
		if (!fm.exact && r->best - r->w * r->v[m] > fm.v)
			fm.v = r->best - r->w * r->v[m];
		rec_search(r, a, fa, m, fm);
		a = m;
		fa = fm;
	}
}

/*
 * min over this level's bound v of w*v + g(v), exact when below lim.  The
 * argmin goes to sv->arg_t (x level: inner_arg_t) or arg_u/arg_t (y level).
 */
static struct gv search(struct solver *sv, int lvl, double lim)
{
	struct gv none = { lim, false };
	const double *pre = lvl ? sv->py : sv->px;
	double w = lvl ? sv->wy : sv->wx;

	if (!pre || w == 0) {
		struct gv f = eval_at(sv, lvl, INF, lim);
		if (lvl == 0)
			sv->inner_arg_t = INF;
		else if (f.exact) {
			sv->arg_u = INF;
			sv->arg_t = sv->inner_arg_t;
		}
		return f;
	}
	if (lvl == 0)
		return label_search(sv, lim);

	double ou = INF; /* the y level searches with T unbounded */
	double vlo;
	if (!least_feasible(sv, lvl, pre, ou, &vlo))
		return none;

	struct rec r = { sv, lvl, w, NULL, lim, INF, INF };
	if (w * vlo >= lim)
		return none;
	struct gv flo = eval_at(sv, lvl, vlo, r.best - w * vlo);
	consider(&r, vlo, flo);
	if (!flo.exact && r.best - w * vlo > flo.v)
		flo.v = r.best - w * vlo;
	struct gv finf = eval_at(sv, lvl, INF, r.best - w * vlo);
	if (finf.exact && finf.v < flo.v) {
		double ub = (r.best - finf.v) / w;
		int n = gen_cands(sv, pre, vlo, ub);
		/* v = [vlo, cands..., +inf]; the scratch is reused by inner
		 * levels, so keep our own copy. */
		double *v = xmalloc(((size_t)n + 2) * sizeof(double));
		v[0] = vlo;
		if (n)
			memcpy(v + 1, sv->cand, (size_t)n * sizeof(double));
		v[n + 1] = INF;
		r.v = v;
		rec_search(&r, 0, flo, n + 1, finf);
		free(v);
	}
	/* Otherwise g(vlo) == g(inf), or g(inf) is over the limit: nothing
	 * above vlo can do better. */
	if (r.best < lim) {
		if (lvl == 0) {
			sv->inner_arg_t = r.arg;
		} else {
			sv->arg_u = r.arg;
			sv->arg_t = r.arg2;
		}
		struct gv out = { r.best, true };
		return out;
	}
	return none;
}

static void solver_init(struct solver *sv, const struct plan_problem *p)
{
	int g = p->g, s = p->s, w = g + 1;
	memset(sv, 0, sizeof(*sv));
	sv->p = p;
	sv->g = g;
	sv->s = s;
	sv->span = g - s;
	sv->wx = p->wx;
	sv->wy = p->y ? p->wy : 0;
	sv->px = xmalloc((size_t)w * sizeof(double));
	sv->px[0] = 0;
	for (int i = 0; i < g; i++)
		sv->px[i + 1] = sv->px[i] + p->x[i];
	if (p->y && p->wy > 0) {
		sv->py = xmalloc((size_t)w * sizeof(double));
		sv->py[0] = 0;
		for (int i = 0; i < g; i++)
			sv->py[i + 1] = sv->py[i] + p->y[i];
		sv->loy = xmalloc((size_t)w * sizeof(int));
	}
	if (p->mstat) {
		sv->qm = xmalloc((size_t)(s + 1) * w * sizeof(double));
		sv->lom = xmalloc((size_t)(s + 1) * w * sizeof(int));
		for (int t = 0; t <= s; t++) {
			double *q = sv->qm + (size_t)t * w;
			q[0] = 0;
			for (int i = 0; i < g; i++)
				q[i + 1] = q[i] + (p->mstat[i] + p->mult[t] * p->mact[i]);
			set_lo(q, g, p->cap[t], sv->lom + (size_t)t * w);
		}
	}
	sv->lox = xmalloc((size_t)w * sizeof(int));
	sv->cur_t = NAN;
	sv->cur_u = NAN;
	set_t(sv, INF);
	set_u(sv, INF);
	sv->d0 = xmalloc((size_t)w * sizeof(double));
	sv->d1 = xmalloc((size_t)w * sizeof(double));
	sv->dq = xmalloc((size_t)w * sizeof(int));
	sv->aoff = xmalloc((size_t)w * sizeof(int));
	sv->acnt = xmalloc((size_t)w * sizeof(int));
	sv->boff = xmalloc((size_t)w * sizeof(int));
	sv->bcnt = xmalloc((size_t)w * sizeof(int));

	/* rem[k][p]: least sum of the boundary costs of cuts k+1..s once cut k
	 * sits at p, ignoring every window: a lower bound for pruning. */
	sv->rem = xmalloc((size_t)(s + 1) * w * sizeof(double));
	for (int p2 = 0; p2 <= g; p2++)
		sv->rem[(size_t)s * w + p2] = 0;
	for (int k = s - 1; k >= 0; k--) {
		double *rk = sv->rem + (size_t)k * w;
		const double *rn = sv->rem + (size_t)(k + 1) * w;
		double m = INF;
		for (int p2 = g; p2 >= 0; p2--) {
			rk[p2] = m;
			/* cut k+1 may sit at p2 if k+1 <= p2 <= k+span */
			if (p2 >= k + 1 && p2 <= k + sv->span) {
				double v = p->c[(size_t)(p2 - 1) * s + k] + rn[p2];
				if (v < m)
					m = v;
			}
		}
	}
}

static void solver_release(struct solver *sv)
{
	free(sv->px);
	free(sv->py);
	free(sv->qm);
	free(sv->lom);
	free(sv->lox);
	free(sv->loy);
	free(sv->rem);
	free(sv->d0);
	free(sv->d1);
	free(sv->dq);
	free(sv->cand);
	free(sv->la);
	free(sv->lb);
	free(sv->lt);
	free(sv->aoff);
	free(sv->acnt);
	free(sv->boff);
	free(sv->bcnt);
}

void plan_stage_sums(const double *v, int g, const int *cuts, int s, double *sums)
{
	int a = 0;
	for (int t = 0; t <= s; t++) {
		int b = t < s ? cuts[t] + 1 : g;
		double sum = 0;
		for (int i = a; i < b; i++)
			sum += v[i];
		sums[t] = sum;
		a = b;
	}
}

int plan_solve(const struct plan_problem *p, int *cuts, double *value)
{
	struct solver sv;
	int rc = 0;

	dp_runs = 0;
	solver_init(&sv, p);
	sv.arg_t = INF;
	sv.arg_u = INF;
	struct gv f = search(&sv, 1, INF);
	if (!f.exact) {
		rc = 1;
		goto out;
	}
	/* Rebuild the partition at the bounds found. */
	int g = p->g, s = p->s, w = g + 1;
	int *par = xmalloc((size_t)(s + 1) * w * sizeof(int));
	set_t(&sv, sv.arg_t);
	set_u(&sv, sv.arg_u);
	int q = -1;
	struct gv d = dp_run(&sv, INF, par, &q);
	if (!d.exact || q < 0) {
		/* Cannot happen: the same DP found this value a moment ago. */
		free(par);
		rc = 1;
		goto out;
	}
	for (int k = s; k >= 1; k--) {
		cuts[k - 1] = q - 1;
		q = par[(size_t)k * w + q];
	}
	free(par);
	*value = f.v;
out:
	solver_release(&sv);
	return rc;
}
