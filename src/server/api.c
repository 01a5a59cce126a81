/*
 * api.c -- the HTTP API (/api/v1, JSON), /metrics and the web UI, on
 * libmicrohttpd with one thread per connection (so server-sent event
 * streams may block).  Every handler validates its input first (server.h
 * invariant 4); errors are {"error": "..."} with the matching status.
 */
#include "server/server_int.h"
#include "server/api_int.h"
#include "core/json.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "logs/logs.h"
#include "metrics/query.h"
#include "metrics/metrics.h"
#include "spec/spec.h"
#include "backend/backend.h"
#include "jobs/jobs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <jansson.h>
#include <math.h>
#include "core/lazylib.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- replies ---- */

int reply_raw(struct MHD_Connection *con, unsigned status, const char *type, const char *body,
	      size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body,
								  MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", type);
	MHD_add_response_header(r, "Cache-Control", "no-store");
	int ret = MHD_queue_response(con, status, r);
	MHD_destroy_response(r);
	return ret;
}

int reply_json(struct MHD_Connection *con, unsigned status, const char *json)
{
	return reply_raw(con, status, "application/json", json, strlen(json));
}

void api_error_json(struct sbuf *out, unsigned status, const char *msg)
{
	sbuf_adds(out, "{\"error\":");
	json_add_str(out, msg);
	sbuf_addf(out, ",\"status\":%u}", status);
}

unsigned api_status_of(int code)
{
	return code == TC_ENOTFOUND ? 404
	       : (code == TC_ESPEC || code == TC_EUSAGE || code == TC_EINPUT) ? 400
	       : 500;
}

int reply_err(struct MHD_Connection *con, unsigned status, const char *fmt, ...)
{
	struct sbuf msg = SBUF_INIT, body = SBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	sbuf_vaddf(&msg, fmt, ap);
	va_end(ap);
	api_error_json(&body, status, msg.buf);
	int ret = reply_json(con, status, body.buf);
	sbuf_release(&msg);
	sbuf_release(&body);
	return ret;
}

static int reply_tc(struct MHD_Connection *con, const struct tc_err *err)
{
	return reply_err(con, api_status_of(err->code), "%s",
			 err->msg ? err->msg : tc_code_name(err->code));
}

static int reply_jsont(struct MHD_Connection *con, unsigned status, json_t *o)
{
	char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (!text)
		return reply_err(con, 500, "cannot encode the answer");
	int ret = reply_json(con, status, text);
	free(text);
	return ret;
}

const char *arg_of(struct MHD_Connection *con, const char *key)
{
	return MHD_lookup_connection_value(con, MHD_GET_ARGUMENT_KIND, key);
}

/* A query number within [min, max]; def when absent; false when malformed. */
bool arg_long(struct MHD_Connection *con, const char *key, long min, long max, long def,
	      long *out)
{
	const char *v = arg_of(con, key);
	*out = def;
	if (!v || !*v)
		return true;
	return parse_long(v, min, max, out);
}

/* ---- who is asking (the decision is server_auth_decide, auth.c) ---- */

/* The store's answer for a token. */
static int token_lookup(void *arg, const char *token, char **user, bool *admin)
{
	struct srv *s = arg;
	struct sbuf hash = SBUF_INIT;
	server_token_hash(token, &hash);
	struct tc_err err = TC_ERR_INIT;
	pthread_mutex_lock(&s->mu);
	int rc = store_token_find(s->st, hash.buf, user, admin, &err);
	pthread_mutex_unlock(&s->mu);
	sbuf_release(&hash);
	tc_err_release(&err);
	return rc;
}

/* 0 with who filled, or an HTTP status (401, 403) */
static unsigned authenticate(struct srv *s, struct MHD_Connection *con, enum route_need need,
			     struct who *w)
{
	struct auth_req a = { .need = need, .os_user = s->os_user, .lookup = token_lookup, .arg = s };
	if (need != NEED_NONE) {
		pthread_mutex_lock(&s->mu);
		double now = now_wall();
		if (now - s->tokens_at > 1.0) {
			struct tc_err err = TC_ERR_INIT;
			if (store_token_count(s->st, &s->ntokens, &err) == 0)
				s->tokens_at = now;
			tc_err_release(&err);
		}
		a.ntokens = s->ntokens;
		pthread_mutex_unlock(&s->mu);
		a.authorization = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Authorization");
		a.token_arg = arg_of(con, "token");
	}
	return server_auth_decide(&a, w);
}

/* ---- jobs ---- */

