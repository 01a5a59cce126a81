/*
 * api_data.c -- what a job and the node produced, over the HTTP API: a
 * job's logs, metrics, usage and report; the node's devices; see
 * api_int.h (/metrics is prom.c).
 */
#include "server/server_int.h"
#include "api/api_int.h"
#include "core/json.h"
#include "core/upath.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "logs/logs.h"
#include "metrics/metrics.h"
#include "jobs/jobs.h"
#include "jobs/usage.h"
#include "source/source.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include "core/lazylib.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* report.json is a few KiB; a job that writes more gets no report served */
#define REPORT_MAX ((size_t)16 << 20)

/* ---- logs ---- */

/* ?name=1 or ?name=true */
static bool arg_flag(struct MHD_Connection *con, const char *name)
{
	const char *v = arg_of(con, name);
	return v && (!strcmp(v, "1") || !strcmp(v, "true"));
}

/*
 * A job's worker logs as the source prints them (source/source.h: the
 * same reader as `trainctl logs` on this host), into a buffer: ?rank= one
 * rank, else every rank, [RANK]-prefixed when the job has more than one.
 * *none: it has no worker log yet.
 */
static int logs_text(struct job_source *src, const struct job_row *x,
		     const struct source_logs *o, char **buf, size_t *len, bool *none,
		     struct tc_err *err)
{
	struct source_job sj = { .id = xstrdup(x->id) };
	FILE *f = open_memstream(buf, len);
	int rc = f ? src->ops->logs(src, &sj, o, f, none, err)
		   : tc_error_errno(err, TC_ESYS, "out of memory");
	if (f)
		fclose(f);
	source_job_release(&sj);
	return rc;
}

int h_logs(struct srv *s, struct MHD_Connection *con, const struct job_row *x)
{
	long rank, tail;
	if (!arg_long(con, "rank", -1, 1 << 20, -1, &rank) ||
	    !arg_long(con, "tail", -1, 10000000, -1, &tail))
		return reply_err(con, 400, "rank and tail must be numbers");
	const char *fmt = arg_of(con, "format");
	if (arg_flag(con, "follow")) {
		if (arg_flag(con, "timestamps") || arg_flag(con, "merge"))
			return reply_err(con, 400, "timestamps and merge read the logs written so far: not with follow");
		return stream_logs(s, con, x, (int)rank, tail);
	}
	/*
	 * Through the local source, on a connection of this request's own: the
	 * run folder's logs/ is the job's account's, opened links refused.
	 */
	struct tc_err err = TC_ERR_INIT;
	struct job_source *src = NULL;
	int rc = source_local_open(s->home, &src, &err);
	if (rc) {
		int ret = reply_tc(con, &err);
		tc_err_release(&err);
		return ret;
	}
	if (fmt && !strcmp(fmt, "json")) {
		int *ranks = NULL;
		size_t nr = 0;
		rc = logs_ranks(x->run_dir, &ranks, &nr, &err);
		if (rc && rc != TC_ENOTFOUND) {
			int ret = reply_tc(con, &err);
			tc_err_release(&err);
			source_close(src);
			return ret;
		}
		tc_err_release(&err);
		json_t *o = json_object();
		json_t *jr = json_array();
		for (size_t i = 0; i < nr; i++) {
			int r = ranks[i];
			if (rank >= 0 && r != rank)
				continue;
			char *buf = NULL;
			size_t len = 0;
			bool none = false;
			struct source_logs lo = { r, tail < 0 ? 2000 : tail, false, false, false };
			if (logs_text(src, x, &lo, &buf, &len, &none, &err))
				tc_err_release(&err);
			json_array_append_new(jr, json_pack("{s:i, s:s#}", "rank", r, "text",
							    buf ? buf : "", buf ? len : 0));
			free(buf);
		}
		free(ranks);
		source_close(src);
		json_object_set_new(o, "ranks", jr);
		return reply_jsont(con, 200, o);
	}
	char *buf = NULL;
	size_t len = 0;
	bool none = false;
	struct source_logs lo = { rank, tail, false, arg_flag(con, "timestamps"),
				  arg_flag(con, "merge") };
	rc = logs_text(src, x, &lo, &buf, &len, &none, &err);
	source_close(src);
	int ret;
	if (rc == TC_ENOTFOUND || (!rc && none)) {
		/* no worker log (yet): say why, never where the server keeps them */
		if (!job_state_terminal(x->state))
			ret = reply_err(con, 404, "job %s is %s: no logs yet", x->id, job_state_name(x->state));
		else if (rank >= 0)
			ret = reply_err(con, 404, "job %s has no log of rank %ld", x->id, rank);
		else
			ret = reply_err(con, 404, "job %s: %s before any worker started", x->id,
					job_state_name(x->state));
	} else if (rc) {
		ret = reply_tc(con, &err);
	} else {
		struct MHD_Response *r = MHD_create_response_from_buffer(len, buf ? buf : "",
									 MHD_RESPMEM_MUST_COPY);
		MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
		if (arg_of(con, "download")) {
			struct sbuf cd = SBUF_INIT;
			sbuf_addf(&cd, "attachment; filename=\"%s.log\"", x->id);
			MHD_add_response_header(r, "Content-Disposition", cd.buf);
			sbuf_release(&cd);
		}
		ret = MHD_queue_response(con, 200, r);
		MHD_destroy_response(r);
	}
	free(buf);
	tc_err_release(&err);
	return ret;
}

