/*
 * source_remote.c -- the job source of a server (source.h), through the
 * CLI's client: each operation one GET of the API, so the server decides
 * who may read what (a job of another user is refused there).
 */
#include "cmd/client.h"
#include "cmd/cmd.h"
#include "core/enc.h"
#include "core/xalloc.h"
#include "jobs/state.h"
#include "source/source.h"

#include <stdlib.h>
#include <string.h>

struct remote {
	struct job_source base;
	struct client *cl;
	const char *url; /* the server as we reach it (--server, else $TRAINCTL_SERVER); may be NULL */
};

static struct client *cl_of(struct job_source *s)
{
	return ((struct remote *)s)->cl;
}

/* GET /api/v1/<what>/REF<tail> into resp */
static int get(struct job_source *s, const char *what, const char *ref, const char *tail,
	       struct sbuf *resp, struct tc_err *err)
{
	struct sbuf path = SBUF_INIT;
	sbuf_addf(&path, "/api/v1/%s/", what);
	url_encode(&path, ref, false);
	if (tail)
		sbuf_adds(&path, tail);
	int rc = client_json(cl_of(s), "GET", path.buf, NULL, resp, err);
	sbuf_release(&path);
	return rc;
}

static int get_json(struct job_source *s, const char *what, const char *ref, json_t **out,
		    struct tc_err *err)
{
	struct sbuf resp = SBUF_INIT;
	int rc = get(s, what, ref, NULL, &resp, err);
	if (!rc && !(*out = json_loadb(resp.buf, resp.len, 0, NULL)))
		rc = tc_error(err, TC_EBACKEND, "the server's answer is not JSON");
	sbuf_release(&resp);
	return rc;
}

static const char *jstr(json_t *o, const char *k)
{
	const char *v = json_string_value(json_object_get(o, k));
	return v ? v : "";
}

static int r_job(struct job_source *s, const char *ref, struct source_job *out,
		 struct tc_err *err)
{
	json_t *o = NULL;
	int rc = get_json(s, "jobs", ref, &o, err);
	if (rc)
		return rc;
	out->id = xstrdup(json_string_value(json_object_get(o, "id")) ? jstr(o, "id") : ref);
	out->name = json_string_value(json_object_get(o, "name")) ? xstrdup(jstr(o, "name")) : NULL;
	out->state = xstrdup(jstr(o, "state"));
	out->world_size = (int)json_integer_value(json_object_get(o, "workers"));
	out->started = !json_is_null(json_object_get(o, "started"));
	enum job_state js;
	out->ended = job_state_parse(out->state, strlen(out->state), &js) && job_state_terminal(js);
	json_decref(o);
	return 0;
}

static int r_list(struct job_source *s, const struct source_query *q, json_t **out,
		  struct tc_err *err)
{
	struct sbuf path = SBUF_INIT, resp = SBUF_INIT;
	sbuf_addf(&path, "/api/v1/jobs?limit=%d", q->all ? 100000 : 50);
	for (int st = 0, n = 0; st < 32; st++) {
		if (q->states & (1u << st)) {
			sbuf_adds(&path, n++ ? "," : "&state=");
			url_encode(&path, job_state_name((enum job_state)st), false);
		}
	}
	if (q->user) {
		sbuf_adds(&path, "&user=");
		url_encode(&path, q->user, false);
	}
	int rc = client_json(cl_of(s), "GET", path.buf, NULL, &resp, err);
	if (!rc) {
		json_t *o = json_loadb(resp.buf, resp.len, 0, NULL);
		json_t *jobs = json_object_get(o, "jobs");
		if (json_is_array(jobs))
			*out = json_incref(jobs);
		else
			rc = tc_error(err, TC_EBACKEND, "ps: the server's answer has no job list");
		json_decref(o);
	}
	sbuf_release(&path);
	sbuf_release(&resp);
	return rc;
}

static int r_job_json(struct job_source *s, const char *ref, json_t **out, struct tc_err *err)
{
	return get_json(s, "jobs", ref, out, err);
}

