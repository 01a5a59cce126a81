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
	void (*say)(void *ctx, const char *line); /* source_local_on_warning */
	void *say_ctx;
	bool warned;
};

static struct store *st_of(struct job_source *s)
{
	return ((struct local *)s)->st;
}

/*
 * backend_reconcile, for a reader: a read may find a job whose supervisor
 * is gone and record it lost.  When the file system refuses that write
 * (full, or the database open read-only for it), the reader still reads:
 * the row stays as recorded, said once per source (issue 28), and *stale
 * (when not NULL) says the row is behind what was found.
 */
static int reconcile(struct local *l, struct job_row *j, bool *stale, struct tc_err *err)
{
	struct tc_err e = TC_ERR_INIT;
	int rc = backend_reconcile(l->st, j, &e);
	if (stale)
		*stale = false;
	if (rc == TC_ESTORE && store_write_refused(l->st)) {
		if (stale)
			*stale = true;
		if (!l->warned && l->say) {
			struct sbuf line = SBUF_INIT;
			sbuf_addf(&line, "job %s: its state cannot be brought up to date (%s): shown as"
				  " last recorded", j->id, store_read_only(l->st) ?
				  "the database is open read-only, as its file system refused a write" :
				  e.msg ? e.msg : "the database refused a write");
			l->say(l->say_ctx, line.buf);
			sbuf_release(&line);
		}
		l->warned = true;
		rc = 0;
	} else if (rc) {
		tc_error(err, rc, "%s", e.msg ? e.msg : tc_code_name(rc));
	}
	tc_err_release(&e);
	return rc;
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
		rc = reconcile((struct local *)s, &jobs[i], NULL, err);
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
	struct local *l = (struct local *)s;
	struct job_row j = { 0 };
	/* jobs_show reconciles too: here first, so that a refused write is no failure */
	int rc = store_job_get(l->st, ref, &j, err);
	if (!rc)
		rc = reconcile(l, &j, NULL, err);
	if (!rc)
		rc = jobs_show(l->st, j.id, false, out, err);
	job_row_release(&j);
	return rc;
}

struct follow_ctx {
	struct local *l;
	const char *id;
};

static bool job_alive(void *data)
{
	struct follow_ctx *f = data;
	struct job_row j = { 0 };
	struct tc_err err = TC_ERR_INIT;
	bool alive = false, stale = false;
	/* stale: the job was found ended and could not be recorded so; follow no further */
	if (store_job_get(f->l->st, f->id, &j, &err) == 0 && reconcile(f->l, &j, &stale, &err) == 0)
		alive = !stale && !job_state_terminal(j.state);
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
		rc = reconcile((struct local *)s, &j, NULL, err);
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
	struct follow_ctx fc = { (struct local *)s, j.id };
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

void source_local_on_warning(struct job_source *s, void (*say)(void *ctx, const char *line),
			    void *ctx)
{
	struct local *l = (struct local *)s;
	l->say = say;
	l->say_ctx = ctx;
}

int source_local_open(const char *home, struct job_source **out, struct tc_err *err)
{
	struct store *st = NULL;
	/* a reader reads on a full disk too: read-only when writing is refused */
	int rc = store_open_read(home, &st, err);
	if (rc)
		return rc;
	*out = source_local_wrap(st);
	((struct local *)*out)->own = true;
	return 0;
}
