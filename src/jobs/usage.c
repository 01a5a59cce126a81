/*
 * usage.c -- the usage report's JSON form and its window's words, and the
 * removal of old finished jobs (usage.h).
 */
#include "jobs/usage.h"
#include "backend/backend.h"
#include "backend/slurm_acct.h"
#include "jobs/jobs.h"
#include "core/enc.h"
#include "core/json.h"
#include "core/xalloc.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool usage_parse_date(const char *s, double *out)
{
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	const char *end = s ? strptime(s, "%Y-%m-%d", &tm) : NULL;
	if (end && *end == 'T')
		end = strptime(end + 1, "%H:%M:%S", &tm);
	if (end && *end == 'Z')
		end++;
	if (!end || *end || tm.tm_year < 70)
		return false;
	time_t t = timegm(&tm);
	if (t == (time_t)-1)
		return false;
	*out = (double)t;
	return true;
}

bool usage_parse_age(const char *s, double *out)
{
	static const struct { char unit; double seconds; } units[] = {
		{ 's', 1 }, { 'm', 60 }, { 'h', 3600 }, { 'd', 86400 }, { 'w', 7 * 86400 },
	};
	if (!s || !isdigit((unsigned char)*s))
		return false;
	char *end;
	errno = 0;
	unsigned long long n = strtoull(s, &end, 10);
	if (errno || n == 0 || n > 100000000ULL || !end[0] || end[1])
		return false;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (units[i].unit == *end) {
			*out = (double)n * units[i].seconds;
			return true;
		}
	return false;
}

bool usage_parse_by(const char *s, enum usage_by *out)
{
	if (s && !strcmp(s, "user"))
		*out = USAGE_BY_USER;
	else if (s && !strcmp(s, "team"))
		*out = USAGE_BY_TEAM;
	else
		return false;
	return true;
}

const char *usage_by_name(enum usage_by by)
{
	return by == USAGE_BY_TEAM ? "team" : "user";
}

int usage_query_parse(const char *since, const char *until, const char *by, double now,
		      struct usage_query *q, struct tc_err *err)
{
	q->now = now;
	if (!usage_parse_by(by ? by : "user", &q->by))
		return tc_error(err, TC_EUSAGE, "by: is user or team, not '%s'", by);
	q->until = now;
	if (until && !usage_parse_date(until, &q->until))
		return tc_error(err, TC_EUSAGE, "until: '%s' is not a date (2026-11-01 or"
				" 2026-11-01T12:00:00, UTC)", until);
	q->since = q->until - 30 * 86400.0;
	if (since && !usage_parse_date(since, &q->since))
		return tc_error(err, TC_EUSAGE, "since: '%s' is not a date (2026-11-01 or"
				" 2026-11-01T12:00:00, UTC)", since);
	if (q->since >= q->until)
		return tc_error(err, TC_EUSAGE, "since: must come before until");
	return 0;
}

static json_t *iso_date(double t)
{
	char buf[32];
	struct tm tm;
	time_t s = (time_t)t;
	if (!gmtime_r(&s, &tm) || !strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm))
		return json_null();
	return json_string(buf);
}

/* The row of (group, type) in *v, added when there is none. */
static struct usage_row *row_of(struct usage_row **v, size_t *n, const char *group,
				const char *type)
{
	for (size_t i = 0; i < *n; i++)
		if (!strcmp((*v)[i].group ? (*v)[i].group : "", group) &&
		    !strcmp((*v)[i].device_type ? (*v)[i].device_type : "", type))
			return &(*v)[i];
	*v = xrealloc(*v, (*n + 1) * sizeof(**v));
	struct usage_row *r = &(*v)[(*n)++];
	memset(r, 0, sizeof(*r));
	r->group = xstrdup(group);
	r->device_type = xstrdup(type);
	return r;
}

/*
 * Devices sacct says job j held: its gres of j's type in AllocTRES (all
 * nodes together), else (cpu, or a cluster without that gres) the job's
 * devices per node times its nodes.
 */
static long slurm_devices(const struct usage_slurm_job *j, const struct slurm_acct_row *r)
{
	const char *gres = slurm_gres_of(j->device_type);
	long n = gres ? slurm_acct_gres(r, gres) : -1;
	if (n >= 0)
		return n;
	return (long)j->per_node * (r->nodes > 0 ? r->nodes : 1);
}