struct follow {
	bool prefix;
	FILE *out;
};

static int on_log_event(void *arg, const char *event, const char *data)
{
	struct follow *f = arg;
	if (!strcmp(event, "end"))
		return 1;
	json_t *o = json_loads(data, 0, NULL);
	const char *line = json_string_value(json_object_get(o, "line"));
	if (line) {
		if (f->prefix)
			fprintf(f->out, "[%lld] ", (long long)json_integer_value(json_object_get(o, "rank")));
		fputs(line, f->out);
		fputc('\n', f->out);
		fflush(f->out);
	}
	json_decref(o);
	return 0;
}

static int r_logs(struct job_source *s, struct source_job *j, const struct source_logs *o,
		  FILE *out, bool *none, struct tc_err *err)
{
	enum job_state js = JOB_QUEUED;
	bool known = job_state_parse(j->state, strlen(j->state), &js);
	*none = false;
	/* nothing to ask for while it waits for its first start */
	if (!o->follow && known && !j->ended && !j->started && js != JOB_RUNNING) {
		*none = true;
		return 0;
	}
	struct sbuf path = SBUF_INIT, resp = SBUF_INIT;
	sbuf_adds(&path, "/api/v1/jobs/");
	url_encode(&path, j->id, false);
	sbuf_addf(&path, "/logs?rank=%ld", o->rank);
	if (o->tail >= 0)
		sbuf_addf(&path, "&tail=%ld", o->tail);
	if (o->timestamps)
		sbuf_adds(&path, "&timestamps=1");
	if (o->merge)
		sbuf_adds(&path, "&merge=1");
	int rc;
	if (o->follow) {
		struct follow f = { o->rank < 0 && j->world_size != 1, out };
		sbuf_adds(&path, "&follow=1");
		if (o->tail < 0)
			sbuf_adds(&path, "&tail=-1");
		rc = client_events(cl_of(s), path.buf, on_log_event, &f, err);
	} else {
		rc = client_json(cl_of(s), "GET", path.buf, NULL, &resp, err);
		if (!rc) {
			fwrite(resp.buf, 1, resp.len, out);
		} else if (rc == TC_ENOTFOUND) { /* the job is there: its worker logs are not */
			tc_err_release(err);
			*none = true;
			rc = 0;
		}
	}
	sbuf_release(&path);
	sbuf_release(&resp);
	return rc;
}

static int r_supervisor_log(struct job_source *s, const struct source_job *j, struct sbuf *out,
			    struct tc_err *err)
{
	(void)s;
	(void)out;
	return tc_error(err, TC_EUSAGE,
			"logs: --supervisor reads the run folder of job %s on the server's machine: "
			"not through a server (its owner or an admin reads it there)", j->id);
}

static int r_metric_names(struct job_source *s, const char *id, struct sbuf *out,
			  struct tc_err *err)
{
	return get(s, "jobs", id, "/metrics", out, err);
}

static int r_metric_series(struct job_source *s, const char *id, const char *metric, int rank,
			   struct store_mseries **out, size_t *nr, struct tc_err *err)
{
	struct sbuf tail = SBUF_INIT, resp = SBUF_INIT;
	sbuf_addf(&tail, "/metrics/series?rank=%d", rank);
	if (metric) {
		sbuf_adds(&tail, "&name=");
		url_encode(&tail, metric, false);
	}
	int rc = get(s, "jobs", id, tail.buf, &resp, err);
	if (!rc)
		rc = source_series_parse(resp.buf, resp.len, out, nr, err);
	sbuf_release(&tail);
	sbuf_release(&resp);
	return rc;
}

static int r_checkpoints(struct job_source *s, const char *id, struct store_ckpt **out,
			 size_t *nr, struct tc_err *err)
{
	struct sbuf resp = SBUF_INIT;
	int rc = get(s, "jobs", id, "/checkpoints", &resp, err);
	if (!rc)
		rc = source_ckpt_parse(resp.buf, resp.len, out, nr, err);
	sbuf_release(&resp);
	return rc;
}

