/*
 * compare.c -- two runs' metric series aligned by step; the rules are the
 * notes of compare.h and docs/compare.md.
 */
#include "compare/compare.h"
#include "core/json.h"
#include "core/sbuf.h"
#include "core/xalloc.h"
#include "source/source.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the pure part ---- */

struct keyed {
	int cls;         /* 0: (epoch, iter); 1: seq */
	long long k1, k2;
	size_t idx;      /* position in the input (log order) */
};

static struct keyed key_of(const struct compare_pt *p, size_t idx)
{
	if (p->epoch >= 0 || p->iter >= 0)
		return (struct keyed){ 0, p->epoch, p->iter, idx };
	return (struct keyed){ 1, p->seq, 0, idx };
}

static int cmp_key(const struct keyed *x, const struct keyed *y)
{
	if (x->cls != y->cls)
		return x->cls < y->cls ? -1 : 1;
	if (x->k1 != y->k1)
		return x->k1 < y->k1 ? -1 : 1;
	if (x->k2 != y->k2)
		return x->k2 < y->k2 ? -1 : 1;
	return 0;
}

/* By key, then by log position (so the last of equal keys comes last). */
static int cmp_keyed(const void *a, const void *b)
{
	const struct keyed *x = a, *y = b;
	int c = cmp_key(x, y);
	if (c)
		return c;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Sorted keys, one per step: the last logged of each. */
static struct keyed *sorted_keys(const struct compare_pt *v, size_t n, size_t *out_n)
{
	struct keyed *k = xcalloc(n ? n : 1, sizeof(*k));
	for (size_t i = 0; i < n; i++)
		k[i] = key_of(&v[i], i);
	qsort(k, n, sizeof(*k), cmp_keyed);
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		if (m && !cmp_key(&k[m - 1], &k[i]))
			k[m - 1] = k[i];
		else
			k[m++] = k[i];
	}
	*out_n = m;
	return k;
}

static void judge(struct compare_row *r, const struct compare_opts *o)
{
	if (!isfinite(r->a) || !isfinite(r->b)) {
		r->err = INFINITY;
		r->status = CMP_NONFINITE;
		return;
	}
	double d = fabs(r->b - r->a);
	if (fabs(r->a) <= o->atol) {
		r->absolute = true;
		r->err = d;
		r->status = d <= o->atol ? CMP_OK : CMP_OVER;
		return;
	}
	r->err = d / fabs(r->a);
	r->status = r->err <= o->rtol ? CMP_OK : CMP_OVER;
}

void compare_series(const struct compare_pt *a, size_t na, const struct compare_pt *b,
		    size_t nb, const struct compare_opts *o, struct compare_result *out)
{
	size_t ka_n, kb_n;
	struct keyed *ka = sorted_keys(a, na, &ka_n), *kb = sorted_keys(b, nb, &kb_n);
	memset(out, 0, sizeof(*out));
	out->rows = xcalloc(ka_n + kb_n + 1, sizeof(*out->rows));
	out->first_fail = -1;
	double sum = 0, max = -1;
	size_t nrel = 0;
	bool nonfinite = false, abs_over = false;
	size_t i = 0, j = 0;
	while (i < ka_n || j < kb_n) {
		int c = i == ka_n ? 1 : j == kb_n ? -1 : cmp_key(&ka[i], &kb[j]);
		struct compare_row *r = &out->rows[out->nrows++];
		r->a = r->b = NAN;
		if (c < 0) {
			r->step = a[ka[i].idx].step;
			r->a = a[ka[i++].idx].value;
			r->status = CMP_ONLY_A;
			r->err = NAN;
			out->only_a++;
			continue;
		}
		if (c > 0) {
			r->step = b[kb[j].idx].step;
			r->b = b[kb[j++].idx].value;
			r->status = CMP_ONLY_B;
			r->err = NAN;
			out->only_b++;
			continue;
		}
		r->step = a[ka[i].idx].step;
		r->a = a[ka[i++].idx].value;
		r->b = b[kb[j++].idx].value;
		judge(r, o);
		out->ncommon++;
		if (r->status != CMP_OK) {
			out->nfail++;
			if (out->first_fail < 0)
				out->first_fail = (long)(out->nrows - 1);
		}
		if (r->status == CMP_NONFINITE)
			nonfinite = true;
		else if (r->absolute) {
			out->nabsolute++;
			abs_over |= r->status == CMP_OVER;
			continue;
		}
		if (r->err > max) { /* the first non-finite step stays the max */
			max = r->err;
			out->max_step = r->step;
		}
		sum += r->err;
		nrel++;
	}
	out->max_err = nrel ? max : NAN;
	out->mean_err = nrel ? (nonfinite ? INFINITY : sum / (double)nrel) : NAN;
	bool within = !nrel || (o->use_mean ? out->mean_err <= o->rtol : out->max_err <= o->rtol);
	out->aligned = out->ncommon > 0 && !nonfinite && !abs_over && within;
	free(ka);
	free(kb);
}

