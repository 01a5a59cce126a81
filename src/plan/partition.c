/* partition.c -- the two APSS objectives on top of the general solver. */
#include "plan/plan.h"
#include "plan/plan_int.h"

#include "core/xalloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void plan_result_release(struct plan_result *r)
{
	if (!r)
		return;
	free(r->cuts);
	free(r->stages);
	memset(r, 0, sizeof(*r));
}

/* Fill out from cuts; the objective is recomputed from the partition so the
 * numbers printed are exactly those of the cuts printed. */
static void fill_result(const struct plan_instance *in, enum plan_objective obj, long b,
			const int *cuts, struct plan_result *out)
{
	int g = in->g, s = in->s;
	memset(out, 0, sizeof(*out));
	out->s = s;
	out->cuts = xmalloc(((size_t)s + 1) * sizeof(int));
	out->stages = xmalloc(((size_t)s + 1) * sizeof(int));
	if (s)
		memcpy(out->cuts, cuts, (size_t)s * sizeof(int));
	/* Stage sums as prefix differences, like the solver. */
	double *pre = xmalloc(((size_t)g + 1) * sizeof(double));
	pre[0] = 0;
	for (int i = 0; i < g; i++)
		pre[i + 1] = pre[i] + in->x[i];
	double bott = 0, comm = 0;
	int a = 0;
	for (int t = 0; t <= s; t++) {
		int e = t < s ? cuts[t] + 1 : g;
		out->stages[t] = e - a;
		if (pre[e] - pre[a] > bott)
			bott = pre[e] - pre[a];
		if (t < s)
			comm += in->c[(size_t)cuts[t] * s + t];
		a = e;
	}
	out->bottleneck = bott;
	out->comm = comm;
	out->sum_x = pre[g];
	if (obj == PLAN_OBJ_TRAIN) {
		out->objective = bott + comm;
	} else {
		out->micro_batches = b;
		out->objective = (double)(b - 1) * bott + comm + pre[g];
	}
	free(pre);
}

static int check_obj(enum plan_objective obj, long b, struct tc_err *err)
{
	if (obj == PLAN_OBJ_PIPELINE && b < 1)
		return tc_error(err, TC_EINPUT,
				"the pipeline objective needs the number of micro-batches "
				"(--micro-batches B or \"micro_batches\" in the instance)");
	return 0;
}

int plan_partition(const struct plan_instance *in, enum plan_objective obj,
		   long micro_batches, struct plan_result *out, struct tc_err *err)
{
	int rc = check_obj(obj, micro_batches, err);
	if (rc)
		return rc;
	struct plan_problem p = {
		.g = in->g,
		.s = in->s,
		.x = in->x,
		.c = in->c,
		.wx = obj == PLAN_OBJ_TRAIN ? 1.0 : (double)(micro_batches - 1),
	};
	int *cuts = xmalloc(((size_t)in->s + 1) * sizeof(int));
	double value;
	if (plan_solve(&p, cuts, &value) != 0) {
		/* Without memory caps every instance is feasible. */
		free(cuts);
		return tc_error(err, TC_EINPUT, "instance has no partition");
	}
	fill_result(in, obj, micro_batches, cuts, out);
	free(cuts);
	return 0;
}

int plan_score(const struct plan_instance *in, enum plan_objective obj,
	       long micro_batches, const int *cuts, int ncuts, const char *what,
	       struct plan_result *out, struct tc_err *err)
{
	int rc = check_obj(obj, micro_batches, err);
	if (rc)
		return rc;
	if (ncuts != in->s)
		return tc_error(err, TC_EINPUT, "%s: field 'cuts': %d cuts, the instance has num_split %d",
				what, ncuts, in->s);
	for (int k = 0; k < ncuts; k++) {
		if (cuts[k] < 0 || cuts[k] > in->g - 2)
			return tc_error(err, TC_EINPUT,
					"%s: field 'cuts[%d]': position %d outside [0, %d]", what, k,
					cuts[k], in->g - 2);
		if (k && cuts[k] <= cuts[k - 1])
			return tc_error(err, TC_EINPUT,
					"%s: field 'cuts[%d]': positions must increase (%d after %d)",
					what, k, cuts[k], cuts[k - 1]);
	}
	fill_result(in, obj, micro_batches, cuts, out);
	return 0;
}