bool api_id_ok(const char *id)
{
	if (!*id || strlen(id) > 200 || !strcmp(id, ".") || !strcmp(id, ".."))
		return false;
	for (const char *c = id; *c; c++)
		if (!(*c == '-' || *c == '_' || *c == '.' || (*c >= '0' && *c <= '9') ||
		      (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')))
			return false;
	return true;
}

/*
 * Find the job ref (id, unique prefix or name) the caller may see: 0, or
 * an HTTP status with the error reply queued.
 */
static int find_job(struct srv *s, struct MHD_Connection *con, const struct who *w,
		    const char *ref, struct job_row *out, int *ret)
{
	if (!api_id_ok(ref)) {
		*ret = reply_err(con, 400, "bad job id '%s'", ref);
		return 400;
	}
	struct tc_err err = TC_ERR_INIT;
	pthread_mutex_lock(&s->mu);
	int rc = store_job_get(s->st, ref, out, &err);
	pthread_mutex_unlock(&s->mu);
	if (rc) {
		*ret = rc == TC_ENOTFOUND ? reply_err(con, 404, "no job '%s'", ref) : reply_tc(con, &err);
		tc_err_release(&err);
		return rc == TC_ENOTFOUND ? 404 : 500;
	}
	tc_err_release(&err);
	if (!server_may_see(w, out->user)) {
		*ret = reply_err(con, 403, "job %s belongs to another user", out->id);
		job_row_release(out);
		return 403;
	}
	return 0;
}

static char *write_job_yaml(const char *run_dir, const char *yaml, struct tc_err *err)
{
	struct sbuf path = SBUF_INIT, tmp = SBUF_INIT;
	sbuf_addf(&path, "%s/job.yaml", run_dir);
	sbuf_addf(&tmp, "%s/.job.yaml.tmp", run_dir);
	/* no fsync: the spec is also in the database, and submissions must be cheap */
	FILE *f = fopen(tmp.buf, "w");
	int ok = f && fputs(yaml, f) >= 0;
	if (f && fclose(f) != 0)
		ok = 0;
	if (!ok || rename(tmp.buf, path.buf) < 0) {
		tc_error_errno(err, TC_ESYS, "cannot write %s", path.buf);
		sbuf_release(&path);
		sbuf_release(&tmp);
		return NULL;
	}
	sbuf_release(&tmp);
	return sbuf_detach(&path);
}

/* Queue a spec (text, YAML or JSON) for user; 201 with the job. */
static int submit_spec(struct srv *s, struct MHD_Connection *con, const struct who *w,
		       const char *text, const char *file, const char *base, const char *name_override)
{
	struct spec *sp = NULL;
	struct tc_err err = TC_ERR_INIT;
	int ret;
	if (spec_parse_backend(text, strlen(text), file, base, s->o.backend, &sp, &err)) {
		ret = reply_tc(con, &err);
		tc_err_release(&err);
		return ret;
	}
	if (name_override) {
		free(sp->name);
		sp->name = xstrdup(name_override);
	}
	/* a backend with a queue of its own (slurm) allocates its nodes, not this pool */
	const struct backend_ops *be = backend_find(sp->backend);
	if (!be)
		be = &backend_local;
	bool own_queue = be->submit != NULL;
	/* the pool must be able to hold the job at all, or it would wait forever */
	size_t have = 0;
	for (size_t i = 0; i < s->ndevs; i++)
		if (!strcmp(s->devs[i].type, sp->device_type))
			have++;
	if (!own_queue && (size_t)sp->per_node > have) {
		ret = reply_err(con, 400, "devices: %d %s devices requested but this server has %zu",
				sp->per_node, sp->device_type, have);
		spec_free(sp);
		return ret;
	}
	char *id = store_new_job_id();
	struct sbuf run_dir = SBUF_INIT;
	sbuf_addf(&run_dir, "%s/runs/%s", s->home, id);
	char *yaml = spec_to_yaml(sp);
	char *json = spec_to_json(sp);
	char *path = NULL;
	if (mkdir_p(run_dir.buf, &err) || !(path = write_job_yaml(run_dir.buf, yaml, &err))) {
		ret = reply_tc(con, &err);
		goto out;
	}
	/* ids the spec named are a requirement; otherwise any free ones */
	char *want = sp->device_ids_given ? ids_text(sp->device_ids, sp->per_node) : NULL;
	struct job_row jr = { .id = id, .name = sp->name, .state = JOB_QUEUED, .run_dir = run_dir.buf,
			      .spec_json = json, .created = now_wall(),
			      .world_size = sp->per_node * sp->nodes, .exit_code = -1,
			      .user = (char *)w->user, .priority = sp->priority,
			      .preemptible = sp->preemptible, .device_type = sp->device_type,
			      .device_count = sp->per_node, .device_want = want, .managed = true,
			      .backend = sp->backend };
	pthread_mutex_lock(&s->mu);
	int rc = store_job_submit(s->st, &jr, &err);
	if (!rc) {
		srv_add_queued(s, id, w->user, sp->name, sp->device_type, sp->per_node,
			       want ? sp->device_ids : NULL, sp->priority, sp->preemptible, jr.created,
			       sp->max_restarts, run_dir.buf, be);
		s->submitted++;
		srv_wake(s);
	}
	pthread_mutex_unlock(&s->mu);
	if (rc) {
		free(want);
		ret = reply_tc(con, &err);
		goto out;
	}
	/* the job as the API shows it (as listed: no spec) */
	ret = reply_jsont(con, 201, job_to_json(&jr, JOB_JSON_BRIEF));
	free(want);
out:
	free(path);
	free(yaml);
	free(json);
	free(id);
	sbuf_release(&run_dir);
	spec_free(sp);
	tc_err_release(&err);
	return ret;
}

static int h_submit(struct srv *s, struct MHD_Connection *con, const struct who *w,
		    const struct sbuf *body)
{
	json_error_t je;
	json_t *o = json_loadb(body->buf, body->len, 0, &je);
	int ret;
	if (!o)
		return reply_err(con, 400, "malformed JSON at line %d: %s", je.line, je.text);
	if (!json_is_object(o)) {
		json_decref(o);
		return reply_err(con, 400, "the body must be a JSON object with a 'spec'");
	}
	json_t *spec = json_object_get(o, "spec");
	json_t *base = json_object_get(o, "base");
	json_t *file = json_object_get(o, "file");
	json_t *name = json_object_get(o, "name");
	if ((base && !json_is_string(base)) || (file && !json_is_string(file)) ||
	    (name && !json_is_null(name) && !json_is_string(name))) {
		json_decref(o);
		return reply_err(con, 400, "'base', 'file' and 'name' must be strings");
	}
	const char *b = base ? json_string_value(base) : NULL;
	if (b && b[0] != '/') {
		json_decref(o);
		return reply_err(con, 400, "'base' must be an absolute path");
	}
	char *text = NULL;
	if (json_is_string(spec)) {
		text = xstrdup(json_string_value(spec));
	} else if (json_is_object(spec)) {
		char *t = json_dumps(spec, JSON_COMPACT | JSON_PRESERVE_ORDER);
		text = xstrdup(t ? t : "{}");
		free(t);
	} else {
		json_decref(o);
		return reply_err(con, 400, "'spec' must be the spec text (YAML or JSON) or a JSON object");
	}
	if (strlen(text) != (spec && json_is_string(spec) ? json_string_length(spec) : strlen(text))) {
		ret = reply_err(con, 400, "spec: holds a NUL byte");
	} else {
		char *cwd = getcwd(NULL, 0);
		ret = submit_spec(s, con, w, text, file ? json_string_value(file) : "spec",
				  b ? b : (cwd ? cwd : "/"),
				  name && json_is_string(name) && *json_string_value(name) ? json_string_value(name) : NULL);
		free(cwd);
	}
	free(text);
	json_decref(o);
	return ret;
}

/* "a,b" into a set of states (1u << JOB_*); false naming the first word that is not one. */
static bool parse_states(const char *text, unsigned *set, const char **bad, int *badlen)
{
	*set = 0;
	for (const char *p = text; *p;) {
		const char *c = strchr(p, ',');
		size_t n = c ? (size_t)(c - p) : strlen(p);
		enum job_state st;
		if (!job_state_parse(p, n, &st)) {
			*bad = p;
			*badlen = (int)n;
			return false;
		}
		*set |= 1u << st;
		p += n + (c ? 1 : 0);
	}
	return true;
}

static int h_list(struct srv *s, struct MHD_Connection *con, const struct who *w)
{
	long limit, offset;
	if (!arg_long(con, "limit", 1, 100000, 100, &limit) ||
	    !arg_long(con, "offset", 0, 1L << 40, 0, &offset))
		return reply_err(con, 400, "limit must be 1..100000 and offset a number");
	const char *state = arg_of(con, "state"), *user = arg_of(con, "user");
	const char *name = arg_of(con, "name");
	unsigned states = 0;
	const char *bad = NULL;
	int badlen = 0;
	if (state && !parse_states(state, &states, &bad, &badlen))
		return reply_err(con, 400, "state: '%.*s' is not a job state", badlen, bad);
	if (!w->admin) {
		if (user && *user && strcmp(user, w->user) != 0)
			return reply_err(con, 403, "only an admin may list another user's jobs");
		user = w->user;
	}
	struct store_jfilter f = { states, user && *user ? user : NULL, name && *name ? name : NULL,
				   limit, offset };
	struct job_row *v = NULL;
	size_t n = 0;
	struct tc_err err = TC_ERR_INIT;
	long long total = 0;
	pthread_mutex_lock(&s->mu);
	int rc = store_job_query(s->st, &f, &v, &n, &total, &err);
	pthread_mutex_unlock(&s->mu);
	int ret;
	if (rc) {
		ret = reply_tc(con, &err);
	} else {
		json_t *jobs = json_array();
		for (size_t i = 0; i < n; i++)
			json_array_append_new(jobs, job_to_json(&v[i], JOB_JSON_BRIEF));
		ret = reply_jsont(con, 200, json_pack("{s:o, s:I, s:I, s:I}", "jobs", jobs, "total",
						      (json_int_t)total, "limit", (json_int_t)limit,
						      "offset", (json_int_t)offset));
	}
	job_rows_free(v, n);
	tc_err_release(&err);
	return ret;
}

static int h_detail(struct srv *s, struct MHD_Connection *con, const struct job_row *x)
{
	json_t *o = NULL;
	struct tc_err err = TC_ERR_INIT;
	/* the server follows its jobs itself: no reconcile here */
	pthread_mutex_lock(&s->mu);
	int rc = jobs_show(s->st, x->id, false, &o, &err);
	pthread_mutex_unlock(&s->mu);
	int ret = rc ? reply_tc(con, &err) : reply_jsont(con, 200, o);
	tc_err_release(&err);
	return ret;
}

/* The job's own connection, for what must not hold the server's lock (waits, file trees). */
static int with_store(struct srv *s, const struct job_row *x,
		      int (*fn)(struct srv *s, struct store *st, struct job_row *j, struct tc_err *err),
		      struct tc_err *err)
{
	struct store *st = NULL;
	struct job_row j = { 0 };
	int rc = store_open(s->home, &st, err);
	if (!rc)
		rc = store_job_get(st, x->id, &j, err);
	if (!rc)
		rc = fn(s, st, &j, err);
	job_row_release(&j);
	store_close(st);
	return rc;
}

static int stop_outside(struct srv *s, struct store *st, struct job_row *j, struct tc_err *err)
{
	struct backend_env env = { s->home, srv_say, s };
	return jobs_stop(&env, st, j, JOB_STOP_STOPPED, err);
}

static int delete_outside(struct srv *s, struct store *st, struct job_row *j, struct tc_err *err)
{
	(void)s;
	return jobs_delete(st, j, err);
}

static int h_clone(struct srv *s, struct MHD_Connection *con, const struct who *w,
		   const struct job_row *x)
{
	char *text = NULL;
	struct tc_err err = TC_ERR_INIT;
	int ret;
	if (jobs_clone_spec(x, &text, &err))
		ret = reply_err(con, 409, "%s", err.msg);
	else
		ret = submit_spec(s, con, w, text, "spec", x->run_dir, NULL);
	free(text);
	tc_err_release(&err);
	return ret;
}

static int h_action(struct srv *s, struct MHD_Connection *con, const struct who *w,
		    const struct job_row *x, const char *action)
{
	if (!strcmp(action, "clone"))
		return h_clone(s, con, w, x);
	struct tc_err err = TC_ERR_INIT;
	bool stop = !strcmp(action, "stop"), pause = !strcmp(action, "pause");
	bool del = !strcmp(action, "delete");
	pthread_mutex_lock(&s->mu);
	srv_catch_up(s);
	struct sjob *j = srv_find(s, x->id);
	int rc = 0, ret;
	unsigned status = 200;
	const char *msg = NULL;
	bool outside = false;
	if (stop && j && srv_external(j) && j->st != SJ_QUEUED) {
		/* its backend's stop waits out the grace time: outside the lock */
		outside = !j->term_sent;
		j->st = SJ_STOPPING;
		j->term_sent = true;
	} else if (stop || pause) {
		if (!j) {
			status = 409;
			msg = "the job is not active";
		} else {
			rc = srv_stop_job(s, j, stop ? JOB_STOP_STOPPED : JOB_STOP_PAUSED, &err);
		}
	} else if (!strcmp(action, "resume")) {
		if (!j || j->st != SJ_IDLE) {
			status = 409;
			msg = "only a paused job can be resumed";
		} else {
			rc = srv_resume_job(s, j, &err);
		}
	} else if (del) {
		if (j || !job_state_terminal(x->state)) {
			status = 409;
			msg = "only a finished job can be deleted (stop it first)";
		}
	} else {
		status = 404;
		msg = "no such action";
	}
	srv_wake(s);
	pthread_mutex_unlock(&s->mu);
	if (outside)
		rc = with_store(s, x, stop_outside, &err);
	else if (del && !msg)
		rc = with_store(s, x, delete_outside, &err);
	if (msg)
		ret = reply_err(con, status, "%s: %s", x->id, msg);
	else if (rc)
		ret = rc == TC_ESYS ? reply_err(con, 500, "%s", err.msg) : reply_tc(con, &err);
	else
		ret = reply_jsont(con, 200, json_pack("{s:s, s:s, s:b}", "id", x->id, "action", action,
						      "ok", 1));
	tc_err_release(&err);
	return ret;
}

/* ---- logs ---- */

static int h_logs(struct srv *s, struct MHD_Connection *con, const struct job_row *x)
{
	long rank, tail;
	if (!arg_long(con, "rank", -1, 1 << 20, -1, &rank) ||
	    !arg_long(con, "tail", -1, 10000000, -1, &tail))
		return reply_err(con, 400, "rank and tail must be numbers");
	const char *fmt = arg_of(con, "format");
	const char *follow = arg_of(con, "follow");
	if (follow && (!strcmp(follow, "1") || !strcmp(follow, "true")))
		return stream_logs(s, con, x, (int)rank, tail);
	struct sbuf dir = SBUF_INIT;
	sbuf_addf(&dir, "%s/logs", x->run_dir);
	if (fmt && !strcmp(fmt, "json")) {
		json_t *o = json_object();
		json_t *ranks = json_array();
		for (int r = 0; r < 4096; r++) {
			if (rank >= 0 && r != rank)
				continue;
			struct sbuf p = SBUF_INIT;
			sbuf_addf(&p, "%s/rank-%d.log", dir.buf, r);
			if (!path_exists(p.buf)) {
				sbuf_release(&p);
				if (r > x->device_count + 8)
					break;
				continue;
			}
			char *buf = NULL;
			size_t len = 0;
			FILE *f = open_memstream(&buf, &len);
			struct logs_opts lo = { dir.buf, r, tail < 0 ? 2000 : tail, false, false, NULL, NULL };
			struct tc_err err = TC_ERR_INIT;
			if (f) {
				if (logs_print(&lo, f, &err))
					tc_err_release(&err);
				fclose(f);
			}
			json_array_append_new(ranks, json_pack("{s:i, s:s#}", "rank", r, "text",
							       buf ? buf : "", buf ? len : 0));
			free(buf);
			sbuf_release(&p);
		}
		json_object_set_new(o, "ranks", ranks);
		sbuf_release(&dir);
		return reply_jsont(con, 200, o);
	}
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f) {
		sbuf_release(&dir);
		return reply_err(con, 500, "out of memory");
	}
	struct logs_opts lo = { dir.buf, (int)rank, tail, false, rank < 0 && x->device_count != 1,
				NULL, NULL };
	struct tc_err err = TC_ERR_INIT;
	int rc = logs_print(&lo, f, &err);
	fclose(f);
	int ret;
	if (rc) {
		ret = reply_tc(con, &err);
	} else {
		struct MHD_Response *r = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_COPY);
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
	sbuf_release(&dir);
	return ret;
}

/* ---- metrics of a job ---- */

static int h_metric_list(struct srv *s, struct MHD_Connection *con, const struct job_row *x)
{
	struct store_mseries *v = NULL;
	size_t n = 0;
	struct tc_err err = TC_ERR_INIT;
	struct sbuf body = SBUF_INIT;
	pthread_mutex_lock(&s->mu);
	int rc = store_metric_names_json(s->st, x->id, &body, &err);
	pthread_mutex_unlock(&s->mu);
	(void)v;
	(void)n;
	int ret = rc ? reply_tc(con, &err) : reply_json(con, 200, body.buf);
	sbuf_release(&body);
	tc_err_release(&err);
	return ret;
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

static void xy_ranks_release(struct xy_ranks *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->v[i].xy);
	free(r->v);
}

static int h_metric_points(struct srv *s, struct MHD_Connection *con, const struct job_row *x)
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
	struct store *st = NULL;
	struct tc_err err = TC_ERR_INIT;
	int rc = store_open(s->home, &st, &err);
	if (!rc)
		rc = store_metric_xy(st, x->id, name, (int)rank, xmin, xmax, &sink, &err);
	store_close(st);
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
		const struct xy_rank *r = &xr.v[i];
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

static int h_usage(struct srv *s, struct MHD_Connection *con, const struct job_row *x)
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

static int h_report(struct MHD_Connection *con, const struct job_row *x)
{
	struct sbuf path = SBUF_INIT, text = SBUF_INIT;
	sbuf_addf(&path, "%s/report.json", x->run_dir);
	int ret;
	if (read_file(path.buf, &text, NULL) == 0)
		ret = reply_json(con, 200, text.buf);
	else
		ret = reply_err(con, 404, "job %s has no report.json", x->id);
	sbuf_release(&path);
	sbuf_release(&text);
	return ret;
}

/* ---- the node ---- */

static int h_devices(struct srv *s, struct MHD_Connection *con)
{
	pthread_mutex_lock(&s->mu);
	struct sbuf body = SBUF_INIT;
	sbuf_adds(&body, "{\"devices\":");
	sbuf_adds(&body, s->devices_json ? s->devices_json : "[]");
	sbuf_addch(&body, '}');
	pthread_mutex_unlock(&s->mu);
	int ret = reply_json(con, 200, body.buf);
	sbuf_release(&body);
	return ret;
}

static int h_prometheus(struct srv *s, struct MHD_Connection *con)
{
	struct sbuf b = SBUF_INIT;
	pthread_mutex_lock(&s->mu);
	long long counts[JOB_NSTATES] = { 0 };
	struct tc_err err = TC_ERR_INIT;
	int rc = store_state_counts(s->st, counts, &err);
	sbuf_adds(&b, "# HELP trainctl_jobs Jobs by state.\n# TYPE trainctl_jobs gauge\n");
	for (int i = 0; i < JOB_NSTATES; i++)
		sbuf_addf(&b, "trainctl_jobs{state=\"%s\"} %lld\n", job_state_name((enum job_state)i),
			  counts[i]);
	sbuf_addf(&b, "# HELP trainctl_queue_length Jobs waiting for devices.\n"
		      "# TYPE trainctl_queue_length gauge\ntrainctl_queue_length %zu\n", s->nqueue);
	sbuf_adds(&b, "# HELP trainctl_devices Devices the scheduler hands out.\n# TYPE trainctl_devices gauge\n");
	sbuf_adds(&b, "# HELP trainctl_devices_allocated Devices held by jobs.\n# TYPE trainctl_devices_allocated gauge\n");
	for (size_t i = 0; i < s->ndevs; i++) {
		bool first = true;
		for (size_t k = 0; k < i && first; k++)
			first = strcmp(s->devs[k].type, s->devs[i].type) != 0;
		if (!first)
			continue;
		int total = 0, used = 0;
		for (size_t k = 0; k < s->ndevs; k++)
			if (!strcmp(s->devs[k].type, s->devs[i].type)) {
				total++;
				used += s->devs[k].owner >= 0;
			}
		sbuf_addf(&b, "trainctl_devices{type=\"%s\"} %d\ntrainctl_devices_allocated{type=\"%s\"} %d\n",
			  s->devs[i].type, total, s->devs[i].type, used);
	}
	sbuf_addf(&b, "# HELP trainctl_submissions_total Jobs submitted since the server started.\n"
		      "# TYPE trainctl_submissions_total counter\ntrainctl_submissions_total %lld\n"
		      "# HELP trainctl_http_requests_total HTTP requests served.\n"
		      "# TYPE trainctl_http_requests_total counter\ntrainctl_http_requests_total %lld\n"
		      "# HELP trainctl_scheduler_decision_seconds Mean time of one scheduling decision.\n"
		      "# TYPE trainctl_scheduler_decision_seconds gauge\ntrainctl_scheduler_decision_seconds %.9f\n"
		      "# HELP trainctl_scheduler_decisions_total Scheduling decisions since the server started.\n"
		      "# TYPE trainctl_scheduler_decisions_total counter\ntrainctl_scheduler_decisions_total %lld\n",
		      s->submitted, s->requests,
		      s->sched_calls ? s->sched_ns_total / (double)s->sched_calls / 1e9 : 0.0,
		      s->sched_calls);
	pthread_mutex_unlock(&s->mu);
	int ret = rc ? reply_tc(con, &err) : reply_raw(con, 200, "text/plain; version=0.0.4", b.buf, b.len);
	tc_err_release(&err);
	sbuf_release(&b);
	return ret;
}

/* ---- routing: the table and its dispatch (route.h) ---- */

struct req {
	struct sbuf body;
	bool too_big, answered;
};

/* One request being answered: what a route's handler gets. */
struct api_call {
	struct srv *s;
	struct MHD_Connection *con;
	const char *url;
	struct req *rq;
	struct who w;          /* the caller, for routes that need one */
	struct job_row job;    /* the path's {job}, found and visible to w */
};

void api_whoami_json(struct sbuf *out, const struct who *w)
{
	sbuf_adds(out, "{\"user\":");
	json_add_str(out, w->user);
	sbuf_addf(out, ",\"admin\":%s}", w->admin ? "true" : "false");
}

static int r_whoami(struct api_call *c)
{
	struct sbuf b = SBUF_INIT;
	api_whoami_json(&b, &c->w);
	int ret = reply_json(c->con, 200, b.buf);
	sbuf_release(&b);
	return ret;
}

static int r_submit(struct api_call *c)
{
	if (c->rq->too_big)
		return reply_err(c->con, 413, "the body is over %u bytes", TC_SERVER_MAX_BODY);
	return h_submit(c->s, c->con, &c->w, &c->rq->body);
}

/* The handlers keep their own signatures; the table reaches them through these. */
static int r_prometheus(struct api_call *c) { return h_prometheus(c->s, c->con); }
static int r_asset(struct api_call *c) { return serve_asset(c->con, c->url); }
static int r_info(struct api_call *c) { return h_info(c->s, c->con); }
static int r_devices(struct api_call *c) { return h_devices(c->s, c->con); }
static int r_events(struct api_call *c) { return stream_events(c->s, c->con, &c->w); }
static int r_list(struct api_call *c) { return h_list(c->s, c->con, &c->w); }
static int r_detail(struct api_call *c) { return h_detail(c->s, c->con, &c->job); }
static int r_delete(struct api_call *c) { return h_action(c->s, c->con, &c->w, &c->job, "delete"); }
static int r_stop(struct api_call *c) { return h_action(c->s, c->con, &c->w, &c->job, "stop"); }
static int r_pause(struct api_call *c) { return h_action(c->s, c->con, &c->w, &c->job, "pause"); }
static int r_resume(struct api_call *c) { return h_action(c->s, c->con, &c->w, &c->job, "resume"); }
static int r_clone(struct api_call *c) { return h_action(c->s, c->con, &c->w, &c->job, "clone"); }
static int r_logs(struct api_call *c) { return h_logs(c->s, c->con, &c->job); }
static int r_metric_list(struct api_call *c) { return h_metric_list(c->s, c->con, &c->job); }
static int r_metric_points(struct api_call *c) { return h_metric_points(c->s, c->con, &c->job); }
static int r_usage(struct api_call *c) { return h_usage(c->s, c->con, &c->job); }
static int r_report(struct api_call *c) { return h_report(c->con, &c->job); }

static int r_no_resource(struct api_call *c)
{
	return reply_err(c->con, 404, "no such resource: %s", c->url);
}

static int r_no_version(struct api_call *c)
{
	return reply_err(c->con, 404, "unknown API version (use /api/v1/)");
}

/*
 * Every endpoint (docs/server.md).  A {job} in the path is looked up (400
 * bad id, 404 unknown, 403 another user's) before anything else is said
 * about the path, 405 and 404 included.
 */
const struct route api_routes[] = {
	{ ROUTE_GET, "/metrics", r_prometheus, NEED_NONE },
	{ ROUTE_GET, "/api/v1/whoami", r_whoami, NEED_USER },
	{ ROUTE_GET, "/api/v1/info", r_info, NEED_USER },
	{ ROUTE_GET, "/api/v1/devices", r_devices, NEED_USER },
	{ ROUTE_GET, "/api/v1/events", r_events, NEED_USER },
	{ ROUTE_GET, "/api/v1/jobs", r_list, NEED_USER },
	{ ROUTE_POST, "/api/v1/jobs", r_submit, NEED_USER },
	{ ROUTE_GET, "/api/v1/jobs/{job}", r_detail, NEED_USER },
	{ ROUTE_DELETE, "/api/v1/jobs/{job}", r_delete, NEED_USER },
	{ ROUTE_POST, "/api/v1/jobs/{job}/stop", r_stop, NEED_USER },
	{ ROUTE_POST, "/api/v1/jobs/{job}/pause", r_pause, NEED_USER },
	{ ROUTE_POST, "/api/v1/jobs/{job}/resume", r_resume, NEED_USER },
	{ ROUTE_POST, "/api/v1/jobs/{job}/clone", r_clone, NEED_USER },
	{ ROUTE_GET, "/api/v1/jobs/{job}/logs", r_logs, NEED_USER },
	{ ROUTE_GET, "/api/v1/jobs/{job}/metrics", r_metric_list, NEED_USER },
	{ ROUTE_GET, "/api/v1/jobs/{job}/metrics/points", r_metric_points, NEED_USER },
	{ ROUTE_GET, "/api/v1/jobs/{job}/usage", r_usage, NEED_USER },
	{ ROUTE_GET, "/api/v1/jobs/{job}/report", r_report, NEED_USER },
	/* catch-alls, after what they stand behind: unknown parts of a job */
	{ ROUTE_ANY, "/api/v1/jobs/{job}/*", r_no_resource, NEED_USER },
	{ ROUTE_ANY, "/api/v1/jobs/{job}/*/*", r_no_resource, NEED_USER },
	/* the rest of the API: a stranger learns nothing of its shape without a token */
	{ ROUTE_ANY, "/api/v1/**", r_no_resource, NEED_USER },
	{ ROUTE_ANY, "/api/**", r_no_version, NEED_NONE },
	/* the web UI's files and its own routes (#/job/..., /devices) */
	{ ROUTE_GET, "/**", r_asset, NEED_NONE },
};
const size_t api_nroutes = sizeof(api_routes) / sizeof(api_routes[0]);

static int reply_401(struct MHD_Connection *con)
{
	struct sbuf body = SBUF_INIT;
	api_error_json(&body, 401, "a bearer token is required (Authorization: Bearer TOKEN)");
	struct MHD_Response *r = MHD_create_response_from_buffer(body.len, body.buf,
								  MHD_RESPMEM_MUST_COPY);
	sbuf_release(&body);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "application/json");
	MHD_add_response_header(r, "WWW-Authenticate", "Bearer realm=\"trainctl\"");
	int ret = MHD_queue_response(con, 401, r);
	MHD_destroy_response(r);
	return ret;
}

static int dispatch(struct srv *s, struct MHD_Connection *con, const char *url,
		    const char *method, struct req *rq)
{
	struct route_match m;
	route_match(api_routes, api_nroutes, method, url, &m);
	struct api_call c = { .s = s, .con = con, .url = url, .rq = rq };
	const struct route *r = m.route ? m.route : m.resource;
	const char *job = route_param(&m, "job");
	bool have_job = false;
	int ret;
	unsigned st = authenticate(s, con, r ? r->need : NEED_NONE, &c.w);
	if (st == 401) {
		ret = reply_401(con);
	} else if (st) {
		ret = reply_err(con, st, "%s: only an admin may do this", c.w.user);
	} else if (job && find_job(s, con, &c.w, job, &c.job, &ret) != 0) {
		/* answered: bad id, unknown job, or another user's */
	} else {
		have_job = job != NULL;
		if (!m.status) {
			ret = m.route->fn(&c);
		} else if (m.status == 405) {
			struct sbuf allow = SBUF_INIT;
			route_allow_text(m.allow, &allow);
			ret = reply_err(con, 405, "use %s", allow.buf);
			sbuf_release(&allow);
		} else {
			ret = reply_err(con, 404, "no such resource: %s", url);
		}
	}
	if (have_job)
		job_row_release(&c.job);
	free(c.w.user);
	route_match_release(&m);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *con, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	struct srv *s = cls;
	(void)version;
	struct req *rq = *con_cls;
	if (!rq) {
		rq = xcalloc(1, sizeof(*rq));
		sbuf_init(&rq->body, 0);
		*con_cls = rq;
		const char *cl = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Content-Length");
		long n;
		/*
		 * a body over the limit is read and dropped, so that the client
		 * gets its 413; only an absurd one is refused before it is sent
		 */
		if (cl && parse_long(cl, 0, 1L << 62, &n) && n > 64L * TC_SERVER_MAX_BODY) {
			rq->answered = true;
			return reply_err(con, 413, "the body is over %u bytes", TC_SERVER_MAX_BODY) == MHD_YES
				       ? MHD_YES : MHD_NO;
		}
		return MHD_YES;
	}
	if (*upload_size) {
		if (!rq->answered) {
			if (rq->body.len + *upload_size > TC_SERVER_MAX_BODY)
				rq->too_big = true;
			else
				sbuf_add(&rq->body, upload, *upload_size);
		}
		*upload_size = 0;
		return MHD_YES;
	}
	if (rq->answered)
		return MHD_YES;
	rq->answered = true;
	pthread_mutex_lock(&s->mu);
	s->requests++;
	pthread_mutex_unlock(&s->mu);
	return dispatch(s, con, url, method, rq) == MHD_YES ? MHD_YES : MHD_NO;
}

static void on_done(void *cls, struct MHD_Connection *con, void **con_cls,
		    enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)con;
	(void)toe;
	struct req *rq = *con_cls;
	if (rq) {
		sbuf_release(&rq->body);
		free(rq);
		*con_cls = NULL;
	}
}