/* ---- metrics of a job ---- */

/* body (a wire form) as 200, or the read's error */
static int reply_wire(struct MHD_Connection *con, int rc, struct tc_err *err, struct sbuf *body)
{
	int ret = rc ? reply_tc(con, err) : reply_json(con, 200, body->buf);
	sbuf_release(body);
	tc_err_release(err);
	return ret;
}

int h_metric_list(struct srv *s, struct MHD_Connection *con, const struct job_row *x)
{
	struct tc_err err = TC_ERR_INIT;
	struct sbuf body = SBUF_INIT;
	pthread_mutex_lock(&s->mu);
	struct job_source *src = source_local_wrap(s->st);
	int rc = src->ops->metric_names(src, x->id, &body, &err);
	source_close(src);
	pthread_mutex_unlock(&s->mu);
	return reply_wire(con, rc, &err, &body);
}

/* The points of a chart, rank by rank, as store_metric_xy hands them over. */
struct xy_rank {
	int rank;
	struct metrics_xy *xy;
	size_t n, alloc;
};
struct xy_ranks {
	struct xy_rank *v;
	size_t n, alloc;
};

static void xy_begin(void *arg, int rank)
{
	struct xy_ranks *r = arg;
	XGROW(r->v, r->n + 1, r->alloc);
	r->v[r->n++] = (struct xy_rank){ rank, NULL, 0, 0 };
}

static void xy_add(void *arg, double x, double y)
{
	struct xy_ranks *r = arg;
	struct xy_rank *k = &r->v[r->n - 1];
	XGROW(k->xy, k->n + 1, k->alloc);
	k->xy[k->n++] = (struct metrics_xy){ x, y };
}

struct xy_at {
	struct metrics_xy xy;
	size_t at; /* log order */
};

static int cmp_xy_at(const void *a, const void *b)
{
	const struct xy_at *p = a, *q = b;
	if (p->xy.x != q->xy.x)
		return p->xy.x < q->xy.x ? -1 : 1;
	return p->at < q->at ? -1 : p->at > q->at;
}

/*
 * A chart's x must go up: a rank whose steps go back (a restarted group
 * logs again from its checkpoint's step) is sorted by step, and a step
 * logged twice keeps its last value, as compare does.
 */
