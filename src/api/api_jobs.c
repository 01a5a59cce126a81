/*
 * api_jobs.c -- the job endpoints of the HTTP API: submit, list, detail,
 * and the actions (stop, pause, resume, clone, delete) through jobs/;
 * see api_int.h.
 */
#include "server/server_int.h"
#include "api/api_int.h"
#include "server/admit.h"
#include "core/json.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "spec/spec.h"
#include "backend/backend.h"
#include "jobs/jobs.h"

#include <jansson.h>
#include <pwd.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

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
/* A submit or a clone through the admission door (admit.c): 201 with the job. */
static int admit_reply(struct srv *s, struct MHD_Connection *con, const struct admit_req *a)
{
	struct tc_err err = TC_ERR_INIT;
	json_t *brief = NULL;
	unsigned st = srv_admit(s, a, NULL, &brief, &err);
	int ret;
	if (!st)
		ret = reply_jsont(con, 201, brief);
	else if (st >= 500)
		ret = reply_tc(con, &err);
	else
		ret = reply_err(con, st, "%s", err.msg ? err.msg : "refused");
	tc_err_release(&err);
	return ret;
}

void api_submit_release(struct api_submit *a)
{
	free(a->text);
	free(a->file);
	free(a->base);
	free(a->name);
	free(a->team);
	strvec_clear(&a->sets);
	memset(a, 0, sizeof(*a));
}

/* "set": a list of KEY=VALUE strings (their form checked here, their keys by the spec) */
static bool take_sets(json_t *set, struct strvec *out, struct sbuf *why)
{
	size_t i;
	json_t *v;
	if (!set)
		return true;
	if (!json_is_array(set)) {
		sbuf_adds(why, "'set' must be a list of \"KEY=VALUE\" strings");
		return false;
	}
	json_array_foreach(set, i, v) {
		struct tc_err err = TC_ERR_INIT;
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
			sbuf_addf(why, "set[%zu]: must be a \"KEY=VALUE\" string without NUL bytes", i);
		} else if (spec_set_check(json_string_value(v), &err)) {
			sbuf_adds(why, err.msg);
		} else {
			strvec_push(out, json_string_value(v));
			continue;
		}
		tc_err_release(&err);
		strvec_clear(out);
		return false;
	}
	return true;
}

unsigned api_clone_parse(const char *body, size_t len, struct strvec *sets, struct sbuf *why)
{
	*sets = (struct strvec)STRVEC_INIT;
	size_t i = 0;
	while (i < len && (body[i] == ' ' || body[i] == '\t' || body[i] == '\n' || body[i] == '\r'))
		i++;
	if (i == len)
		return 0; /* no body: a plain clone */
	json_error_t je;
	json_t *o = json_loadb(body, len, 0, &je);
	unsigned st = 400;
	if (!o)
		sbuf_addf(why, "malformed JSON at line %d: %s", je.line, je.text);
	else if (!json_is_object(o))
		sbuf_adds(why, "the body must be a JSON object ({\"set\": [\"KEY=VALUE\"]})");
	else if (take_sets(json_object_get(o, "set"), sets, why))
		st = 0;
	json_decref(o);
	return st;
}

