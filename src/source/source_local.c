/* source_local.c -- the job source of this machine: the store and the run folder (source.h). */
#include "source/source.h"
#include "backend/backend.h"
#include "endpoint/endpoint.h"
#include "jobs/jobs.h"
#include "logs/logs.h"
#include "sweep/sweep.h"
#include "core/xalloc.h"

#include <stdlib.h>
#include <string.h>

struct local {
	struct job_source base;
	struct store *st;
	bool own; /* opened here: closed with the source */
};

static struct store *st_of(struct job_source *s)
{
	return ((struct local *)s)->st;
}

static void fill(const struct job_row *r, struct source_job *out)
{
	out->id = xstrdup(r->id);
	out->name = r->name ? xstrdup(r->name) : NULL;
	out->state = xstrdup(job_state_name(r->state));
	out->world_size = r->world_size;
	out->started = r->started > 0;
	out->ended = job_state_terminal(r->state);
	out->run_dir = r->run_dir ? xstrdup(r->run_dir) : NULL;
}

static int l_job(struct job_source *s, const char *ref, struct source_job *out,
		 struct tc_err *err)
{
	struct job_row j = { 0 };
	int rc = store_job_get(st_of(s), ref, &j, err);
	if (!rc)
		fill(&j, out);
	job_row_release(&j);
	return rc;
}

static int l_list(struct job_source *s, const struct source_query *q, json_t **out,
		  struct tc_err *err)
{
	struct store *st = st_of(s);
	struct job_row *jobs = NULL;
	size_t n = 0;
	int rc;
	if (!q->states && !q->user) {
		rc = store_job_list(st, q->all, &jobs, &n, err);
	} else {
		long long total = 0;
		struct store_jfilter f = { q->states, q->user, NULL, q->all ? 100000 : 50, 0 };
		rc = store_job_query(st, &f, &jobs, &n, &total, err);
	}
	for (size_t i = 0; i < n && !rc; i++)
		rc = backend_reconcile(st, &jobs[i], err);
	if (!rc) {
		*out = json_array();
		for (size_t i = 0; i < n; i++)
			json_array_append_new(*out, job_to_json(&jobs[i], JOB_JSON_BRIEF));
	}
	job_rows_free(jobs, n);
	return rc;
}

static int l_job_json(struct job_source *s, const char *ref, json_t **out, struct tc_err *err)
{
	return jobs_show(st_of(s), ref, true, out, err);
}

struct follow_ctx {
	struct store *st;
	const char *id;
};

static bool job_alive(void *data)
{
	struct follow_ctx *f = data;
	struct job_row j = { 0 };
	struct tc_err err = TC_ERR_INIT;
	bool alive = false;
	if (store_job_get(f->st, f->id, &j, &err) == 0 &&
	    backend_reconcile(f->st, &j, &err) == 0)
		alive = !job_state_terminal(j.state);
	job_row_release(&j);
	tc_err_release(&err);
	return alive;
}

static int l_logs(struct job_source *s, struct source_job *sj, const struct source_logs *o,
		  FILE *out, bool *none, struct tc_err *err)
{
	struct store *st = st_of(s);
	struct job_row j = { 0 };
	*none = false;
	int rc = store_job_get(st, sj->id, &j, err);
	if (!rc)
		rc = backend_reconcile(st, &j, err);
	if (rc)
		goto out;
	free(sj->state);
	sj->state = xstrdup(job_state_name(j.state));
	sj->ended = job_state_terminal(j.state);
	int have = sj->ended || !o->follow ? logs_has_worker_log(j.run_dir, o->rank, err) : 1;
	if (have <= 0) {
		rc = have < 0 ? have : 0;
		*none = have == 0;
		goto out;
	}
	struct follow_ctx fc = { st, j.id };
	struct logs_opts lo = { j.run_dir, (int)o->rank, o->tail, o->follow,
				o->rank < 0 && j.world_size != 1, job_alive, &fc, o->timestamps,
				o->merge };
	rc = logs_print(&lo, out, err);
out:
	job_row_release(&j);
	return rc;
}

static int l_supervisor_log(struct job_source *s, const struct source_job *j, struct sbuf *out,
			    struct tc_err *err)
{
	(void)s;
	/* through logs/ of the run folder, never a link the account put there (logs.h) */
	return logs_read_supervisor(j->run_dir, out, err);
}

static int l_metric_names(struct job_source *s, const char *id, struct sbuf *out,
			  struct tc_err *err)
{
	return store_metric_names_json(st_of(s), id, out, err);
}

static int l_metric_series(struct job_source *s, const char *id, const char *metric, int rank,
			   struct store_mseries **out, size_t *nr, struct tc_err *err)
{
	return store_metric_series(st_of(s), id, metric, rank, out, nr, err);
}

static int l_checkpoints(struct job_source *s, const char *id, struct store_ckpt **out,
			 size_t *nr, struct tc_err *err)
{
	return store_ckpt_list(st_of(s), id, true, out, nr, err);
}

static int l_sweep_json(struct job_source *s, const char *ref, json_t **out, struct tc_err *err)
{
	return sweep_show_json(st_of(s), ref, out, err);
}

static int l_metric_xy(struct job_source *s, const char *id, const char *metric, int rank,
		       double xmin, double xmax, const struct store_xy_sink *sink,
		       struct tc_err *err)
{
	return store_metric_xy(st_of(s), id, metric, rank, xmin, xmax, sink, err);
}

static int l_metric_walk(struct job_source *s, const char *id, const char *metric, int rank,
			 int (*fn)(void *arg, const struct store_mpoint *p), void *arg,
			 struct tc_err *err)
{
	return store_metric_walk(st_of(s), id, metric, rank, fn, arg, err);
}

static int l_endpoints(struct job_source *s, const char *ref, json_t **out, struct tc_err *err)
{
	struct job_row j = { 0 };
	struct store_endpoint *v = NULL;
	size_t n = 0;
	int rc = store_job_get(st_of(s), ref, &j, err);
	if (!rc)
		rc = store_endpoints(st_of(s), j.id, &v, &n, err);
	if (!rc)
		*out = json_pack("{s:s, s:o}", "job", j.id,
				 "endpoints", endpoint_list_json(j.id, v, n, NULL, true));
	if (!rc && !*out)
		rc = tc_error(err, TC_ESYS, "endpoints: cannot encode JSON");
	store_endpoints_free(v, n);
	job_row_release(&j);
	return rc;
}

static void l_close(struct job_source *s)
{
	struct local *l = (struct local *)s;
	if (l->own)
		store_close(l->st);
	free(l);
}

static const struct source_ops local_ops = {
	"local", l_job, l_list, l_job_json, l_logs, l_supervisor_log, l_metric_names, l_metric_series,
	l_checkpoints, l_sweep_json, l_metric_xy, l_metric_walk, l_endpoints, l_close,
};

struct job_source *source_local_wrap(struct store *st)
{
	struct local *l = xcalloc(1, sizeof(*l));
	l->base.ops = &local_ops;
	l->st = st;
	return &l->base;
}

int source_local_open(const char *home, struct job_source **out, struct tc_err *err)
{
	struct store *st = NULL;
	int rc = store_open(home, &st, err);
	if (rc)
		return rc;
	*out = source_local_wrap(st);
	((struct local *)*out)->own = true;
	return 0;
}