static void xy_by_step(struct xy_rank *k)
{
	size_t i = 1;
	while (i < k->n && k->xy[i - 1].x < k->xy[i].x)
		i++;
	if (i >= k->n)
		return;
	struct xy_at *v = xcalloc(k->n, sizeof(*v));
	for (i = 0; i < k->n; i++)
		v[i] = (struct xy_at){ k->xy[i], i };
	qsort(v, k->n, sizeof(*v), cmp_xy_at);
	size_t m = 0;
	for (i = 0; i < k->n; i++) {
		if (m && k->xy[m - 1].x == v[i].xy.x)
			m--;
		k->xy[m++] = v[i].xy;
	}
	k->n = m;
	free(v);
}

static void xy_ranks_release(struct xy_ranks *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->v[i].xy);
	free(r->v);
}

int h_metric_points(struct srv *s, struct MHD_Connection *con, const struct job_row *x)
{
	const char *name = arg_of(con, "name");
	long rank, points;
	if (!name || !*name)
		return reply_err(con, 400, "name: which metric (see /metrics of the job)");
	if (!arg_long(con, "rank", -1, 1 << 20, -1, &rank) ||
	    !arg_long(con, "points", 4, 100000, 2000, &points))
		return reply_err(con, 400, "rank must be a number and points 4..100000");
	double xmin = -INFINITY, xmax = INFINITY;
	const char *a = arg_of(con, "xmin"), *b = arg_of(con, "xmax");
	if ((a && *a && !parse_double(a, &xmin)) || (b && *b && !parse_double(b, &xmax)))
		return reply_err(con, 400, "xmin and xmax must be numbers");
	/*
	 * Its own connection and the lean reader: a long series takes tens of
	 * ms to read, and the server's lock must not be held meanwhile.
	 */
	struct xy_ranks xr = { 0 };
	struct store_xy_sink sink = { xy_begin, xy_add, &xr };
	struct job_source *from = NULL;
	struct tc_err err = TC_ERR_INIT;
	int rc = source_local_open(s->home, &from, &err);
	if (!rc)
		rc = from->ops->metric_xy(from, x->id, name, (int)rank, xmin, xmax, &sink, &err);
	source_close(from);
	if (rc) {
		int ret = reply_tc(con, &err);
		tc_err_release(&err);
		xy_ranks_release(&xr);
		return ret;
	}
	struct sbuf body = SBUF_INIT;
	sbuf_adds(&body, "{\"metric\":");
	json_add_str(&body, name);
	sbuf_adds(&body, ",\"series\":[");
	size_t buckets = (size_t)points / 4;
	struct metrics_xy *out = xmalloc((4 * buckets + 1) * sizeof(*out));
	for (size_t i = 0; i < xr.n; i++) {
		struct xy_rank *r = &xr.v[i];
		xy_by_step(r);
		size_t o = r->n;
		const struct metrics_xy *src = r->xy;
		if (r->n > (size_t)points) {
			o = metrics_downsample(r->xy, r->n, buckets, out);
			src = out;
		}
		sbuf_addf(&body, "%s{\"rank\":%d,\"n\":%zu,\"x\":[", i ? "," : "", r->rank, r->n);
		for (size_t k = 0; k < o; k++)
			sbuf_addf(&body, k ? ",%.17g" : "%.17g", src[k].x);
		sbuf_adds(&body, "],\"y\":[");
		for (size_t k = 0; k < o; k++)
			sbuf_addf(&body, k ? ",%.9g" : "%.9g", src[k].y);
		sbuf_adds(&body, "]}");
	}
	free(out);
	sbuf_adds(&body, "]}");
	xy_ranks_release(&xr);
	int ret = reply_json(con, 200, body.buf);
	sbuf_release(&body);
	return ret;
}

