/*
 * eval.c -- partition a set of instances, APSS's validation metric (mean
 * objective +- standard error), time per instance, and the optimality gap
 * of someone else's partitions for the same instances.
 */
#include "plan/plan.h"
#include "plan/plan_int.h"

#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long pick_b(long flag, const struct plan_instance *in)
{
	return flag > 0 ? flag : in->micro_batches;
}

void plan_result_to_json(const struct plan_result *r, long index, enum plan_objective obj,
			 struct sbuf *out)
{
	sbuf_addf(out, "{\"instance\":%ld,\"objective\":", index);
	plan_add_number(out, r->objective);
	sbuf_adds(out, ",\"bottleneck\":");
	plan_add_number(out, r->bottleneck);
	sbuf_adds(out, ",\"comm\":");
	plan_add_number(out, r->comm);
	if (obj == PLAN_OBJ_PIPELINE) {
		sbuf_adds(out, ",\"sum_x\":");
		plan_add_number(out, r->sum_x);
		sbuf_addf(out, ",\"micro_batches\":%ld", r->micro_batches);
	}
	sbuf_adds(out, ",\"cuts\":[");
	for (int k = 0; k < r->s; k++)
		sbuf_addf(out, k ? ",%d" : "%d", r->cuts[k]);
	sbuf_adds(out, "],\"stages\":[");
	for (int t = 0; t <= r->s; t++)
		sbuf_addf(out, t ? ",%d" : "%d", r->stages[t]);
	sbuf_adds(out, "]}\n");
}

static void result_to_row(const struct plan_result *r, long index, struct sbuf *out)
{
	sbuf_addf(out, "%-8ld %-12.6f %-12.6f %-12.6f ", index, r->objective, r->bottleneck, r->comm);
	for (int t = 0; t <= r->s; t++)
		sbuf_addf(out, t ? "+%d" : "%d", r->stages[t]);
	sbuf_addch(out, '\n');
}

static int put(FILE *f, const struct sbuf *sb, struct tc_err *err)
{
	if (fwrite(sb->buf, 1, sb->len, f) != sb->len)
		return tc_error_errno(err, TC_ESYS, "cannot write output");
	return 0;
}

int plan_partition_file(const char *path, enum plan_objective obj, long micro_batches,
			bool table, FILE *out, struct tc_err *err)
{
	struct plan_reader *r = NULL;
	struct plan_instance in = { 0 };
	struct plan_result res = { 0 };
	struct sbuf line = SBUF_INIT;
	int rc = plan_reader_open(path, &r, err);
	if (rc)
		return rc;
	if (table) {
		sbuf_addf(&line, "%-8s %-12s %-12s %-12s %s\n", "instance", "objective", "bottleneck",
			  "comm", "stage sizes");
		if ((rc = put(out, &line, err)))
			goto out;
	}
	while ((rc = plan_reader_next(r, &in, err)) == 1) {
		long idx = plan_reader_index(r);
		rc = plan_partition(&in, obj, pick_b(micro_batches, &in), &res, err);
		if (rc) {
			tc_error_prefix(err, "%s: instance %ld", path, idx);
			goto out;
		}
		sbuf_reset(&line);
		if (table)
			result_to_row(&res, idx, &line);
		else
			plan_result_to_json(&res, idx, obj, &line);
		if ((rc = put(out, &line, err)))
			goto out;
		plan_result_release(&res);
		plan_instance_release(&in);
	}
out:
	plan_result_release(&res);
	plan_instance_release(&in);
	plan_reader_free(r);
	sbuf_release(&line);
	return rc < 0 ? rc : 0;
}