unsigned api_submit_parse(const char *body, size_t len, struct api_submit *out, struct sbuf *why)
{
	json_error_t je;
	json_t *o = json_loadb(body, len, 0, &je);
	unsigned st = 400;
	memset(out, 0, sizeof(*out));
	if (!o) {
		sbuf_addf(why, "malformed JSON at line %d: %s", je.line, je.text);
		return 400;
	}
	json_t *spec = json_object_get(o, "spec");
	json_t *base = json_object_get(o, "base");
	json_t *file = json_object_get(o, "file");
	json_t *name = json_object_get(o, "name");
	json_t *team = json_object_get(o, "team");
	const char *b = json_string_value(base);
	if (!json_is_object(o)) {
		sbuf_adds(why, "the body must be a JSON object with a 'spec'");
	} else if ((base && !json_is_string(base)) || (file && !json_is_string(file)) ||
		   (name && !json_is_null(name) && !json_is_string(name))) {
		sbuf_adds(why, "'base', 'file' and 'name' must be strings");
	} else if (team && !json_is_null(team) &&
		   (!json_is_string(team) || strlen(json_string_value(team)) != json_string_length(team))) {
		sbuf_adds(why, "'team' must be a team's name");
	} else if (b && b[0] != '/') {
		sbuf_adds(why, "'base' must be an absolute path");
	} else if (json_is_string(name) && *json_string_value(name) &&
		   (strlen(json_string_value(name)) != json_string_length(name) ||
		    !spec_name_ok(json_string_value(name)))) {
		/* the same rule as the spec's name: it is printed by ps and show */
		sbuf_adds(why, "name: must be 1 to 128 letters, digits, '.', '_' and '-'");
	} else if (!json_is_string(spec) && !json_is_object(spec)) {
		sbuf_adds(why, "'spec' must be the spec text (YAML or JSON) or a JSON object");
	} else if (json_is_string(spec) && strlen(json_string_value(spec)) != json_string_length(spec)) {
		sbuf_adds(why, "spec: holds a NUL byte");
	} else {
		if (json_is_string(spec)) {
			out->text = xstrdup(json_string_value(spec));
		} else {
			/* 0.1 stays 0.1: %.17g would hand the job 0.10000000000000001 */
			char *t = json_dumps_shortest(spec, JSON_COMPACT | JSON_PRESERVE_ORDER);
			out->text = xstrdup(t ? t : "{}");
			free(t);
		}
		out->file = file ? xstrdup(json_string_value(file)) : NULL;
		out->base = b ? xstrdup(b) : NULL;
		if (json_is_string(name) && *json_string_value(name))
			out->name = xstrdup(json_string_value(name));
		if (json_is_string(team) && *json_string_value(team))
			out->team = xstrdup(json_string_value(team));
		out->sets = (struct strvec)STRVEC_INIT;
		if (take_sets(json_object_get(o, "set"), &out->sets, why))
			st = 0;
		else
			api_submit_release(out);
	}
	json_decref(o);
	return st;
}

int h_submit(struct srv *s, struct MHD_Connection *con, const struct who *w,
	     const struct sbuf *body)
{
	struct api_submit a;
	struct sbuf why = SBUF_INIT;
	unsigned st = api_submit_parse(body->buf, body->len, &a, &why);
	int ret;
	if (st) {
		ret = reply_err(con, st, "%s", why.buf);
	} else {
		char *cwd = getcwd(NULL, 0);
		/* the caller's own job, as the caller's account */
		struct admit_req r = { .owner = w->user, .admin = w->admin || w->local,
				       .text = a.text, .file = a.file ? a.file : "spec",
				       .base = a.base ? a.base : (cwd ? cwd : "/"), .name = a.name,
				       .sets = &a.sets, .preemptible = -1, .team = a.team };
		ret = admit_reply(s, con, &r);
		free(cwd);
	}
	sbuf_release(&why);
	api_submit_release(&a);
	return ret;
}

bool api_parse_states(const char *text, unsigned *set, const char **bad, int *badlen)
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

/* The answer of a listing, as store_job_each hands its rows over. */
struct list_out {
	struct sbuf body;
	size_t n;
};

static int list_row(void *arg, const struct job_row *j)
{
	struct list_out *lo = arg;
	if (lo->n++)
		sbuf_addch(&lo->body, ',');
	job_json_brief_text(j, &lo->body);
	return 0;
}