int h_usage(struct srv *s, struct MHD_Connection *con, const struct job_row *x)
{
	double since = 0;
	const char *a = arg_of(con, "since");
	if (a && *a && !parse_double(a, &since))
		return reply_err(con, 400, "since must be a number (seconds since 1970)");
	struct sbuf body = SBUF_INIT;
	struct tc_err err = TC_ERR_INIT;
	sbuf_adds(&body, "{\"samples\":");
	pthread_mutex_lock(&s->mu);
	int rc = store_usage_json(s->st, x->id, since, &body, &err);
	pthread_mutex_unlock(&s->mu);
	sbuf_addch(&body, '}');
	int ret = rc ? reply_tc(con, &err) : reply_json(con, 200, body.buf);
	sbuf_release(&body);
	tc_err_release(&err);
	return ret;
}

int h_report(struct MHD_Connection *con, const struct job_row *x)
{
	struct sbuf text = SBUF_INIT;
	struct tc_err err = TC_ERR_INIT;
	int rd = -1;
	uid_t owner;
	/* the job's account owns its run folder: never a file its link points at */
	int rc = upath_run_dir(x->run_dir, UPATH_ANY, &rd, &owner, &err);
	if (!rc)
		rc = upath_read(rd, "report.json", owner, REPORT_MAX, &text, &err);
	int ret = rc ? reply_err(con, 404, "job %s has no report.json", x->id)
		     : reply_json(con, 200, text.buf);
	if (rd >= 0)
		close(rd);
	tc_err_release(&err);
	sbuf_release(&text);
	return ret;
}

/* ---- the node ---- */

/*
 * May w learn which job holds a device?  The job's owner and admins only
 * (issue 23, L3): a job id is no secret (ids sort by time), but whose job
 * runs where is.  Called with list_mu held.
 */
static bool holder_visible(struct srv *s, const struct who *w, const char *job)
{
	if (w->admin || w->local)
		return true;
	struct job_row j = { 0 };
	struct tc_err err = TC_ERR_INIT;
	bool ok = job && w->user && store_job_get(s->list_st, job, &j, &err) == 0 && j.user &&
		  !strcmp(j.user, w->user);
	job_row_release(&j);
	tc_err_release(&err);
	return ok;
}

int h_devices(struct srv *s, struct MHD_Connection *con, const struct who *w)
{
	pthread_mutex_lock(&s->mu);
	json_t *devs = json_loads(s->devices_json ? s->devices_json : "[]", 0, NULL);
	pthread_mutex_unlock(&s->mu);
	if (!json_is_array(devs)) {
		json_decref(devs);
		devs = json_array();
	}
	/* devices the nodes of multi-node jobs found unhealthy on their own hosts (hub.md) */
	struct store_sick *v = NULL;
	size_t n = 0;
	struct tc_err err = TC_ERR_INIT;
	pthread_mutex_lock(&s->list_mu);
	size_t i;
	json_t *d;
	json_array_foreach(devs, i, d) {
		const char *job = json_string_value(json_object_get(d, "job"));
		if (job && !holder_visible(s, w, job))
			json_object_set_new(d, "job", json_null());
	}
	int rc = store_devices_unhealthy(s->list_st, &v, &n, &err);
	json_t *nodes = json_array();
	for (size_t k = 0; !rc && k < n; k++) {
		if (!v[k].node || !*v[k].node)
			continue; /* this host's: in "devices" */
		json_t *o = json_pack("{s:s, s:s?, s:i, s:s?, s:f}", "node", v[k].node, "type",
				      v[k].type, "id", v[k].id, "unhealthy", v[k].reason, "since",
				      v[k].since);
		if (!o)
			continue;
		json_object_set_new(o, "job", v[k].job && holder_visible(s, w, v[k].job)
						      ? json_string(v[k].job)
						      : json_null());
		json_array_append_new(nodes, o);
	}
	pthread_mutex_unlock(&s->list_mu);
	store_sick_free(v, n);
	tc_err_release(&err);
	json_t *body = json_pack("{s:o, s:o}", "devices", devs, "nodes", nodes);
	return reply_jsont(con, 200, body);
}

/* ---- every point of one metric of one rank, with its logged step and time ---- */