/* One line of a partitions file: "cuts" (layer indices) or "stages" (sizes). */
static int read_their_cuts(const char *line, size_t len, const struct plan_instance *in,
			   long idx, const char *what, int **cuts, int *n, struct tc_err *err)
{
	json_error_t jerr;
	int rc = 0;
	json_t *root = json_loadb(line, len, 0, &jerr);
	*cuts = NULL;
	*n = 0;
	if (!root || !json_is_object(root)) {
		rc = tc_error(err, TC_EINPUT, "%s: not a JSON object%s%s", what, root ? "" : ": ",
			      root ? "" : jerr.text);
		goto out;
	}
	json_t *ji = json_object_get(root, "instance");
	if (ji && (!json_is_integer(ji) || json_integer_value(ji) != idx)) {
		rc = tc_error(err, TC_EINPUT, "%s: field 'instance': expected %ld (lines follow the instances)",
			      what, idx);
		goto out;
	}
	json_t *jc = json_object_get(root, "cuts"), *js = json_object_get(root, "stages");
	json_t *arr = jc ? jc : js;
	const char *field = jc ? "cuts" : "stages";
	if (!arr || !json_is_array(arr)) {
		rc = tc_error(err, TC_EINPUT, "%s: field 'cuts' (or 'stages'): missing or not an array",
			      what);
		goto out;
	}
	size_t m = json_array_size(arr);
	int *v = xmalloc((m + 1) * sizeof(int));
	for (size_t i = 0; i < m; i++) {
		json_t *e = json_array_get(arr, i);
		if (!json_is_integer(e) || json_integer_value(e) < -1000000000 ||
		    json_integer_value(e) > 1000000000) {
			free(v);
			rc = tc_error(err, TC_EINPUT, "%s: field '%s[%zu]': not an integer", what, field, i);
			goto out;
		}
		v[i] = (int)json_integer_value(e);
	}
	if (!jc) {
		/* stage sizes -> cut positions */
		long sum = 0;
		for (size_t i = 0; i < m; i++) {
			if (v[i] < 1) {
				free(v);
				rc = tc_error(err, TC_EINPUT, "%s: field 'stages[%zu]': empty stage", what, i);
				goto out;
			}
			sum += v[i];
		}
		if (sum != in->g || m < 1) {
			free(v);
			rc = tc_error(err, TC_EINPUT, "%s: field 'stages': sizes sum to %ld, graph_size is %d",
				      what, sum, in->g);
			goto out;
		}
		int acc = 0;
		for (size_t i = 0; i + 1 < m; i++) {
			acc += v[i];
			v[i] = acc - 1;
		}
		m--;
	}
	*cuts = v;
	*n = (int)m;
out:
	json_decref(root);
	return rc;
}

struct acc {
	double n, mean, m2; /* Welford */
};

static void acc_add(struct acc *a, double v)
{
	a->n += 1;
	double d = v - a->mean;
	a->mean += d / a->n;
	a->m2 += d * (v - a->mean);
}

static double acc_stderr(const struct acc *a)
{
	if (a->n < 2)
		return 0;
	return sqrt(a->m2 / (a->n - 1)) / sqrt(a->n);
}

int plan_eval_file(const char *path, const struct plan_eval_opts *o, struct plan_eval *e,
		   struct tc_err *err)
{
	struct plan_reader *r = NULL;
	struct plan_instance in = { 0 };
	struct plan_result ours = { 0 }, theirs = { 0 };
	struct sbuf what = SBUF_INIT, line = SBUF_INIT;
	FILE *af = NULL;
	char *aline = NULL;
	size_t aalloc = 0;
	long alineno = 0;
	struct acc a_ours = { 0 }, a_theirs = { 0 }, a_gap = { 0 }, a_abs = { 0 };
	double solve = 0, t0 = mono();
	int rc;

