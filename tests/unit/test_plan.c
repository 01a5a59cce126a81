/* test_plan.c -- exact partition against brute force (src/plan/solve.c). */
#include "test.h"

#include "core/xalloc.h"
#include "plan/plan.h"
#include "plan/plan_int.h"

#include <math.h>
#include <stdint.h>

static uint64_t rng_state = 88172645463325252ull;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static double unif(void)
{
	return (double)(rnd() >> 11) * 0x1.0p-53;
}

/* Kinds of values: 0 uniform, 1 small integers (ties), 2 mostly zero, 3 all zero. */
static double draw(int kind)
{
	switch (kind) {
	case 0:
		return unif();
	case 1:
		return (double)(rnd() % 3);
	case 2:
		return rnd() % 4 == 0 ? unif() : 0.0;
	default:
		return 0.0;
	}
}

struct bf {
	const struct plan_problem *p;
	int cuts[16];
	double best;
	bool found;
};

/* Objective of a general problem by direct sums; INF when memory fails. */
static double direct_value(const struct plan_problem *p, const int *cuts)
{
	double mx = 0, my = 0, comm = 0;
	int a = 0;
	for (int t = 0; t <= p->s; t++) {
		int e = t < p->s ? cuts[t] + 1 : p->g;
		double sx = 0, sy = 0, ms = 0, ma = 0;
		for (int i = a; i < e; i++) {
			sx += p->x[i];
			if (p->y)
				sy += p->y[i];
			if (p->mstat) {
				ms += p->mstat[i];
				ma += p->mact[i];
			}
		}
		if (p->mstat && ms + p->mult[t] * ma > p->cap[t] * (1 + 1e-12))
			return HUGE_VAL;
		if (sx > mx)
			mx = sx;
		if (sy > my)
			my = sy;
		if (t < p->s)
			comm += p->c[cuts[t] * p->s + t];
		a = e;
	}
	return p->wx * mx + (p->y ? p->wy * my : 0) + comm;
}

static void bf_rec(struct bf *b, int k, int from)
{
	const struct plan_problem *p = b->p;
	if (k == p->s) {
		double v = direct_value(p, b->cuts);
		if (v < b->best) {
			b->best = v;
			b->found = v < HUGE_VAL;
		}
		return;
	}
	for (int j = from; j <= p->g - 2 - (p->s - 1 - k); j++) {
		b->cuts[k] = j;
		bf_rec(b, k + 1, j + 1);
	}
}

static double brute(const struct plan_problem *p, bool *found)
{
	struct bf b = { p, { 0 }, HUGE_VAL, false };
	bf_rec(&b, 0, 0);
	*found = b.found;
	return b.best;
}

static bool close_to(double a, double b)
{
	return fabs(a - b) <= 1e-9 * (1 + fabs(a) + fabs(b));
}

static void check_problem(const struct plan_problem *p)
{
	int cuts[16];
	double v = -1;
	bool found;
	double want = brute(p, &found);
	int rc = plan_solve(p, cuts, &v);
	if (!found) {
		CHECK_INT(rc, 1);
		return;
	}
	if (rc != 0) {
		fprintf(stderr, "g=%d s=%d wx=%g wy=%g brute %g:\n", p->g, p->s, p->wx, p->wy, want);
		for (int i = 0; i < p->g; i++)
			fprintf(stderr, " x=%g y=%g ms=%g ma=%g\n", p->x[i], p->y ? p->y[i] : -1,
				p->mstat ? p->mstat[i] : -1, p->mact ? p->mact[i] : -1);
		for (int t = 0; p->mstat && t <= p->s; t++)
			fprintf(stderr, " mult=%g cap=%g\n", p->mult[t], p->cap[t]);
	}
	CHECK_INT(rc, 0);
	for (int k = 0; k < p->s; k++) {
		CHECK(cuts[k] >= 0 && cuts[k] <= p->g - 2);
		if (k)
			CHECK(cuts[k] > cuts[k - 1]);
	}
	double got = direct_value(p, cuts);
	if (!close_to(got, want) || !close_to(v, want)) {
		fprintf(stderr, "g=%d s=%d wx=%g wy=%g: solver %.17g (partition %.17g), brute %.17g\n",
			p->g, p->s, p->wx, p->wy, v, got, want);
		exit(1);
	}
}