void compare_result_release(struct compare_result *r)
{
	free(r->rows);
	memset(r, 0, sizeof(*r));
}

/* ---- two stored jobs ---- */

/* The finest kind a series has (point < epoch < summary), or -1. */
static int finest_kind(const struct store_mseries *s)
{
	int k = -1;
	for (size_t i = 0; i < s->n; i++)
		if (!s->v[i].text && (k < 0 || s->v[i].kind < k))
			k = s->v[i].kind;
	return k;
}

static struct compare_pt *points_of(const struct store_mseries *s, int kind, size_t *n)
{
	struct compare_pt *v = xcalloc(s->n ? s->n : 1, sizeof(*v));
	size_t m = 0;
	for (size_t i = 0; i < s->n; i++) {
		const struct store_mpoint *p = &s->v[i];
		if (p->kind != kind || p->text)
			continue;
		v[m++] = (struct compare_pt){ p->epoch, p->iter, p->seq, p->step, p->value };
	}
	*n = m;
	return v;
}

static const char *const kind_names[] = { "point", "epoch", "summary" };

static int load_series(struct job_source *src, const char *ref, const struct compare_job_opts *o,
		       char **id, char **name, struct store_mseries **s, size_t *ns,
		       struct tc_err *err)
{
	struct source_job j = { 0 };
	int rc = source_job(src, ref, &j, err);
	if (rc)
		return rc;
	*id = xstrdup(j.id);
	if (name)
		*name = j.name ? xstrdup(j.name) : NULL;
	source_job_release(&j);
	rc = src->ops->metric_series(src, *id, o->metric, o->rank, s, ns, err);
	if (!rc && (!*ns || finest_kind(&(*s)[0]) < 0))
		rc = tc_error(err, TC_ENOTFOUND, "compare: job %s has no numbers of '%s' on rank %d",
			      *id, o->metric, o->rank);
	return rc;
}

int compare_jobs(struct job_source *src, const char *ref_a, const char *ref_b,
		 const struct compare_job_opts *o, struct compare_jobs *out, struct tc_err *err)
{
	memset(out, 0, sizeof(*out));
	out->metric = xstrdup(o->metric);
	out->rank = o->rank;
	int rc = load_series(src, ref_a, o, &out->job_a, NULL, &out->sa, &out->nsa, err);
	if (!rc)
		rc = load_series(src, ref_b, o, &out->job_b, NULL, &out->sb, &out->nsb, err);
	if (rc)
		return rc;
	/* the finest kind both have: steps if both log steps, else epochs, ... */
	int ka = finest_kind(&out->sa[0]), kb = finest_kind(&out->sb[0]);
	int kind = ka > kb ? ka : kb;
	out->kind = kind_names[kind];
	size_t na, nb;
	out->pa = points_of(&out->sa[0], kind, &na);
	out->pb = points_of(&out->sb[0], kind, &nb);
	compare_series(out->pa, na, out->pb, nb, &o->o, &out->r);
	if (!out->r.ncommon)
		return tc_error(err, TC_EINPUT,
				"compare: %s and %s share no %s step of '%s' (%zu and %zu steps)",
				out->job_a, out->job_b, out->kind, out->metric, na, nb);
	return 0;
}

void compare_jobs_release(struct compare_jobs *c)
{
	free(c->job_a);
	free(c->job_b);
	free(c->metric);
	store_mseries_free(c->sa, c->nsa);
	store_mseries_free(c->sb, c->nsb);
	free(c->pa);
	free(c->pb);
	compare_result_release(&c->r);
	memset(c, 0, sizeof(*c));
}

/* A value keeps its non-finite kind as a string ("nan", "inf", "-inf"). */
static json_t *jval(double v)
{
	if (isnan(v))
		return json_string("nan");
	if (isinf(v))
		return json_string(v > 0 ? "inf" : "-inf");
	return json_real(v);
}

static const char *const status_names[] = { "ok", "over", "nonfinite", "only_a", "only_b" };

