/*
 * query.c -- job-level reads of stored metrics: the summaries and the
 * point queries of query.h.  The rules are in docs/metrics.md.
 */
#include "metrics/query.h"
#include "core/json.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "spec/spec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[] = { "point", "epoch", "summary" };

static const char *kind_name(int k)
{
	return k >= 0 && k < 3 ? kind_names[k] : "point";
}

void metrics_settings_from_spec(const char *spec_json, struct metrics_settings *out)
{
	struct spec *s = NULL;
	struct tc_err err = TC_ERR_INIT;
	memset(out, 0, sizeof(*out));
	if (spec_from_json(spec_json, &s, &err) == 0) {
		out->warmup_steps = s->metrics_warmup_steps;
		out->batch_size = s->metrics_batch_size;
		out->accuracy = s->metrics_accuracy ? xstrdup(s->metrics_accuracy) : NULL;
	}
	spec_free(s);
	tc_err_release(&err);
}

void metrics_settings_release(struct metrics_settings *s)
{
	free(s->accuracy);
	s->accuracy = NULL;
}

/* ---- summary ---- */

static const char *meta_of(const struct store_mkv *m, size_t nm, const char *metric,
			   const char *key)
{
	for (size_t i = 0; i < nm; i++)
		if (!strcmp(m[i].name, metric) && m[i].key && !strcmp(m[i].key, key))
			return m[i].value;
	return NULL;
}

static void sum_series(struct metrics_metric_sum *ms, const struct store_mseries *s,
		       const struct store_mkv *meta, size_t nmeta)
{
	int kind = STORE_MSUMMARY;
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].kind < kind)
			kind = s->v[i].kind;
	const char *unit = meta_of(meta, nmeta, s->metric, "unit");
	ms->name = xstrdup(s->metric);
	ms->rank = s->rank;
	ms->kind = kind_name(kind);
	ms->goal = metrics_goal_of(s->metric, meta_of(meta, nmeta, s->metric, "GOAL"));
	ms->unit = unit && *unit ? xstrdup(unit) : NULL;
	struct metrics_stat st;
	metrics_stat_init(&st, ms->goal);
	const struct store_mpoint *last = NULL, *best = NULL;
	for (size_t i = 0; i < s->n; i++) {
		const struct store_mpoint *p = &s->v[i];
		if (p->kind != kind)
			continue;
		if (p->text) {
			free(ms->text);
			ms->text = xstrdup(p->text);
			continue;
		}
		metrics_stat_add(&st, p->value);
		last = p;
		if (st.best_index == st.n - 1 && isfinite(p->value))
			best = p;
	}
	ms->n = st.n;
	ms->last = st.last;
	ms->best = st.best;
	ms->min = st.min;
	ms->max = st.max;
	ms->mean = metrics_stat_mean(&st);
	ms->last_step = last ? xstrdup(last->step) : NULL;
	ms->best_step = best ? xstrdup(best->step) : NULL;
}

struct seqt {
	long long seq;
	double t;
};