/* Both APSS objectives, every g <= 12 and every cut count, four value kinds. */
TEST(partition_matches_brute_force)
{
	double x[12], c[11 * 11];
	long n = 0;
	for (int rep = 0; rep < 40; rep++)
		for (int g = 1; g <= 12; g++)
			for (int s = 0; s <= g - 1; s++)
				for (int kind = 0; kind < 4; kind++) {
					int kx = kind, kc = (kind + rep) % 4;
					for (int i = 0; i < g; i++)
						x[i] = draw(kx);
					for (int i = 0; i < (g - 1) * s; i++)
						c[i] = draw(kc);
					struct plan_problem p = { .g = g, .s = s, .x = x, .c = c, .wx = 1 };
					check_problem(&p);
					p.wx = (double)(rnd() % 8); /* pipeline: B-1, incl. 0 */
					check_problem(&p);
					n += 2;
				}
	CHECK(n > 10000);
}

/* The strategy form: second bottleneck and per-stage memory caps. */
TEST(general_problem_matches_brute_force)
{
	double x[12], y[12], c[11 * 11], ms[12], ma[12], mult[12], cap[12];
	for (int rep = 0; rep < 4000; rep++) {
		int g = 1 + (int)(rnd() % 12);
		int s = (int)(rnd() % (unsigned)g);
		int kind = (int)(rnd() % 3);
		for (int i = 0; i < g; i++) {
			x[i] = draw(kind);
			y[i] = rnd() % 2 ? 1.0 : draw(kind); /* layer counts, mostly */
			ms[i] = 1 + (double)(rnd() % 3);
			ma[i] = (double)(rnd() % 3);
		}
		for (int i = 0; i < (g - 1) * s; i++)
			c[i] = draw((kind + 1) % 3);
		double capv = (double)(2 + rnd() % 12);
		for (int t = 0; t <= s; t++) {
			mult[t] = (double)(s + 1 - t); /* 1F1B: earlier stages hold more */
			cap[t] = capv;
		}
		struct plan_problem p = { .g = g, .s = s, .x = x, .c = c, .wx = (double)(rnd() % 5),
					  .y = y, .wy = (double)(rnd() % 4) * 0.5 };
		check_problem(&p);
		p.mstat = ms;
		p.mact = ma;
		p.mult = mult;
		p.cap = cap;
		check_problem(&p);
	}
}

TEST(partition_result_parts)
{
	/* x = 1 2 3 4, best: cut after layers 1 and 2 -> sums 3 | 3 | 4 */
	double x[4] = { 1, 2, 3, 4 };
	double c[3 * 2] = { 9, 9, 0.5, 9, 9, 0.25 };
	struct plan_instance in = { 4, 2, x, c, 0 };
	struct plan_result r = { 0 };
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(plan_partition(&in, PLAN_OBJ_TRAIN, 0, &r, &err), 0);
	CHECK_INT(r.cuts[0], 1);
	CHECK_INT(r.cuts[1], 2);
	CHECK_INT(r.stages[0], 2);
	CHECK_INT(r.stages[1], 1);
	CHECK_INT(r.stages[2], 1);
	CHECK(r.bottleneck == 4);
	CHECK(r.comm == 0.75);
	CHECK(r.objective == 4.75);
	plan_result_release(&r);
	plan_result_release(&r);
	plan_result_release(NULL);
	CHECK_INT(plan_partition(&in, PLAN_OBJ_PIPELINE, 0, &r, &err), TC_EINPUT);
	tc_err_release(&err);
	CHECK_INT(plan_partition(&in, PLAN_OBJ_PIPELINE, 3, &r, &err), 0);
	CHECK(close_to(r.objective, 2 * r.bottleneck + r.comm + 10));
	CHECK(close_to(r.sum_x, 10));
	plan_result_release(&r);
}