json_t *compare_jobs_json(const struct compare_jobs *c, const struct compare_opts *o)
{
	const struct compare_result *r = &c->r;
	json_t *root = json_object();
	json_object_set_new(root, "reference", json_string(c->job_a));
	json_object_set_new(root, "candidate", json_string(c->job_b));
	json_object_set_new(root, "metric", json_string(c->metric));
	json_object_set_new(root, "rank", json_integer(c->rank));
	json_object_set_new(root, "kind", json_string(c->kind));
	json_object_set_new(root, "rtol", json_real(o->rtol));
	json_object_set_new(root, "atol", json_real(o->atol));
	json_object_set_new(root, "mode", json_string(o->use_mean ? "mean" : "max"));
	json_object_set_new(root, "common", json_integer((json_int_t)r->ncommon));
	json_object_set_new(root, "only_reference", json_integer((json_int_t)r->only_a));
	json_object_set_new(root, "only_candidate", json_integer((json_int_t)r->only_b));
	json_object_set_new(root, "failing", json_integer((json_int_t)r->nfail));
	json_object_set_new(root, "max_err", isinf(r->max_err) ? json_string("inf") : json_real_or_null(r->max_err));
	json_object_set_new(root, "max_step", json_string_or_null(r->max_step));
	json_object_set_new(root, "mean_err", isinf(r->mean_err) ? json_string("inf") : json_real_or_null(r->mean_err));
	json_object_set_new(root, "first_fail",
			    r->first_fail >= 0 ? json_string(r->rows[r->first_fail].step) : json_null());
	json_object_set_new(root, "aligned", json_boolean(r->aligned));
	json_t *rows = json_array();
	for (size_t i = 0; i < r->nrows; i++) {
		const struct compare_row *w = &r->rows[i];
		json_t *x = json_object();
		json_object_set_new(x, "step", json_string(w->step));
		json_object_set_new(x, "a", w->status == CMP_ONLY_B ? json_null() : jval(w->a));
		json_object_set_new(x, "b", w->status == CMP_ONLY_A ? json_null() : jval(w->b));
		json_object_set_new(x, "err", w->status >= CMP_ONLY_A ? json_null() : jval(w->err));
		json_object_set_new(x, "absolute", json_boolean(w->absolute));
		json_object_set_new(x, "status", json_string(status_names[w->status]));
		json_array_append_new(rows, x);
	}
	json_object_set_new(root, "steps", rows);
	return root;
}

/* ---- more than two jobs ---- */

void compare_align(const struct compare_pt *const *pts, const size_t *npts, size_t njobs,
		   struct compare_aligned *out)
{
	struct keyed **k = xcalloc(njobs + 1, sizeof(*k));
	size_t *nk = xcalloc(njobs + 1, sizeof(*nk)), *at = xcalloc(njobs + 1, sizeof(*at));
	size_t total = 0;
	for (size_t j = 0; j < njobs; j++) {
		k[j] = sorted_keys(pts[j], npts[j], &nk[j]);
		total += nk[j];
	}
	memset(out, 0, sizeof(*out));
	out->njobs = njobs;
	out->step = xcalloc(total + 1, sizeof(*out->step));
	out->v = xcalloc((total + 1) * (njobs ? njobs : 1), sizeof(*out->v));
	for (;;) {
		/* the smallest key at the jobs' heads */
		const struct keyed *min = NULL;
		for (size_t j = 0; j < njobs; j++)
			if (at[j] < nk[j] && (!min || cmp_key(&k[j][at[j]], min) < 0))
				min = &k[j][at[j]];
		if (!min)
			break;
		struct keyed key = *min;
		double *row = &out->v[out->nsteps * njobs];
		for (size_t j = 0; j < njobs; j++) {
			row[j] = NAN;
			if (at[j] < nk[j] && !cmp_key(&k[j][at[j]], &key)) {
				const struct compare_pt *p = &pts[j][k[j][at[j]].idx];
				if (!out->step[out->nsteps])
					out->step[out->nsteps] = p->step;
				row[j] = p->value;
				at[j]++;
			}
		}
		out->nsteps++;
	}
	for (size_t j = 0; j < njobs; j++)
		free(k[j]);
	free(k);
	free(nk);
	free(at);
}

void compare_aligned_release(struct compare_aligned *a)
{
	free(a->step);
	free(a->v);
	memset(a, 0, sizeof(*a));
}

struct compare_range *compare_ranges(const struct compare_aligned *a, size_t nranges, size_t *nr)
{
	size_t n = nranges < a->nsteps ? nranges : a->nsteps;
	struct compare_range *r = xcalloc(n + 1, sizeof(*r));
	for (size_t i = 0; i < n; i++) {
		/* equal counts, the remainder spread over the first ranges */
		r[i].first = i * (a->nsteps / n) + (i < a->nsteps % n ? i : a->nsteps % n);
		r[i].last = r[i].first + a->nsteps / n - (i < a->nsteps % n ? 0 : 1);
		r[i].mean = xcalloc(a->njobs + 1, sizeof(double));
		for (size_t j = 0; j < a->njobs; j++) {
			double sum = 0;
			size_t m = 0;
			for (size_t s = r[i].first; s <= r[i].last; s++) {
				double v = a->v[s * a->njobs + j];
				if (isfinite(v)) {
					sum += v;
					m++;
				}
			}
			r[i].mean[j] = m ? sum / (double)m : NAN;
		}
	}
	*nr = n;
	return r;
}