static int cmp_seqt(const void *a, const void *b)
{
	const struct seqt *x = a, *y = b;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Throughput of one rank by the first rule that gives a number (docs). */
static void rank_tput(struct metrics_rank_sum *rs, const struct store_mseries *v, size_t nv,
		      const struct metrics_settings *set)
{
	size_t warm = (size_t)set->warmup_steps;
	double *vals = NULL;
	size_t nvals = 0, alloc = 0;
	rs->throughput = NAN;
	/* 1. an ips metric: the one with the most step records */
	const struct store_mseries *ips = NULL;
	size_t ips_n = 0;
	for (size_t i = 0; i < nv; i++) {
		if (v[i].rank != rs->rank || !metrics_is_ips_name(v[i].metric))
			continue;
		size_t k = 0;
		for (size_t j = 0; j < v[i].n; j++)
			k += v[i].v[j].kind == STORE_MPOINT && !v[i].v[j].text;
		if (k > ips_n) {
			ips = &v[i];
			ips_n = k;
		}
	}
	if (ips) {
		for (size_t j = 0; j < ips->n; j++)
			if (ips->v[j].kind == STORE_MPOINT && !ips->v[j].text) {
				XGROW(vals, nvals + 1, alloc);
				vals[nvals++] = ips->v[j].value;
			}
		rs->throughput = metrics_tput_from_ips(vals, nvals, warm);
		if (isfinite(rs->throughput)) {
			rs->method = "ips";
			rs->source = xstrdup(ips->metric);
			goto out;
		}
	}
	if (set->batch_size <= 0)
		goto out;
	/* 2. MindFormers per_step_time (ms) */
	for (size_t i = 0; i < nv; i++) {
		if (v[i].rank != rs->rank || strcmp(v[i].metric, "per_step_time"))
			continue;
		nvals = 0;
		for (size_t j = 0; j < v[i].n; j++)
			if (v[i].v[j].kind == STORE_MPOINT && !v[i].v[j].text) {
				XGROW(vals, nvals + 1, alloc);
				vals[nvals++] = v[i].v[j].value;
			}
		rs->throughput = metrics_tput_from_steptime(vals, nvals, warm, set->batch_size);
		if (isfinite(rs->throughput)) {
			rs->method = "step_time";
			rs->source = xstrdup(v[i].metric);
			goto out;
		}
	}
	/* 3. the wall times of the step records (Ais-Bench's rule, docs/formats.md) */
	{
		struct seqt *st = NULL;
		size_t nst = 0, ast = 0;
		for (size_t i = 0; i < nv; i++)
			for (size_t j = 0; v[i].rank == rs->rank && j < v[i].n; j++)
				if (v[i].v[j].kind == STORE_MPOINT) {
					XGROW(st, nst + 1, ast);
					st[nst++] = (struct seqt){ v[i].v[j].seq, v[i].v[j].wall_time };
				}
		qsort(st, nst, sizeof(*st), cmp_seqt);
		nvals = 0;
		for (size_t i = 0; i < nst; i++) {
			if (i && st[i].seq == st[i - 1].seq) {
				if (st[i].t > vals[nvals - 1])
					vals[nvals - 1] = st[i].t; /* the step ends with its last record */
				continue;
			}
			XGROW(vals, nvals + 1, alloc);
			vals[nvals++] = st[i].t;
		}
		free(st);
		rs->throughput = metrics_tput_from_times(vals, nvals, warm, set->batch_size);
		if (isfinite(rs->throughput))
			rs->method = "step_times";
	}
out:
	free(vals);
}

static struct metrics_rank_sum *rank_find(struct metrics_job_summary *s, int rank, size_t *alloc)
{
	for (size_t i = 0; i < s->nranks; i++)
		if (s->ranks[i].rank == rank)
			return &s->ranks[i];
	XGROW(s->ranks, s->nranks + 1, *alloc);
	struct metrics_rank_sum *r = &s->ranks[s->nranks++];
	memset(r, 0, sizeof(*r));
	r->rank = rank;
	r->throughput = NAN;
	return r;
}

static int cmp_rank(const void *a, const void *b)
{
	const struct metrics_rank_sum *x = a, *y = b;
	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* Counters of every rank (and a row for each), sorted by rank. */
static void add_counters(struct metrics_job_summary *out, const struct store_mcount *cnt,
			 size_t ncnt, size_t *ralloc)
{
	for (size_t i = 0; i < ncnt; i++) {
		struct metrics_rank_sum *r = rank_find(out, cnt[i].rank, ralloc);
		r->lines = cnt[i].lines;
		r->records = cnt[i].records;
		r->malformed = cnt[i].malformed;
		r->last_error = cnt[i].last_error ? xstrdup(cnt[i].last_error) : NULL;
		out->malformed += cnt[i].malformed;
	}
	if (out->nranks)
		qsort(out->ranks, out->nranks, sizeof(*out->ranks), cmp_rank);
}

/* The summary from every stored point (jobs whose summary rows do not hold). */
static int summary_from_points(struct store *st, const struct job_row *job,
			       struct metrics_job_summary *out, const struct store_mkv *meta,
			       size_t nmeta, const struct store_mcount *cnt, size_t ncnt,
			       struct tc_err *err)
{
	struct store_mseries *v = NULL;
	size_t nv = 0, ralloc = 0;
	int rc = store_metric_series(st, job->id, NULL, -1, &v, &nv, err);
	if (rc)
		return rc;
	out->metrics = xcalloc(nv ? nv : 1, sizeof(*out->metrics));
	for (size_t i = 0; i < nv; i++) {
		sum_series(&out->metrics[out->nmetrics++], &v[i], meta, nmeta);
		rank_find(out, v[i].rank, &ralloc);
	}
	add_counters(out, cnt, ncnt, &ralloc);
	double *per = xcalloc(out->nranks ? out->nranks : 1, sizeof(double));
	for (size_t i = 0; i < out->nranks; i++) {
		rank_tput(&out->ranks[i], v, nv, &out->settings);
		per[i] = out->ranks[i].throughput;
	}
	out->throughput = metrics_tput_job(per, out->nranks);
	free(per);
	/* accuracy: the last number of that metric, lowest rank (series are by rank) */
	for (size_t i = 0; out->settings.accuracy && i < nv; i++) {
		if (strcmp(v[i].metric, out->settings.accuracy))
			continue;
		for (size_t j = v[i].n; j-- > 0;)
			if (!v[i].v[j].text) {
				out->accuracy = v[i].v[j].value;
				break;
			}
		break;
	}
	store_mseries_free(v, nv);
	return 0;
}

/* ---- the same from the summary rows (store.h: store_metric_summaries) ---- */

static int finest_kind(const struct store_msum *m)
{
	for (int k = 0; k < 3; k++)
		if (m->k[k].points)
			return k;
	return STORE_MSUMMARY;
}

/* The rows hold when every series' kinds count exactly the points it stores. */
static bool summaries_hold(const struct store_msum *v, size_t nv)
{
	for (size_t i = 0; i < nv; i++)
		if (v[i].k[0].points + v[i].k[1].points + v[i].k[2].points != v[i].stored)
			return false;
	return true;
}

static void sum_from_row(struct metrics_metric_sum *ms, const struct store_msum *m,
			 const struct store_mkv *meta, size_t nmeta)
{
	int kind = finest_kind(m);
	const struct store_msum_kind *k = &m->k[kind];
	const char *unit = meta_of(meta, nmeta, m->metric, "unit");
	ms->name = xstrdup(m->metric);
	ms->rank = m->rank;
	ms->kind = kind_name(kind);
	ms->goal = metrics_goal_of(m->metric, meta_of(meta, nmeta, m->metric, "GOAL"));
	ms->unit = unit && *unit ? xstrdup(unit) : NULL;
	ms->text = k->last_text ? xstrdup(k->last_text) : NULL;
	ms->n = (size_t)k->n;
	ms->last = k->n ? k->last : NAN;
	ms->last_step = k->n && k->last_step ? xstrdup(k->last_step) : NULL;
	ms->min = k->n_finite ? k->min : NAN;
	ms->max = k->n_finite ? k->max : NAN;
	ms->mean = k->n_finite ? k->sum / (double)k->n_finite : NAN;
	bool maxi = ms->goal == METRICS_MAXIMIZE;
	ms->best = maxi ? ms->max : ms->min;
	const char *bs = maxi ? k->max_step : k->min_step;
	ms->best_step = k->n_finite && bs ? xstrdup(bs) : NULL;
}

/* The first `want` numbers of a series' point records: finite ones, positive ones. */
struct prefix {
	long long want, seen, n_finite, n_pos;
	double sum, sum_pos;
};

static int prefix_add(void *arg, const struct store_mpoint *p)
{
	struct prefix *x = arg;
	if (p->kind != STORE_MPOINT || p->text)
		return 0;
	if (x->seen++ >= x->want)
		return 1;
	if (isfinite(p->value)) {
		x->n_finite++;
		x->sum += p->value;
		if (p->value > 0) {
			x->n_pos++;
			x->sum_pos += p->value;
		}
	}
	return 0;
}

static int read_prefix(struct store *st, const char *job, const struct store_msum *m,
		       long long want, struct prefix *x, struct tc_err *err)
{
	memset(x, 0, sizeof(*x));
	x->want = want;
	if (!want)
		return 0;
	int rc = store_metric_walk(st, job, m->metric, m->rank, prefix_add, x, err);
	return rc == 1 ? 0 : rc;
}

/* The first `want` distinct seq values of a series' point records, with their latest times. */
struct seqs {
	long long want;
	struct seqt *v;
	size_t n, alloc;
};

static int seqs_add(void *arg, const struct store_mpoint *p)
{
	struct seqs *x = arg;
	if (p->kind != STORE_MPOINT)
		return 0;
	if (x->n && x->v[x->n - 1].seq == p->seq) {
		if (p->wall_time > x->v[x->n - 1].t)
			x->v[x->n - 1].t = p->wall_time;
		return 0;
	}
	if ((long long)x->n >= x->want)
		return 1; /* ordered (store_msteps): nothing later comes before these */
	XGROW(x->v, x->n + 1, x->alloc);
	x->v[x->n++] = (struct seqt){ p->seq, p->wall_time };
	return 0;
}

/* Rule 3 (docs/metrics.md): (n - w) x batch / (t[n-1] - t[w-1]) from the rank's steps row. */
static int tput_steps(struct store *st, const char *job, const struct store_msum *v, size_t nv,
		      const struct store_msteps *sr, const struct metrics_settings *set,
		      double *tput, struct tc_err *err)
{
	long long w = set->warmup_steps ? set->warmup_steps : 1;
	*tput = NAN;
	if (sr->nseq <= w)
		return 0;
	/* t[w-1]: the w-th distinct seq of the rank, over each series' first w */
	struct seqs all = { .want = w };
	int rc = 0;
	for (size_t i = 0; !rc && i < nv; i++) {
		if (v[i].rank != sr->rank || !v[i].k[STORE_MPOINT].points)
			continue;
		struct seqs one = { .want = w };
		rc = store_metric_walk(st, job, v[i].metric, v[i].rank, seqs_add, &one, err);
		if (rc == 1)
			rc = 0;
		for (size_t j = 0; j < one.n; j++) {
			XGROW(all.v, all.n + 1, all.alloc);
			all.v[all.n++] = one.v[j];
		}
		free(one.v);
	}
	if (!rc && all.n) {
		/* by seq; a seq's time is the latest of its records (the step ends with it) */
		qsort(all.v, all.n, sizeof(*all.v), cmp_seqt);
		long long u = 0;
		double t = NAN;
		for (size_t i = 0; i < all.n; i++) {
			if (i && all.v[i].seq == all.v[i - 1].seq) {
				if (u == w && all.v[i].t > t)
					t = all.v[i].t;
				continue;
			}
			if (u == w)
				break;
			if (++u == w)
				t = all.v[i].t;
		}
		double span = sr->last_t - t;
		if (u == w && isfinite(span) && span > 0 && set->batch_size > 0)
			*tput = (double)(sr->nseq - w) * set->batch_size / span;
	}
	free(all.v);
	return rc;
}

/*
 * Throughput of one rank by the first rule that gives a number, as
 * rank_tput, from the summary rows; the warm-up's values are read from the
 * series' first chunks.  *hold false: the rank's steps row does not hold
 * and the points must be read.
 */
static int rank_tput_rows(struct store *st, const char *job, struct metrics_rank_sum *rs,
			  const struct store_msum *v, size_t nv, const struct store_msteps *sv,
			  size_t nsv, const struct metrics_settings *set, bool *hold,
			  struct tc_err *err)
{
	long long warm = set->warmup_steps;
	struct prefix x;
	int rc;
	rs->throughput = NAN;
	/* 1. an ips metric: the one with the most step records */
	const struct store_msum *ips = NULL;
	for (size_t i = 0; i < nv; i++)
		if (v[i].rank == rs->rank && metrics_is_ips_name(v[i].metric) &&
		    v[i].k[STORE_MPOINT].n > (ips ? ips->k[STORE_MPOINT].n : 0))
			ips = &v[i];
	if (ips) {
		const struct store_msum_kind *k = &ips->k[STORE_MPOINT];
		if ((rc = read_prefix(st, job, ips, warm, &x, err)))
			return rc;
		long long n = k->n_finite - x.n_finite;
		rs->throughput = n > 0 ? (k->sum - x.sum) / (double)n : NAN;
		if (isfinite(rs->throughput)) {
			rs->method = "ips";
			rs->source = xstrdup(ips->metric);
			return 0;
		}
	}
	if (set->batch_size <= 0)
		return 0;
	/* 2. MindFormers per_step_time (ms) */
	for (size_t i = 0; i < nv; i++) {
		if (v[i].rank != rs->rank || strcmp(v[i].metric, "per_step_time"))
			continue;
		const struct store_msum_kind *k = &v[i].k[STORE_MPOINT];
		if ((rc = read_prefix(st, job, &v[i], warm, &x, err)))
			return rc;
		long long n = k->n_pos - x.n_pos;
		double sum = k->sum_pos - x.sum_pos;
		rs->throughput = n > 0 ? set->batch_size * 1000.0 / (sum / (double)n) : NAN;
		if (isfinite(rs->throughput)) {
			rs->method = "step_time";
			rs->source = xstrdup(v[i].metric);
			return 0;
		}
	}
	/* 3. the wall times of the step records */
	for (size_t i = 0; i < nsv; i++) {
		if (sv[i].rank != rs->rank)
			continue;
		if (!sv[i].ordered) {
			*hold = false;
			return 0;
		}
		if ((rc = tput_steps(st, job, v, nv, &sv[i], set, &rs->throughput, err)))
			return rc;
		if (isfinite(rs->throughput))
			rs->method = "step_times";
		return 0;
	}
	/* no steps row: the rank has no point records, unless the rows are older than it */
	for (size_t i = 0; i < nv; i++)
		if (v[i].rank == rs->rank && v[i].k[STORE_MPOINT].points)
			*hold = false;
	return 0;
}

/* The summary from the rows kept at ingestion; *hold false when they do not hold. */
static int summary_from_rows(struct store *st, const struct job_row *job,
			     struct metrics_job_summary *out, const struct store_mkv *meta,
			     size_t nmeta, const struct store_mcount *cnt, size_t ncnt, bool *hold,
			     struct tc_err *err)
{
	struct store_msum *v = NULL;
	struct store_msteps *sv = NULL;
	size_t nv = 0, nsv = 0, ralloc = 0;
	*hold = true;
	int rc = store_metric_summaries(st, job->id, &v, &nv, err);
	if (!rc)
		rc = store_metric_steps(st, job->id, &sv, &nsv, err);
	if (rc || !(*hold = summaries_hold(v, nv)))
		goto out;
	out->metrics = xcalloc(nv ? nv : 1, sizeof(*out->metrics));
	for (size_t i = 0; i < nv; i++) {
		sum_from_row(&out->metrics[out->nmetrics++], &v[i], meta, nmeta);
		rank_find(out, v[i].rank, &ralloc);
	}
	add_counters(out, cnt, ncnt, &ralloc);
	double *per = xcalloc(out->nranks ? out->nranks : 1, sizeof(double));
	for (size_t i = 0; !rc && *hold && i < out->nranks; i++) {
		rc = rank_tput_rows(st, job->id, &out->ranks[i], v, nv, sv, nsv, &out->settings, hold,
				    err);
		per[i] = out->ranks[i].throughput;
	}
	out->throughput = metrics_tput_job(per, out->nranks);
	free(per);
	/* accuracy: the last number of that metric, any kind, lowest rank */
	for (size_t i = 0; out->settings.accuracy && i < nv; i++) {
		if (strcmp(v[i].metric, out->settings.accuracy))
			continue;
		const struct store_msum_kind *last = NULL;
		for (int k = 0; k < 3; k++)
			if (v[i].k[k].n && (!last || v[i].k[k].last_index > last->last_index))
				last = &v[i].k[k];
		if (last)
			out->accuracy = last->last;
		break;
	}
out:
	store_msum_free(v, nv);
	free(sv);
	return rc;
}

int metrics_job_summary(struct store *st, const struct job_row *job,
			struct metrics_job_summary *out, struct tc_err *err)
{
	struct store_mkv *meta = NULL;
	struct store_mcount *cnt = NULL;
	size_t nmeta = 0, ncnt = 0;
	bool hold = false;
	memset(out, 0, sizeof(*out));
	out->throughput = out->accuracy = out->duration = NAN;
	metrics_settings_from_spec(job->spec_json, &out->settings);
	int rc = store_metric_meta(st, job->id, &meta, &nmeta, err);
	if (!rc)
		rc = store_metric_counters(st, job->id, &cnt, &ncnt, err);
	if (!rc)
		rc = store_metric_params(st, job->id, &out->params, &out->nparams, err);
	if (!rc)
		rc = summary_from_rows(st, job, out, meta, nmeta, cnt, ncnt, &hold, err);
	if (!rc && !hold) {
		/* start again from every point */
		struct store_mkv *params = out->params;
		size_t nparams = out->nparams;
		out->params = NULL;
		out->nparams = 0;
		metrics_job_summary_release(out);
		out->throughput = out->accuracy = out->duration = NAN;
		metrics_settings_from_spec(job->spec_json, &out->settings);
		out->params = params;
		out->nparams = nparams;
		rc = summary_from_points(st, job, out, meta, nmeta, cnt, ncnt, err);
	}
	if (!rc && job->started > 0)
		out->duration = (job->ended > 0 ? job->ended : now_wall()) - job->started;
	store_mkv_free(meta, nmeta);
	store_mcount_free(cnt, ncnt);
	if (rc)
		metrics_job_summary_release(out);
	return rc;
}

void metrics_job_summary_release(struct metrics_job_summary *s)
{
	for (size_t i = 0; i < s->nmetrics; i++) {
		free(s->metrics[i].name);
		free(s->metrics[i].last_step);
		free(s->metrics[i].best_step);
		free(s->metrics[i].unit);
		free(s->metrics[i].text);
	}
	free(s->metrics);
	for (size_t i = 0; i < s->nranks; i++) {
		free(s->ranks[i].source);
		free(s->ranks[i].last_error);
	}
	free(s->ranks);
	store_mkv_free(s->params, s->nparams);
	metrics_settings_release(&s->settings);
	memset(s, 0, sizeof(*s));
}

static void add_num(struct sbuf *sb, json_t *v)
{
	if (!json_is_number(v))
		sbuf_adds(sb, "-");
	else
		sbuf_addf(sb, "%.6g", json_number_value(v));
}

static const char *jtext(json_t *o, const char *key, const char *none)
{
	const char *v = json_string_value(json_object_get(o, key));
	return v ? v : none;
}

/*
 * The text is made from the JSON form, so that `trainctl show` prints the
 * same summary whether it read the store or asked a server for it.
 */
void metrics_job_summary_text(json_t *s, struct sbuf *out)
{
	json_t *metrics = json_object_get(s, "metrics"), *ranks = json_object_get(s, "ranks");
	size_t nmetrics = json_array_size(metrics), nranks = json_array_size(ranks);
	long long got = 0; /* metrics lines, records and malformed lines of every rank */
	for (size_t i = 0; i < nranks; i++) {
		json_t *r = json_array_get(ranks, i);
		got += json_integer_value(json_object_get(r, "lines")) +
		       json_integer_value(json_object_get(r, "records")) +
		       json_integer_value(json_object_get(r, "malformed"));
	}
	if (!nmetrics && !got) {
		/* a rank row without records: it printed lines, none of them metrics (ingest.h note 5) */
		sbuf_addf(out, "metrics:   none recorded%s%s\n", nranks ? "; " : "",
			  nranks ? metrics_none_hint : "");
		return;
	}
	int mw = 24; /* the METRIC column: as wide as the longest name */
	for (size_t i = 0; i < nmetrics; i++) {
		size_t l = strlen(jtext(json_array_get(metrics, i), "name", ""));
		if (l > (size_t)mw && l <= 200)
			mw = (int)l;
	}
	sbuf_addf(out, "metrics:\n  %-*s %-5s %-7s %7s  %-12s %-12s %s\n", mw, "METRIC", "RANKS", "KIND",
		  "N", "LAST", "BEST", "BEST AT");
	for (size_t i = 0; i < nmetrics; i++) {
		json_t *m = json_array_get(metrics, i);
		const char *name = jtext(m, "name", "");
		if (i && !strcmp(name, jtext(json_array_get(metrics, i - 1), "name", "")))
			continue; /* one row per metric: its lowest rank */
		size_t nr = 1;
		while (i + nr < nmetrics && !strcmp(jtext(json_array_get(metrics, i + nr), "name", ""), name))
			nr++;
		size_t n = (size_t)json_integer_value(json_object_get(m, "count"));
		struct sbuf last = SBUF_INIT, best = SBUF_INIT;
		if (json_is_string(json_object_get(m, "text")) && !n)
			sbuf_adds(&last, jtext(m, "text", ""));
		else
			add_num(&last, json_object_get(m, "last"));
		add_num(&best, json_object_get(m, "best"));
		sbuf_addf(out, "  %-*s %-5zu %-7s %7zu  %-12s %-12s %s%s\n", mw, name, nr, jtext(m, "kind", ""),
			  n, last.buf, best.buf, jtext(m, "best_step", "-"),
			  !strcmp(jtext(m, "goal", ""), "maximize") ? " (max)" : " (min)");
		sbuf_release(&last);
		sbuf_release(&best);
	}
	size_t with = 0;
	for (size_t i = 0; i < nranks; i++)
		with += json_is_number(json_object_get(json_array_get(ranks, i), "throughput"));
	json_t *tput = json_object_get(s, "throughput");
	if (json_is_number(tput)) {
		sbuf_addf(out, "%-10s %.1f samples/s (sum of %zu rank%s, warm-up %lld steps)\n",
			  "throughput", json_number_value(tput), with, with == 1 ? "" : "s",
			  (long long)json_integer_value(json_object_get(s, "warmup_steps")));
		for (size_t i = 0; i < nranks; i++) {
			json_t *r = json_array_get(ranks, i);
			json_t *t = json_object_get(r, "throughput");
			if (!json_is_number(t))
				continue;
			const char *source = json_string_value(json_object_get(r, "source"));
			sbuf_addf(out, "  rank %-4lld %.1f samples/s (%s%s%s)\n",
				  (long long)json_integer_value(json_object_get(r, "rank")),
				  json_number_value(t), jtext(r, "method", "?"), source ? ": " : "",
				  source ? source : "");
		}
	} else {
		sbuf_addf(out, "%-10s - (no *.ips metric%s)\n", "throughput",
			  json_is_integer(json_object_get(s, "batch_size"))
				  ? " and no step records"
				  : "; metrics.batch_size gives it from step times");
	}
	json_t *duration = json_object_get(s, "duration");
	if (json_is_number(duration))
		sbuf_addf(out, "%-10s %.1f s\n", "duration", json_number_value(duration));
	const char *acc = json_string_value(json_object_get(s, "accuracy_metric"));
	if (acc) {
		sbuf_addf(out, "%-10s ", "accuracy");
		add_num(out, json_object_get(s, "accuracy"));
		sbuf_addf(out, " (%s)\n", acc);
	}
	long long malformed = json_integer_value(json_object_get(s, "malformed"));
	sbuf_addf(out, "%-10s %lld line%s", "malformed", malformed, malformed == 1 ? "" : "s");
	for (size_t i = 0; i < nranks; i++) {
		json_t *r = json_array_get(ranks, i);
		long long bad = json_integer_value(json_object_get(r, "malformed"));
		if (bad)
			sbuf_addf(out, "; rank %lld: %lld (last: %s)",
				  (long long)json_integer_value(json_object_get(r, "rank")), bad,
				  jtext(r, "last_error", "?"));
	}
	sbuf_addch(out, '\n');
}

json_t *metrics_job_summary_json(const struct metrics_job_summary *s)
{
	json_t *o = json_object();
	json_object_set_new(o, "throughput", json_real_or_null(s->throughput));
	json_object_set_new(o, "throughput_unit", json_string("samples/s"));
	json_object_set_new(o, "duration", json_real_or_null(s->duration));
	json_object_set_new(o, "accuracy_metric", json_string_or_null(s->settings.accuracy));
	json_object_set_new(o, "accuracy", json_real_or_null(s->accuracy));
	json_object_set_new(o, "warmup_steps", json_integer(s->settings.warmup_steps));
	json_object_set_new(o, "batch_size",
			    s->settings.batch_size ? json_integer(s->settings.batch_size) : json_null());
	json_object_set_new(o, "malformed", json_integer(s->malformed));
	json_t *ranks = json_array();
	for (size_t i = 0; i < s->nranks; i++) {
		const struct metrics_rank_sum *r = &s->ranks[i];
		json_t *x = json_object();
		json_object_set_new(x, "rank", json_integer(r->rank));
		json_object_set_new(x, "throughput", json_real_or_null(r->throughput));
		json_object_set_new(x, "method", json_string_or_null(r->method));
		json_object_set_new(x, "source", json_string_or_null(r->source));
		json_object_set_new(x, "lines", json_integer(r->lines));
		json_object_set_new(x, "records", json_integer(r->records));
		json_object_set_new(x, "malformed", json_integer(r->malformed));
		json_object_set_new(x, "last_error", json_string_or_null(r->last_error));
		json_array_append_new(ranks, x);
	}
	json_object_set_new(o, "ranks", ranks);
	json_t *ms = json_array();
	for (size_t i = 0; i < s->nmetrics; i++) {
		const struct metrics_metric_sum *m = &s->metrics[i];
		json_t *x = json_object();
		json_object_set_new(x, "name", json_string(m->name));
		json_object_set_new(x, "rank", json_integer(m->rank));
		json_object_set_new(x, "kind", json_string(m->kind));
		json_object_set_new(x, "goal", json_string(m->goal == METRICS_MAXIMIZE ? "maximize"
											: "minimize"));
		json_object_set_new(x, "count", json_integer((json_int_t)m->n));
		json_object_set_new(x, "last", json_real_or_null(m->last));
		json_object_set_new(x, "best", json_real_or_null(m->best));
		json_object_set_new(x, "min", json_real_or_null(m->min));
		json_object_set_new(x, "max", json_real_or_null(m->max));
		json_object_set_new(x, "mean", json_real_or_null(m->mean));
		json_object_set_new(x, "last_step", json_string_or_null(m->last_step));
		json_object_set_new(x, "best_step", json_string_or_null(m->best_step));
		json_object_set_new(x, "unit", json_string_or_null(m->unit));
		if (m->text)
			json_object_set_new(x, "text", json_string(m->text));
		json_array_append_new(ms, x);
	}
	json_object_set_new(o, "metrics", ms);
	json_t *ps = json_array();
	for (size_t i = 0; i < s->nparams; i++)
		json_array_append_new(ps, json_pack("{s:i, s:s, s:o}", "rank", s->params[i].rank, "name",
						    s->params[i].name, "value",
						    json_string_or_null(s->params[i].value)));
	json_object_set_new(o, "params", ps);
	return o;
}

/* ---- points ---- */

int metrics_job_points(struct store *st, const char *job_id, const char *name, int rank,
		       size_t max_points, metrics_point_fn fn, void *ctx, size_t *count,
		       struct tc_err *err)
{
	struct store_mseries *v = NULL;
	size_t nv = 0;
	*count = 0;
	int rc = store_metric_series(st, job_id, name, rank, &v, &nv, err);
	if (rc)
		return rc;
	metrics_series_points(v, nv, max_points, fn, ctx, count);
	store_mseries_free(v, nv);
	return 0;
}

void metrics_series_points(const struct store_mseries *v, size_t nv, size_t max_points,
			   metrics_point_fn fn, void *ctx, size_t *count)
{
	*count = 0;
	for (size_t i = 0; i < nv; i++) {
		const struct store_mseries *s = &v[i];
		bool *keep = xcalloc(s->n ? s->n : 1, sizeof(bool));
		if (!max_points) {
			for (size_t j = 0; j < s->n; j++)
				keep[j] = true;
		} else {
			size_t buckets = max_points / 4 ? max_points / 4 : 1;
			struct metrics_xy *in = xcalloc(s->n ? s->n : 1, sizeof(*in));
			struct metrics_xy *outp = xcalloc(s->n ? s->n : 1, sizeof(*outp));
			for (int k = 0; k < 3; k++) {
				size_t n = 0;
				for (size_t j = 0; j < s->n; j++) {
					if (s->v[j].kind != k)
						continue;
					if (s->v[j].text)
						keep[j] = true;
					else
						in[n++] = (struct metrics_xy){ (double)j, s->v[j].value };
				}
				if (n <= max_points) {
					for (size_t j = 0; j < n; j++)
						keep[(size_t)in[j].x] = isfinite(in[j].y);
					continue;
				}
				size_t m = metrics_downsample(in, n, buckets, outp);
				for (size_t j = 0; j < m; j++)
					keep[(size_t)outp[j].x] = true;
			}
			free(in);
			free(outp);
		}
		for (size_t j = 0; j < s->n; j++) {
			if (!keep[j])
				continue;
			struct metrics_point pt = { s->metric, s->rank, kind_name(s->v[j].kind), &s->v[j] };
			fn(ctx, &pt);
			(*count)++;
		}
		free(keep);
	}
}
