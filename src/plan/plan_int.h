/*
 * plan_int.h -- private to src/plan/: the general partition solver that the
 * APSS objectives and the strategy search share.
 *
 * Problem: split layers 0..g-1 into s+1 non-empty contiguous stages t = 0..s
 * by cuts p_1 < ... < p_s (p = number of layers before the cut, 1..g-1);
 * minimise
 *     wx * max_t X_t + wy * max_t Y_t + sum_k c[(p_k - 1) * s + (k - 1)]
 * where X_t, Y_t are the stage sums of x and y, subject to, for every stage,
 *     sum mstat + mult[t] * sum mact <= cap[t]
 * Requirements: all values finite and >= 0; mult non-increasing and cap
 * non-decreasing in t (later stages are never stricter: true of 1F1B
 * pipelines, and what makes the greedy feasibility test exact).
 * y == NULL or wy == 0: no second bottleneck; mstat == NULL: no memory caps.
 */
#ifndef TC_PLAN_INT_H
#define TC_PLAN_INT_H

#include "core/sbuf.h"

#include <stdbool.h>
#include <stddef.h>

#include "core/err.h"

struct plan_problem {
	int g, s;
	const double *x;
	const double *c;
	double wx;
	const double *y;
	double wy;
	const double *mstat, *mact, *mult, *cap;
};

/* Exact optimum: fills cuts[0..s-1] as layer indices j (cut right after
 * layer j) and *value (wx*X + wy*Y + comm of that partition).  Returns 0, or
 * 1 when no partition satisfies the memory caps. */
int plan_solve(const struct plan_problem *p, int *cuts, double *value);

/* Statistics of the last plan_solve in this thread (for the benchmark). */
long plan_solve_dp_runs(void);

/* Stage sums of a partition given as cut layer indices. */
void plan_stage_sums(const double *v, int g, const int *cuts, int s, double *sums);


/*
 * v as JSON in the shortest form that reads back as the same double (the
 * first of %.15g, %.16g, %.17g that does: 2.543722, not 2.5437219999999998);
 * null when not finite.
 */
void plan_add_number(struct sbuf *sb, double v);

/* ---- strategy internals (strategy.c), exposed for the tests ------------- */

struct plan_cluster;
struct plan_model; /* built-in shape or YAML layer table */

int plan_model_load(const char *name_or_path, int seq_len, struct plan_model **out,
		    struct tc_err *err);
/* A model YAML file's len bytes; name (a path) names them and the model. */
int plan_model_parse(const char *text, size_t len, const char *name, struct plan_model **out,
		     struct tc_err *err);
void plan_model_free(struct plan_model *m);
int plan_model_layers(const struct plan_model *m);
const char *plan_model_name(const struct plan_model *m);
/* Is tp a usable tensor-parallel degree for the model (heads divisible, or
 * profiled at that degree)? */
bool plan_model_tp_ok(const struct plan_model *m, int tp);

/* One (tp, dp, pp, mb) candidate as a plan_problem: x = per-micro-batch
 * layer time, y = data-parallel all-reduce time, c = boundary time, memory
 * caps per stage; step time = solver value + sum_x. */
struct plan_cand_problem {
	struct plan_problem p;
	double *x, *y, *c, *mstat, *mact, *mult, *cap;
	double sum_x;
};
void plan_cand_build(const struct plan_model *m, const struct plan_cluster *cl, int tp, int dp,
		     int pp, int mb, long micro_batches, struct plan_cand_problem *out);
void plan_cand_release(struct plan_cand_problem *cp);

#endif