void compare_ranges_free(struct compare_range *r, size_t nr)
{
	for (size_t i = 0; i < nr; i++)
		free(r[i].mean);
	free(r);
}

int compare_many_jobs(struct job_source *src, const char *const *refs, size_t n,
		      const struct compare_many_opts *o, struct compare_many *out, struct tc_err *err)
{
	memset(out, 0, sizeof(*out));
	if (n < 2)
		return tc_error(err, TC_EUSAGE, "compare: give at least two jobs");
	out->njobs = n;
	out->metric = xstrdup(o->metric);
	out->rank = o->rank;
	out->ids = xcalloc(n, sizeof(*out->ids));
	out->names = xcalloc(n, sizeof(*out->names));
	out->series = xcalloc(n, sizeof(*out->series));
	out->nseries = xcalloc(n, sizeof(*out->nseries));
	out->pts = xcalloc(n, sizeof(*out->pts));
	out->npts = xcalloc(n, sizeof(*out->npts));
	struct compare_job_opts jo = { o->metric, o->rank, { 0.01, 1e-8, false } };
	int kind = 0, rc = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		rc = load_series(src, refs[i], &jo, &out->ids[i], &out->names[i], &out->series[i],
				 &out->nseries[i], err);
		if (!rc && finest_kind(&out->series[i][0]) > kind)
			kind = finest_kind(&out->series[i][0]);
	}
	if (rc)
		return rc;
	out->kind = kind_names[kind];
	for (size_t i = 0; i < n; i++)
		out->pts[i] = points_of(&out->series[i][0], kind, &out->npts[i]);
	compare_align((const struct compare_pt *const *)out->pts, out->npts, n, &out->a);
	out->r = compare_ranges(&out->a, o->ranges ? o->ranges : 10, &out->nr);
	return 0;
}

void compare_many_release(struct compare_many *c)
{
	for (size_t i = 0; i < c->njobs; i++) {
		if (c->ids)
			free(c->ids[i]);
		if (c->names)
			free(c->names[i]);
		if (c->series)
			store_mseries_free(c->series[i], c->nseries[i]);
		if (c->pts)
			free(c->pts[i]);
	}
	free(c->ids);
	free(c->names);
	free(c->series);
	free(c->nseries);
	free(c->pts);
	free(c->npts);
	free(c->metric);
	compare_aligned_release(&c->a);
	compare_ranges_free(c->r, c->nr);
	memset(c, 0, sizeof(*c));
}

static json_t *num_or_null(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

json_t *compare_many_json(const struct compare_many *c)
{
	json_t *root = json_object();
	json_object_set_new(root, "reference", json_string(c->ids[0]));
	json_t *jobs = json_array();
	for (size_t i = 0; i < c->njobs; i++)
		json_array_append_new(jobs, json_pack("{s:s, s:o}", "id", c->ids[i], "name",
						      json_string_or_null(c->names[i])));
	json_object_set_new(root, "jobs", jobs);
	json_object_set_new(root, "metric", json_string(c->metric));
	json_object_set_new(root, "rank", json_integer(c->rank));
	json_object_set_new(root, "kind", json_string(c->kind));
	json_t *ranges = json_array();
	for (size_t i = 0; i < c->nr; i++) {
		json_t *m = json_array(), *rel = json_array();
		double ref = c->r[i].mean[0];
		for (size_t j = 0; j < c->njobs; j++) {
			double v = c->r[i].mean[j];
			json_array_append_new(m, num_or_null(v));
			json_array_append_new(rel, num_or_null(fabs(ref) > 0 ? (v - ref) / fabs(ref) : NAN));
		}
		json_array_append_new(ranges, json_pack("{s:s, s:s, s:o, s:o}", "first",
							c->a.step[c->r[i].first], "last",
							c->a.step[c->r[i].last], "mean", m, "relative", rel));
	}
	json_object_set_new(root, "ranges", ranges);
	json_t *steps = json_array();
	for (size_t s = 0; s < c->a.nsteps; s++) {
		json_t *v = json_array();
		for (size_t j = 0; j < c->njobs; j++)
			json_array_append_new(v, num_or_null(c->a.v[s * c->njobs + j]));
		json_array_append_new(steps, json_pack("{s:s, s:o}", "step", c->a.step[s], "values", v));
	}
	json_object_set_new(root, "steps", steps);
	return root;
}