/* One kind's points (step records, or epoch records) as the reply's arrays. */
struct records_kind {
	struct sbuf step, value, time;
	size_t n;
};

struct records {
	struct records_kind pt, ep;
};

/*
 * A record's step: a point's is its x on the charts (store_mpoint_x: the
 * step the job logged, else seq), an epoch record's is its epoch.
 */
static long long logged_step(const struct store_mpoint *p)
{
	if (p->kind == STORE_MEPOCH)
		return p->epoch >= 0 ? p->epoch : p->seq;
	return store_mpoint_x(p);
}

static int records_add(void *arg, const struct store_mpoint *p)
{
	struct records *r = arg;
	if (p->text || (p->kind != STORE_MPOINT && p->kind != STORE_MEPOCH))
		return 0;
	struct records_kind *k = p->kind == STORE_MPOINT ? &r->pt : &r->ep;
	const char *sep = k->n++ ? "," : "";
	sbuf_addf(&k->step, "%s%lld", sep, logged_step(p));
	/* JSON has no NaN or Inf: null, which a client reads as NaN */
	if (isfinite(p->value))
		sbuf_addf(&k->value, "%s%.17g", sep, p->value);
	else
		sbuf_addf(&k->value, "%snull", sep);
	sbuf_addf(&k->time, "%s%.17g", sep, p->wall_time);
	return 0;
}

static void records_release(struct records *r)
{
	struct records_kind *k[2] = { &r->pt, &r->ep };
	for (int i = 0; i < 2; i++) {
		sbuf_release(&k[i]->step);
		sbuf_release(&k[i]->value);
		sbuf_release(&k[i]->time);
	}
}

int h_metric_records(struct srv *s, struct MHD_Connection *con, const struct job_row *x)
{
	const char *name = arg_of(con, "name");
	long rank;
	if (!name || !*name)
		return reply_err(con, 400, "name: which metric (see /metrics of the job)");
	if (!arg_long(con, "rank", 0, 1 << 20, 0, &rank))
		return reply_err(con, 400, "rank must be a number from 0");
	struct records r = { { SBUF_INIT, SBUF_INIT, SBUF_INIT, 0 },
			     { SBUF_INIT, SBUF_INIT, SBUF_INIT, 0 } };
	struct job_source *src = NULL;
	struct tc_err err = TC_ERR_INIT;
	/* its own connection, as the points' reader: the server's lock is not held */
	int rc = source_local_open(s->home, &src, &err);
	if (!rc)
		rc = src->ops->metric_walk(src, x->id, name, (int)rank, records_add, &r, &err);
	source_close(src);
	if (rc) {
		int ret = reply_tc(con, &err);
		tc_err_release(&err);
		records_release(&r);
		return ret;
	}
	/* step records when the metric has them, else its epoch records (as a sweep's objective) */
	const struct records_kind *k = r.pt.n || !r.ep.n ? &r.pt : &r.ep;
	struct sbuf body = SBUF_INIT;
	sbuf_adds(&body, "{\"metric\":");
	json_add_str(&body, name);
	sbuf_addf(&body, ",\"rank\":%ld,\"kind\":\"%s\",\"n\":%zu,\"step\":[", rank,
		  k == &r.pt ? "step" : "epoch", k->n);
	sbuf_add(&body, k->step.buf, k->step.len);
	sbuf_adds(&body, "],\"value\":[");
	sbuf_add(&body, k->value.buf, k->value.len);
	sbuf_adds(&body, "],\"time\":[");
	sbuf_add(&body, k->time.buf, k->time.len);
	sbuf_adds(&body, "]}");
	records_release(&r);
	int ret = reply_json(con, 200, body.buf);
	sbuf_release(&body);
	return ret;
}

/* ---- what the CLI's remote job source reads (source.h's wire forms) ---- */

