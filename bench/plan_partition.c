/*
 * plan_partition.c -- time per instance of trainctl's exact partition
 * (src/plan/solve.c) against a plain exact baseline, side by side on the
 * same synthesized instances (APSS's distribution, seed 1234).
 *
 * Baseline: what one writes first from the problem statement.  For every
 * distinct contiguous segment sum T (O(G^2) of them), a DP over (cut k,
 * position j) gives the least boundary-cost sum with every stage <= T, the
 * feasible previous cuts kept in a sliding-window minimum.  Answer = min
 * over T of w*T + f(T): O(G^2) x O(G S) = O(G^3 S) per instance.
 *
 * usage: plan_partition G S N_OURS N_BASELINE [train|pipeline B]
 * Prints one line: ours ms/instance, baseline ms/instance, ratio, and checks
 * both give the same objective on every instance the baseline ran.
 */
#include "plan/plan.h"

#include "core/xalloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double baseline(const struct plan_instance *in, double w)
{
	int g = in->g, s = in->s;
	double *pre = xmalloc(((size_t)g + 1) * sizeof(double));
	pre[0] = 0;
	for (int i = 0; i < g; i++)
		pre[i + 1] = pre[i] + in->x[i];
	size_t nt = 0;
	double *ts = xmalloc(((size_t)g * (g + 1) / 2 + 1) * sizeof(double));
	for (int a = 0; a < g; a++)
		for (int b = a + 1; b <= g; b++)
			ts[nt++] = pre[b] - pre[a];
	qsort(ts, nt, sizeof(double), cmp_double);
	/* d[k][j]: cuts 1..k placed, cut k right after layer j */
	double *d = xmalloc((size_t)(s + 1) * (size_t)g * sizeof(double));
	int *dq = xmalloc(((size_t)g + 1) * sizeof(int));
	double best = HUGE_VAL;
	for (size_t ti = 0; ti < nt; ti++) {
		double t = ts[ti];
		if (ti && t == ts[ti - 1])
			continue;
		double f;
		if (s == 0) {
			f = pre[g] <= t ? 0 : HUGE_VAL;
		} else {
			/* cut k (1-based) can sit after layers k-1 .. g-2-(s-k) */
			for (int j = 0; j < g - 1; j++)
				d[j] = pre[j + 1] <= t && j <= g - 1 - s ? in->c[(size_t)j * s] : HUGE_VAL;
			/* sliding-window minimum over the previous cut, which must
			 * leave the stage (i, j] <= t */
			for (int k = 2; k <= s; k++) {
				double *dk = d + (size_t)(k - 1) * g, *dp = d + (size_t)(k - 2) * g;
				int head = 0, tail = 0, lo = k - 2;
				for (int j = 0; j < g - 1; j++)
					dk[j] = HUGE_VAL;
				for (int j = k - 1; j <= g - 2 - (s - k); j++) {
					int i = j - 1;
					while (tail > head && dp[dq[tail - 1]] >= dp[i])
						tail--;
					dq[tail++] = i;
					while (lo < j && pre[j + 1] - pre[lo + 1] > t)
						lo++;
					while (head < tail && dq[head] < lo)
						head++;
					double m = head < tail ? dp[dq[head]] : HUGE_VAL;
					dk[j] = m + in->c[(size_t)j * s + (k - 1)];
				}
			}
			f = HUGE_VAL;
			double *ds = d + (size_t)(s - 1) * g;
			for (int i = g - 2; i >= s - 1 && pre[g] - pre[i + 1] <= t; i--)
				if (ds[i] < f)
					f = ds[i];
		}
		if (f < HUGE_VAL && w * t + f < best)
			best = w * t + f;
	}
	free(pre);
	free(ts);
	free(d);
	free(dq);
	return best;
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: %s G S N_OURS N_BASELINE [train|pipeline B]\n", argv[0]);
		return 2;
	}
	int g = (int)strtol(argv[1], NULL, 10), s = (int)strtol(argv[2], NULL, 10);
	long n = strtol(argv[3], NULL, 10), nb = strtol(argv[4], NULL, 10);
	enum plan_objective obj = PLAN_OBJ_TRAIN;
	long b = 0;
	if (argc >= 7 && !strcmp(argv[5], "pipeline")) {
		obj = PLAN_OBJ_PIPELINE;
		b = strtol(argv[6], NULL, 10);
	}
	if (nb > n)
		nb = n;
	struct plan_instance *in = xcalloc((size_t)n, sizeof(*in));
	struct plan_synth sy;
	plan_synth_init(&sy, 1234);
	for (long i = 0; i < n; i++)
		plan_synth_next(&sy, g, s, &in[i]);
	double *ours = xmalloc((size_t)n * sizeof(double));

	struct tc_err err = TC_ERR_INIT;
	double t0 = now();
	for (long i = 0; i < n; i++) {
		struct plan_result r = { 0 };
		if (plan_partition(&in[i], obj, b, &r, &err) != 0) {
			fprintf(stderr, "plan_partition: %s\n", err.msg);
			return 1;
		}
		ours[i] = r.objective;
		plan_result_release(&r);
	}
	double t_ours = (now() - t0) / (double)n;

	double w = obj == PLAN_OBJ_TRAIN ? 1.0 : (double)(b - 1);
	double t1 = now();
	long bad = 0;
	double *base = xmalloc(((size_t)nb + 1) * sizeof(double));
	for (long i = 0; i < nb; i++)
		base[i] = baseline(&in[i], w);
	double t_base = nb ? (now() - t1) / (double)nb : 0;
	for (long i = 0; i < nb; i++) {
		double want = base[i];
		if (obj == PLAN_OBJ_PIPELINE) {
			double sx = 0;
			for (int j = 0; j < g; j++)
				sx += in[i].x[j];
			want += sx;
		}
		if (fabs(want - ours[i]) > 1e-9 * (1 + fabs(want)))
			bad++;
	}
	printf("G=%-4d S=%-3d %-8s ours %8.4f ms/inst (n=%ld)  baseline %9.4f ms/inst (n=%ld)  ratio %6.1fx  mismatches %ld\n",
	       g, s, obj == PLAN_OBJ_TRAIN ? "train" : "pipeline", t_ours * 1e3, n, t_base * 1e3, nb,
	       t_ours > 0 ? t_base / t_ours : 0, bad);
	for (long i = 0; i < n; i++)
		plan_instance_release(&in[i]);
	free(in);
	free(ours);
	free(base);
	return bad ? 1 : 0;
}