/* j's allocation as sacct has it, clipped to q's window, added to its row. */
static void add_slurm_job(struct usage_row **v, size_t *n, const struct usage_query *q,
			  const struct usage_slurm_job *j, const struct slurm_acct_row *r)
{
	if (r->start <= 0)
		return; /* never started */
	double stop = r->end > 0 ? r->end : q->now;
	double held = fmin(stop, q->until) - fmax(r->start, q->since);
	if (!(r->start < q->until && stop > q->since))
		return;
	struct usage_row *u = row_of(v, n, j->group, j->device_type);
	u->device_seconds += (double)slurm_devices(j, r) * fmax(0, held);
	u->jobs++;
	if (r->start >= q->since) { /* its start is in the window: so is its wait */
		double w = fmax(0, r->start - (j->created > 0 ? j->created : r->submit));
		u->wait_mean = (u->wait_mean * (double)u->waited + w) / (double)(u->waited + 1);
		u->wait_max = u->waited ? fmax(u->wait_max, w) : w;
		u->waited++;
	}
}

static int cmp_rows(const void *a, const void *b)
{
	const struct usage_row *x = a, *y = b;
	int c = strcmp(x->group ? x->group : "", y->group ? y->group : "");
	return c ? c : strcmp(x->device_type ? x->device_type : "", y->device_type ? y->device_type : "");
}

/*
 * The Slurm jobs of q's window, counted from Slurm's accounting: each job
 * once, with the times and allocation sacct has (the store's interval of
 * such a job only follows the states it saw, with one node's devices).
 * *slurm: what the report says of it; NULL when there are no such jobs.
 * When sacct cannot answer, *apart stays false: their recorded intervals
 * count instead, and *slurm says why.
 */
static int slurm_usage(struct store *st, const struct usage_query *q, struct usage_row **v,
		       size_t *n, bool *apart, json_t **slurm, struct tc_err *err)
{
	struct usage_slurm_job *jobs;
	size_t nj;
	*apart = false;
	*slurm = NULL;
	int rc = store_usage_slurm_jobs(st, q, &jobs, &nj, err);
	if (rc || !nj)
		return rc;
	const char **ids = xcalloc(nj, sizeof(*ids));
	for (size_t i = 0; i < nj; i++)
		ids[i] = jobs[i].slurm_id;
	struct slurm_acct_row *rows = NULL;
	size_t nr = 0;
	struct tc_err e2 = TC_ERR_INIT;
	*slurm = json_object();
	if (slurm_sacct(ids, nj, &rows, &nr, &e2)) {
		json_object_set_new(*slurm, "source", json_string("trainctl"));
		json_object_set_new(*slurm, "error", json_string(e2.msg ? e2.msg : "sacct failed"));
	} else {
		*apart = true;
		size_t known = 0;
		for (size_t i = 0; i < nj; i++)
			for (size_t k = 0; k < nr; k++)
				if (!strcmp(rows[k].id, jobs[i].slurm_id)) {
					add_slurm_job(v, n, q, &jobs[i], &rows[k]);
					known++;
					break;
				}
		json_object_set_new(*slurm, "source", json_string("sacct"));
		json_object_set_new(*slurm, "jobs", json_integer((json_int_t)nj));
		json_object_set_new(*slurm, "unknown_to_sacct", json_integer((json_int_t)(nj - known)));
	}
	tc_err_release(&e2);
	slurm_acct_rows_free(rows, nr);
	free(ids);
	usage_slurm_jobs_free(jobs, nj);
	return 0;
}