int h_metric_series(struct srv *s, struct MHD_Connection *con, const struct job_row *x)
{
	const char *name = arg_of(con, "name");
	long rank;
	if (!arg_long(con, "rank", -1, 1 << 20, -1, &rank))
		return reply_err(con, 400, "rank must be a number from 0 (-1: every rank)");
	struct job_source *src = NULL;
	struct store_mseries *v = NULL;
	size_t n = 0;
	struct tc_err err = TC_ERR_INIT;
	struct sbuf body = SBUF_INIT;
	/* its own connection, as the points' reader: the server's lock is not held */
	int rc = source_local_open(s->home, &src, &err);
	if (!rc)
		rc = src->ops->metric_series(src, x->id, name && *name ? name : NULL, (int)rank, &v, &n,
					     &err);
	if (!rc)
		source_series_json(v, n, &body);
	store_mseries_free(v, n);
	source_close(src);
	return reply_wire(con, rc, &err, &body);
}

int h_checkpoints(struct srv *s, struct MHD_Connection *con, const struct job_row *x)
{
	struct job_source *src = NULL;
	struct store_ckpt *v = NULL;
	size_t n = 0;
	struct tc_err err = TC_ERR_INIT;
	struct sbuf body = SBUF_INIT;
	int rc = source_local_open(s->home, &src, &err);
	if (!rc)
		rc = src->ops->checkpoints(src, x->id, &v, &n, &err);
	if (!rc)
		source_ckpt_json(v, n, &body);
	store_ckpt_free(v, n);
	source_close(src);
	return reply_wire(con, rc, &err, &body);
}

/* The report as a CSV download (the same rows as `trainctl usage --format csv`); takes o. */
static int usage_csv_reply(struct MHD_Connection *con, const struct usage_query *q, json_t *o)
{
	struct sbuf body = SBUF_INIT, cd = SBUF_INIT;
	usage_report_csv(o, &body);
	json_decref(o);
	struct MHD_Response *r = MHD_create_response_from_buffer(body.len, body.buf,
								 MHD_RESPMEM_MUST_COPY);
	sbuf_release(&body);
	if (!r)
		return MHD_NO;
	api_page_headers(r);
	MHD_add_response_header(r, "Content-Type", "text/csv; charset=utf-8");
	sbuf_addf(&cd, "attachment; filename=\"usage-by-%s.csv\"", usage_by_name(q->by));
	MHD_add_response_header(r, "Content-Disposition", cd.buf);
	sbuf_release(&cd);
	int ret = MHD_queue_response(con, 200, r);
	MHD_destroy_response(r);
	return ret;
}

int h_usage_report(struct srv *s, struct MHD_Connection *con, const struct who *w)
{
	/*
	 * Who used what is an admin's (and the operator's) to see; anyone else
	 * gets their own usage, as the job list gives them their own jobs.
	 */
	const char *user = arg_of(con, "user"), *format = arg_of(con, "format");
	if (format && strcmp(format, "json") && strcmp(format, "csv"))
		return reply_err(con, 400, "format: '%s' is not json or csv", format);
	if (!(w->admin || w->local)) {
		if (user && *user && strcmp(user, w->user) != 0)
			return reply_err(con, 403, "only an admin may see another user's usage");
		user = w->user;
	}
	struct usage_query q = { .user = user && *user ? user : NULL };
	struct tc_err err = TC_ERR_INIT;
	json_t *o = NULL;
	int rc = usage_query_parse(arg_of(con, "since"), arg_of(con, "until"), arg_of(con, "by"),
				   now_wall(), &q, &err);
	if (!rc) {
		pthread_mutex_lock(&s->list_mu);
		rc = usage_report_json(s->list_st, &q, &o, &err);
		pthread_mutex_unlock(&s->list_mu);
	}
	int ret;
	if (rc)
		ret = reply_tc(con, &err);
	else if (format && !strcmp(format, "csv"))
		ret = usage_csv_reply(con, &q, o);
	else
		ret = reply_jsont(con, 200, o);
	tc_err_release(&err);
	return ret;
}