int h_list(struct srv *s, struct MHD_Connection *con, const struct who *w)
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
	if (state && !api_parse_states(state, &states, &bad, &badlen))
		return reply_err(con, 400, "state: '%.*s' is not a job state", badlen, bad);
	if (!w->admin) {
		if (user && *user && strcmp(user, w->user) != 0)
			return reply_err(con, 403, "only an admin may list another user's jobs");
		user = w->user;
	}
	struct store_jfilter f = { states, user && *user ? user : NULL, name && *name ? name : NULL,
				   limit, offset };
	/* each row is written out as it is read: neither the rows nor a tree of them is kept */
	struct list_out lo = { SBUF_INIT, 0 };
	struct tc_err err = TC_ERR_INIT;
	long long total = 0;
	sbuf_adds(&lo.body, "{\"jobs\":[");
	pthread_mutex_lock(&s->list_mu);
	int rc = store_job_each(s->list_st, &f, list_row, &lo, &total, &err);
	pthread_mutex_unlock(&s->list_mu);
	int ret;
	if (rc) {
		ret = reply_tc(con, &err);
	} else {
		sbuf_addf(&lo.body, "],\"total\":%lld,\"limit\":%ld,\"offset\":%ld}", total, limit,
			  offset);
		ret = reply_owned(con, 200, "application/json", &lo.body);
	}
	sbuf_release(&lo.body);
	tc_err_release(&err);
	return ret;
}

int h_detail(struct srv *s, struct MHD_Connection *con, const struct job_row *x)
{
	json_t *o = NULL;
	struct tc_err err = TC_ERR_INIT;
	/* the server follows its jobs itself: no reconcile here */
	pthread_mutex_lock(&s->mu);
	int rc = jobs_show(s->st, x->id, false, &o, &err);
	json_t *waiting = rc ? NULL : srv_waiting_json(s, x->id);
	pthread_mutex_unlock(&s->mu);
	if (waiting)
		json_object_set_new(o, "waiting", waiting);
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
	struct backend_env env = { .home = s->home, .say = srv_say, .say_arg = s };
	return jobs_stop(&env, st, j, JOB_STOP_STOPPED, err);
}

static int delete_outside(struct srv *s, struct store *st, struct job_row *j, struct tc_err *err)
{
	(void)s;
	return jobs_delete(st, j, err);
}

static int h_clone(struct srv *s, struct MHD_Connection *con, const struct who *w,
		   const struct job_row *x, const struct strvec *sets)
{
	char *text = NULL;
	struct tc_err err = TC_ERR_INIT;
	int ret;
	if (jobs_clone_spec(x, &text, &err)) {
		ret = reply_err(con, 409, "%s", err.msg);
	} else {
		/*
		 * A clone is its job's owner's, whoever asks: an admin's clone of
		 * a user's job runs as that user, its files read as that user.
		 */
		bool other = !w->user || !x->user || strcmp(w->user, x->user) != 0;
		struct admit_req r = { .owner = x->user, .admin = w->admin || w->local,
				       .owner_reads = other, .text = text, .file = "spec",
				       .base = x->run_dir, .sets = sets, .preemptible = -1 };
		ret = admit_reply(s, con, &r);
	}
	free(text);
	tc_err_release(&err);
	return ret;
}

int h_clone_body(struct srv *s, struct MHD_Connection *con, const struct who *w,
		 const struct job_row *x, const struct sbuf *body)
{
	struct strvec sets;
	struct sbuf why = SBUF_INIT;
	int ret;
	if (api_clone_parse(body->buf, body->len, &sets, &why))
		ret = reply_err(con, 400, "%s", why.buf);
	else
		ret = h_clone(s, con, w, x, &sets);
	strvec_clear(&sets);
	sbuf_release(&why);
	return ret;
}

int h_action(struct srv *s, struct MHD_Connection *con, const struct who *w,
	     const struct job_row *x, const char *action)
{
	if (!strcmp(action, "clone"))
		return h_clone(s, con, w, x, NULL);
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
		struct passwd pw;
		char *pwbuf = NULL;
		if (!j || j->st != SJ_IDLE) {
			status = 409;
			msg = "only a paused job can be resumed";
		} else if (srv_job_account(s, j->user, &pw, &pwbuf, &err)) {
			/* a resume keeps its owner, and admission's account decision holds now */
			status = 403;
			msg = err.msg;
		} else {
			rc = srv_resume_job(s, j, &err);
		}
		free(pwbuf);
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
		ret = reply_tc(con, &err);
	else
		ret = reply_jsont(con, 200, json_pack("{s:s, s:s, s:b}", "id", x->id, "action", action,
						      "ok", 1));
	tc_err_release(&err);
	return ret;
}