int api_start(struct srv *s, struct tc_err *err)
{
	const char *listen = s->o.listen;
	const char *colon = strrchr(listen, ':');
	long port;
	if (!colon || !parse_long(colon + 1, 1, 65535, &port))
		return tc_error(err, TC_EUSAGE, "server: --listen must be HOST:PORT, not '%s'", listen);
	struct sbuf host = SBUF_INIT;
	sbuf_add(&host, listen, (size_t)(colon - listen));
	if (!strcmp(host.buf, "localhost")) {
		sbuf_reset(&host);
		sbuf_adds(&host, "127.0.0.1");
	}
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (inet_pton(AF_INET, host.buf, &sa.sin_addr) != 1) {
		int rc = tc_error(err, TC_EUSAGE, "server: '%s' is not an IPv4 address", host.buf);
		sbuf_release(&host);
		return rc;
	}
	sbuf_release(&host);
	s->mhd = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
					  MHD_USE_ERROR_LOG,
				  (uint16_t)port, NULL, NULL, on_request, s,
				  MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
				  MHD_OPTION_NOTIFY_COMPLETED, on_done, s,
				  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)120,
				  MHD_OPTION_CONNECTION_LIMIT, (unsigned int)512,
				  MHD_OPTION_END);
	if (!s->mhd)
		return tc_error_errno(err, TC_ESYS, "server: cannot listen on %s", listen);
	return 0;
}

void api_stop(struct srv *s)
{
	if (s->mhd)
		MHD_stop_daemon(s->mhd);
	s->mhd = NULL;
}