	memset(e, 0, sizeof(*e));
	rc = plan_reader_open(path, &r, err);
	if (rc)
		return rc;
	if (o->against) {
		af = fopen(o->against, "r");
		if (!af) {
			rc = tc_error_errno(err, TC_EINPUT, "cannot open '%s'", o->against);
			goto out;
		}
		e->has_against = true;
	}
	while ((rc = plan_reader_next(r, &in, err)) == 1) {
		long idx = plan_reader_index(r);
		long b = pick_b(o->micro_batches, &in);
		double t1 = mono();
		rc = plan_partition(&in, o->obj, b, &ours, err);
		solve += mono() - t1;
		if (rc) {
			tc_error_prefix(err, "%s: instance %ld", path, idx);
			goto out;
		}
		acc_add(&a_ours, ours.objective);
		if (o->partitions_out) {
			sbuf_reset(&line);
			plan_result_to_json(&ours, idx, o->obj, &line);
			if ((rc = put(o->partitions_out, &line, err)))
				goto out;
		}
		if (af) {
			ssize_t n;
			do {
				n = getline(&aline, &aalloc, af);
				alineno++;
			} while (n > 0 && strspn(aline, " \t\r\n") == (size_t)n);
			if (n < 0) {
				rc = tc_error(err, TC_EINPUT, "%s: ends before instance %ld of %s",
					      o->against, idx, path);
				goto out;
			}
			sbuf_reset(&what);
			sbuf_addf(&what, "%s:%ld: instance %ld", o->against, alineno, idx);
			int *cuts, nc;
			rc = read_their_cuts(aline, (size_t)n, &in, idx, what.buf, &cuts, &nc, err);
			if (!rc)
				rc = plan_score(&in, o->obj, b, cuts, nc, what.buf, &theirs, err);
			free(cuts);
			if (rc)
				goto out;
			double gap_abs = theirs.objective - ours.objective;
			acc_add(&a_theirs, theirs.objective);
			acc_add(&a_abs, gap_abs);
			if (ours.objective > 0) {
				double g = gap_abs / ours.objective;
				acc_add(&a_gap, g);
				if (g > e->max_gap)
					e->max_gap = g;
			}
			if (gap_abs <= 1e-9 * (1 + fabs(ours.objective)))
				e->optimal++;
			plan_result_release(&theirs);
		}
		plan_result_release(&ours);
		plan_instance_release(&in);
	}
	if (rc < 0)
		goto out;
	rc = 0;
	if (af) {
		ssize_t n;
		while ((n = getline(&aline, &aalloc, af)) >= 0)
			if (strspn(aline, " \t\r\n") != (size_t)n) {
				rc = tc_error(err, TC_EINPUT, "%s: more partitions than the %ld instances of %s",
					      o->against, (long)a_ours.n, path);
				goto out;
			}
	}
	e->n = (long)a_ours.n;
	if (e->n == 0) {
		rc = tc_error(err, TC_EINPUT, "%s: no instances", path);
		goto out;
	}
	e->mean = a_ours.mean;
	e->stderr_ = acc_stderr(&a_ours);
	e->seconds_per_instance = solve / (double)e->n;
	if (af) {
		e->their_mean = a_theirs.mean;
		e->their_stderr = acc_stderr(&a_theirs);
		e->mean_gap = a_gap.mean;
		e->mean_abs_gap = a_abs.mean;
		e->gap_of_means = e->mean > 0 ? e->their_mean / e->mean - 1 : 0;
	}
	e->total_seconds = mono() - t0;
out:
	plan_result_release(&ours);
	plan_result_release(&theirs);
	plan_instance_release(&in);
	plan_reader_free(r);
	if (af)
		fclose(af);
	free(aline);
	sbuf_release(&what);
	sbuf_release(&line);
	return rc;
}

void plan_eval_print(const struct plan_eval *e, enum plan_objective obj, bool json, FILE *out)
{
	const char *on = obj == PLAN_OBJ_TRAIN ? "train" : "pipeline";
	if (json) {
		struct sbuf sb = SBUF_INIT;
		sbuf_addf(&sb, "{\"instances\":%ld,\"objective\":\"%s\",\"mean\":", e->n, on);
		plan_add_number(&sb, e->mean);
		sbuf_adds(&sb, ",\"stderr\":");
		plan_add_number(&sb, e->stderr_);
		sbuf_addf(&sb, ",\"ms_per_instance\":%.6g,\"total_seconds\":%.6g",
			  e->seconds_per_instance * 1e3, e->total_seconds);
		if (e->has_against) {
			const struct {
				const char *key;
				double v;
			} f[] = { { "mean", e->their_mean },	 { "stderr", e->their_stderr },
				  { "mean_gap", e->mean_gap },	 { "max_gap", e->max_gap },
				  { "mean_abs_gap", e->mean_abs_gap }, { "gap_of_means", e->gap_of_means } };
			sbuf_adds(&sb, ",\"against\":{");
			for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
				sbuf_addf(&sb, "%s\"%s\":", i ? "," : "", f[i].key);
				plan_add_number(&sb, f[i].v);
			}
			sbuf_addf(&sb, ",\"optimal\":%ld}", e->optimal);
		}
		sbuf_adds(&sb, "}\n");
		fwrite(sb.buf, 1, sb.len, out);
		sbuf_release(&sb);
		return;
	}
	fprintf(out, "instances:          %ld\n", e->n);
	fprintf(out, "objective:          %s (exact optimum)\n", on);
	fprintf(out, "mean objective:     %.6f +- %.6f (std error)\n", e->mean, e->stderr_);
	fprintf(out, "time per instance:  %.4f ms (solve only; %.2f s in all)\n",
		e->seconds_per_instance * 1e3, e->total_seconds);
	if (e->has_against) {
		fprintf(out, "against:            mean objective %.6f +- %.6f\n", e->their_mean,
			e->their_stderr);
		fprintf(out, "optimality gap:     mean %.4f%%, max %.4f%%, mean absolute %.6f, of means %.4f%%\n",
			e->mean_gap * 100, e->max_gap * 100, e->mean_abs_gap, e->gap_of_means * 100);
		fprintf(out, "optimal:            %ld of %ld instances\n", e->optimal, e->n);
	}
}