static int r_sweep_json(struct job_source *s, const char *ref, json_t **out, struct tc_err *err)
{
	return get_json(s, "sweeps", ref, out, err);
}

/* Through a server both chart reads are its series, filtered here as the store's readers do. */
static int r_metric_xy(struct job_source *s, const char *id, const char *metric, int rank,
		       double xmin, double xmax, const struct store_xy_sink *sink,
		       struct tc_err *err)
{
	struct store_mseries *v = NULL;
	size_t n = 0;
	int rc = r_metric_series(s, id, metric, rank, &v, &n, err);
	if (!rc)
		source_series_xy(v, n, xmin, xmax, sink);
	store_mseries_free(v, n);
	return rc;
}

static int r_metric_walk(struct job_source *s, const char *id, const char *metric, int rank,
			 int (*fn)(void *arg, const struct store_mpoint *p), void *arg,
			 struct tc_err *err)
{
	struct store_mseries *v = NULL;
	size_t n = 0;
	int rc = r_metric_series(s, id, metric, rank, &v, &n, err);
	for (size_t k = 0; !rc && n && k < v[0].n; k++)
		rc = fn(arg, &v[0].v[k]);
	store_mseries_free(v, n);
	return rc;
}

static int r_endpoints(struct job_source *s, const char *ref, json_t **out, struct tc_err *err)
{
	json_t *o = NULL;
	struct sbuf resp = SBUF_INIT;
	int rc = get(s, "jobs", ref, "/endpoints", &resp, err);
	if (!rc)
		o = json_loadb(resp.buf, resp.len, 0, NULL); /* not in json_is_object: a macro */
	if (!rc && !json_is_object(o))
		rc = tc_error(err, TC_EBACKEND, "endpoints: the server's answer is not JSON");
	sbuf_release(&resp);
	if (rc) {
		json_decref(o);
		return rc;
	}
	/* the server gives paths: the URLs are the server's as we reach it */
	const char *base = ((struct remote *)s)->url;
	size_t bl = base ? strlen(base) : 0;
	json_t *a = json_object_get(o, "endpoints"), *e;
	size_t i;
	json_array_foreach(a, i, e) {
		const char *p = json_string_value(json_object_get(e, "path"));
		if (p && bl) {
			struct sbuf u = SBUF_INIT;
			sbuf_add(&u, base, base[bl - 1] == '/' ? bl - 1 : bl);
			sbuf_adds(&u, p);
			json_object_set_new(e, "url", json_string(u.buf));
			sbuf_release(&u);
		}
	}
	if (!json_string_value(json_object_get(o, "job")))
		json_object_set_new(o, "job", json_string(ref));
	*out = o;
	return 0;
}

static void r_close(struct job_source *s)
{
	client_close(cl_of(s));
	free(s);
}

static const struct source_ops remote_ops = {
	"remote", r_job, r_list, r_job_json, r_logs, r_supervisor_log, r_metric_names, r_metric_series,
	r_checkpoints, r_sweep_json, r_metric_xy, r_metric_walk, r_endpoints, r_close,
};

static void warn_line(void *ctx, const char *line)
{
	(void)ctx;
	fprintf(stderr, "trainctl: warning: %s\n", line);
}

int cmd_source_open(const char *home, const char *server, int argc, char **argv,
		    struct job_source **out, struct tc_err *err)
{
	if (!server && !client_configured(argc, argv)) {
		int rc = source_local_open(home, out, err);
		if (!rc)
			source_local_on_warning(*out, warn_line, NULL);
		return rc;
	}
	struct client *cl = NULL;
	int rc = client_open(server, &cl, err);
	if (rc)
		return rc;
	struct remote *r = xcalloc(1, sizeof(*r));
	r->base.ops = &remote_ops;
	r->cl = cl;
	r->url = server ? server : getenv("TRAINCTL_SERVER");
	*out = &r->base;
	return 0;
}