int usage_report_json(struct store *st, const struct usage_query *q, json_t **out,
		      struct tc_err *err)
{
	struct usage_row *v = NULL;
	size_t n = 0;
	bool apart = false;
	json_t *slurm = NULL;
	*out = NULL;
	int rc = slurm_usage(st, q, &v, &n, &apart, &slurm, err);
	struct usage_query local = *q;
	local.slurm_apart = apart;
	struct usage_row *lv = NULL;
	size_t ln = 0;
	if (!rc)
		rc = store_usage_report(st, &local, &lv, &ln, err);
	if (rc) {
		usage_rows_free(v, n);
		json_decref(slurm);
		return rc;
	}
	/* the Slurm jobs' rows join the store's */
	for (size_t i = 0; i < n; i++) {
		struct usage_row *u = row_of(&lv, &ln, v[i].group, v[i].device_type);
		if (v[i].waited) {
			long w = u->waited + v[i].waited;
			u->wait_mean = (u->wait_mean * (double)u->waited +
					v[i].wait_mean * (double)v[i].waited) / (double)w;
			u->wait_max = u->waited ? fmax(u->wait_max, v[i].wait_max) : v[i].wait_max;
			u->waited = w;
		}
		u->device_seconds += v[i].device_seconds;
		u->jobs += v[i].jobs;
	}
	usage_rows_free(v, n);
	v = lv;
	n = ln;
	if (n > 1)
		qsort(v, n, sizeof(*v), cmp_rows);
	json_t *rows = json_array();
	for (size_t i = 0; i < n; i++) {
		json_t *o = json_object();
		json_object_set_new(o, "group", json_string(v[i].group ? v[i].group : ""));
		json_object_set_new(o, "device_type",
				    json_string(v[i].device_type ? v[i].device_type : ""));
		json_object_set_new(o, "device_seconds", json_real(v[i].device_seconds));
		json_object_set_new(o, "device_hours", json_real(v[i].device_seconds / 3600));
		json_object_set_new(o, "jobs", json_integer(v[i].jobs));
		json_object_set_new(o, "waited", json_integer(v[i].waited));
		json_object_set_new(o, "wait_mean_seconds",
				    v[i].waited ? json_real(v[i].wait_mean) : json_null());
		json_object_set_new(o, "wait_max_seconds",
				    v[i].waited ? json_real(v[i].wait_max) : json_null());
		json_array_append_new(rows, o);
	}
	usage_rows_free(v, n);
	*out = json_object();
	json_object_set_new(*out, "since", iso_date(q->since));
	json_object_set_new(*out, "until", iso_date(q->until));
	json_object_set_new(*out, "by", json_string(usage_by_name(q->by)));
	json_object_set_new(*out, "rows", rows);
	if (slurm)
		json_object_set_new(*out, "slurm", slurm);
	return 0;
}

/* a string of the report, "" for none */
static const char *text_of(json_t *v)
{
	return json_is_string(v) ? json_string_value(v) : "";
}

static void add_opt_num(struct sbuf *sb, json_t *v)
{
	if (json_is_number(v))
		sbuf_addf(sb, "%.3f", json_number_value(v));
}

void usage_report_csv(json_t *rep, struct sbuf *out)
{
	json_t *rows = json_object_get(rep, "rows"), *r;
	size_t i;
	csv_add(out, text_of(json_object_get(rep, "by")));
	sbuf_adds(out, ",device_type,device_hours,device_seconds,jobs,wait_mean_seconds,"
		       "wait_max_seconds\n");
	json_array_foreach(rows, i, r) {
		csv_add(out, text_of(json_object_get(r, "group")));
		sbuf_addch(out, ',');
		csv_add(out, text_of(json_object_get(r, "device_type")));
		sbuf_addf(out, ",%.6f,%.3f,%lld,",
			  json_number_value(json_object_get(r, "device_hours")),
			  json_number_value(json_object_get(r, "device_seconds")),
			  (long long)json_integer_value(json_object_get(r, "jobs")));
		add_opt_num(out, json_object_get(r, "wait_mean_seconds"));
		sbuf_addch(out, ',');
		add_opt_num(out, json_object_get(r, "wait_max_seconds"));
		sbuf_addch(out, '\n');
	}
}

int jobs_gc(struct store *st, double before, bool dry_run, const struct jobs_gc_rule *rule,
	    json_t **out, struct tc_err *err)
{
	struct job_row *v;
	size_t n;
	*out = json_array();
	int rc = store_jobs_ended_before(st, before, &v, &n, err);
	for (size_t i = 0; !rc && i < n; i++) {
		if (rule && !(v[i].ended < rule->before_of(rule->ctx, &v[i])))
			continue; /* kept longer by its own rule */
		/* jobs_delete refuses a job that has not ended, again: an active job is never touched */
		if (!dry_run && (rc = jobs_delete(st, &v[i], err)))
			break;
		json_t *o = json_object();
		json_object_set_new(o, "id", json_string(v[i].id));
		json_object_set_new(o, "name", json_string_or_null(v[i].name));
		json_object_set_new(o, "state", json_string(job_state_name(v[i].state)));
		json_object_set_new(o, "ended", iso_date(v[i].ended));
		json_object_set_new(o, "run_dir", json_string_or_null(v[i].run_dir));
		json_array_append_new(*out, o);
	}
	job_rows_free(v, n);
	return rc;
}
