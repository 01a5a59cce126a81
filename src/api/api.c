/*
 * api.c -- the HTTP API (/api/v1, JSON), /metrics and the web UI, on
 * libmicrohttpd with one thread per connection (so server-sent event
 * streams may block).  Every handler validates its input first (server.h
 * invariant 4); errors are {"error": "..."} with the matching status.
 *
 * This file: who is asking, the route table and its dispatch.  The
 * listeners and a request's life are listen.c, the replies reply.c; the
 * handlers are in api_jobs.c (jobs) and api_data.c (logs, metrics, usage,
 * report, the node).
 */
#include "server/server_int.h"
#include "api/api_int.h"
#include "api/request.h"
#include "core/json.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "hub/hub.h"
#include "gateway/parking.h"

#include <pwd.h>
#include <jansson.h>
#include "core/lazylib.h"
#include "core/reqbody.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

bool srv_token_alive(struct srv *s, const struct who *w)
{
	if (!w->token_hash[0])
		return true;
	char *user = NULL;
	bool admin = false;
	struct tc_err err = TC_ERR_INIT;
	pthread_mutex_lock(&s->mu);
	int rc = store_token_find(s->st, w->token_hash, &user, &admin, &err);
	pthread_mutex_unlock(&s->mu);
	tc_err_release(&err);
	free(user);
	return rc == 0;
}

static int session_lookup(void *arg, const char *sid, struct who *w)
{
	struct srv *s = arg;
	if (sessions_use(s->sessions, SESS_COOKIE, sid, w))
		return -1;
	/* made from a token: the session ends with it (trainctl token revoke) */
	if (!srv_token_alive(s, w)) {
		sessions_drop(s->sessions, sid);
		free(w->user);
		w->user = NULL;
		return -1;
	}
	return 0;
}

static char *uid_name(void *arg, uid_t uid)
{
	(void)arg;
	struct passwd pw, *res = NULL;
	char buf[4096];
	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) != 0 || !res || !res->pw_name)
		return NULL;
	return xstrdup(res->pw_name);
}

static int account_of(void *arg, const char *user)
{
	(void)arg;
	struct passwd pw, *res = NULL;
	char buf[4096];
	if (getpwnam_r(user, &pw, buf, sizeof(buf), &res) != 0 || !res)
		return 1;
	return res->pw_uid == 0 ? 2 : 0;
}

/* 0 with who filled, or an HTTP status (401, 403) */
static unsigned authenticate(struct srv *s, struct MHD_Connection *con, enum route_need need,
			     long peer_uid, struct who *w)
{
	struct auth_req a = { .need = need, .peer_uid = peer_uid, .server_uid = geteuid(),
			      .lookup = token_lookup, .session_lookup = session_lookup,
			      .uid_name = uid_name, .account = account_of, .arg = s };
	a.authorization = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Authorization");
	a.session = MHD_lookup_connection_value(con, MHD_COOKIE_KIND, api_session_cookie(s));
	return server_auth_decide(&a, w);
}

const char *api_session_cookie(const struct srv *s)
{
	/* behind https the __Host- prefix: the browser keeps it host-only and Secure, and takes
	 * no cookie of that name that a sibling host set with a Domain (cookie tossing) */
	return s->o.behind_https ? "__Host-" API_SESSION_COOKIE : API_SESSION_COOKIE;
}

/* ---- the {job} of a path ---- */

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
	int rc = store_job_get_of(s->st, ref, w->admin ? NULL : w->user, out, &err);
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
/* ---- routing: the table and its dispatch (route.h) ---- */

/* One request being answered: what a route's handler gets. */
struct api_call {
	struct srv *s;
	struct MHD_Connection *con;
	const char *url;
	struct api_req *rq;
	struct who w;          /* the caller, for routes that need one */
	struct job_row job;    /* the path's {job}, found and visible to w */
	const char *sweep;     /* the path's {sweep}, as given */
	const char *team;      /* the path's {team}, as given */
	const char *secret;    /* the path's {secret}, as given */
	const char *endpoint;  /* the path's {ep}, as given */
	const char *method;
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

/* ---- the hub of the server's Slurm jobs (hub/hub.h): the job's secret, not a token ---- */

#define HUB_MAX_BODY (64u << 20) /* a batch of events: a metrics batch is megabytes */
#define HUB_MAX_RDZV_BODY (64u << 10) /* a rendezvous request: a few names */

/* "/api/v1/hub/JOB/..." -> JOB (heap) */
static char *hub_job_of(const char *url)
{
	const char *p = url + strlen("/api/v1/hub/");
	return xstrndup(p, strcspn(p, "/"));
}

static int r_hub_events(struct api_call *c)
{
	if (c->rq->too_big)
		return reply_err(c->con, 413, "the batch is over %u bytes", HUB_MAX_BODY);
	struct tc_err err = TC_ERR_INIT;
	struct hub *h = srv_hub(c->s, &err);
	int ret;
	if (!h) {
		ret = reply_err(c->con, 503, "%s", err.msg);
	} else {
		char *job = hub_job_of(c->url);
		ret = hub_http_answer(h, c->con, job, c->rq->body.data.buf, c->rq->body.data.len);
		free(job);
	}
	tc_err_release(&err);
	return ret;
}

static int r_hub_status(struct api_call *c)
{
	struct tc_err err = TC_ERR_INIT;
	struct hub *h = srv_hub(c->s, &err);
	int ret;
	if (!h) {
		ret = reply_err(c->con, 503, "%s", err.msg);
	} else {
		char *job = hub_job_of(c->url);
		ret = hub_http_status(h, c->con, job);
		free(job);
	}
	tc_err_release(&err);
	return ret;
}

/* A node's rendezvous: join, heartbeat; the driver's open (hub/rdzv.h). */
static int r_hub_rdzv(struct api_call *c)
{
	struct tc_err err = TC_ERR_INIT;
	struct hub *h = srv_hub(c->s, &err);
	int ret;
	if (c->rq->too_big) {
		ret = reply_err(c->con, 413, "a rendezvous request is over %u bytes", HUB_MAX_RDZV_BODY);
	} else if (!h) {
		ret = reply_err(c->con, 503, "%s", err.msg);
	} else {
		char *job = hub_job_of(c->url);
		ret = hub_http_rdzv(h, c->con, job, c->rq->body.data.buf, c->rq->body.data.len);
		free(job);
	}
	tc_err_release(&err);
	return ret;
}

/* A node parks a connection for its endpoint (gateway/parking.h). */
static int r_hub_relay(struct api_call *c)
{
	char *job = hub_job_of(c->url);
	int ret = relay_answer(c->s, c->con, job, c->endpoint, c->rq->gc);
	free(job);
	return ret;
}

static int r_submit(struct api_call *c)
{
	if (c->rq->too_big)
		return reply_err(c->con, 413, "the body is over %u bytes", TC_SERVER_MAX_BODY);
	return h_submit(c->s, c->con, &c->w, &c->rq->body.data);
}

/* The handlers keep their own signatures; the table reaches them through these. */

/*
 * /metrics needs no credentials; an admin's (a token, or the operator on
 * the socket) also gets the series that name jobs and users.  Credentials
 * given but not good are a 401, not a quietly shorter answer.
 */
static int r_prometheus(struct api_call *c)
{
	struct who w;
	const char *auth = MHD_lookup_connection_value(c->con, MHD_HEADER_KIND, "Authorization");
	unsigned st = authenticate(c->s, c->con, NEED_USER, c->rq->peer_uid, &w);
	int ret;
	if (st == 401 && auth)
		ret = reply_err(c->con, 401, "/metrics: unknown credentials (an admin token, or none)");
	else
		/* a 403 here is a root server's "no account to run jobs as": nothing runs for a read */
		ret = h_prometheus(c->s, c->con, (!st || st == 403) && (w.admin || w.local));
	free(w.user);
	return ret;
}
static int r_asset(struct api_call *c) { return serve_asset(c->con, c->url); }
static int r_info(struct api_call *c) { return h_info(c->s, c->con); }
static int r_devices(struct api_call *c) { return h_devices(c->s, c->con, &c->w); }
static int r_events(struct api_call *c) { return stream_events(c->s, c->con, &c->w); }
static int r_list(struct api_call *c) { return h_list(c->s, c->con, &c->w); }
static int r_detail(struct api_call *c) { return h_detail(c->s, c->con, &c->job); }
static int r_delete(struct api_call *c) { return h_action(c->s, c->con, &c->w, &c->job, "delete"); }
static int r_stop(struct api_call *c) { return h_action(c->s, c->con, &c->w, &c->job, "stop"); }
static int r_pause(struct api_call *c) { return h_action(c->s, c->con, &c->w, &c->job, "pause"); }
static int r_resume(struct api_call *c) { return h_action(c->s, c->con, &c->w, &c->job, "resume"); }
static int r_clone(struct api_call *c)
{
	if (c->rq->too_big)
		return reply_err(c->con, 413, "the body is over %u bytes", TC_SERVER_MAX_BODY);
	return h_clone_body(c->s, c->con, &c->w, &c->job, &c->rq->body.data);
}
static int r_logs(struct api_call *c) { return h_logs(c->s, c->con, &c->job); }
static int r_metric_list(struct api_call *c) { return h_metric_list(c->s, c->con, &c->job); }
static int r_metric_points(struct api_call *c) { return h_metric_points(c->s, c->con, &c->job); }
static int r_metric_records(struct api_call *c) { return h_metric_records(c->s, c->con, &c->job); }
static int r_metric_series(struct api_call *c) { return h_metric_series(c->s, c->con, &c->job); }
static int r_checkpoints(struct api_call *c) { return h_checkpoints(c->s, c->con, &c->job); }
static int r_usage(struct api_call *c) { return h_usage(c->s, c->con, &c->job); }
static int r_report(struct api_call *c) { return h_report(c->con, &c->job); }
static int r_endpoint_list(struct api_call *c) { return proxy_list(c->s, c->con, &c->job); }

static int r_usage_report(struct api_call *c) { return h_usage_report(c->s, c->con, &c->w); }
static int r_teams(struct api_call *c) { return h_teams(c->s, c->con, c->team, &c->w); }
static int r_queue(struct api_call *c) { return h_queue(c->s, c->con, &c->w); }
static int r_reload(struct api_call *c) { return h_reload(c->s, c->con); }

static int r_sweeps(struct api_call *c) { return h_sweep_list(c->s, c->con, &c->w); }
static int r_sweep_submit(struct api_call *c)
{
	if (c->rq->too_big)
		return reply_err(c->con, 413, "the body is over %u bytes", TC_SERVER_MAX_BODY);
	return h_sweep_submit(c->s, c->con, &c->w, &c->rq->body.data);
}
static int r_sweep_detail(struct api_call *c)
{
	return h_sweep_detail(c->s, c->con, &c->w, c->sweep);
}
static int r_sweep_stop(struct api_call *c)
{
	return h_sweep_stop(c->s, c->con, &c->w, c->sweep);
}
static int r_secrets(struct api_call *c)
{
	return h_secret_list(c->s, c->con, &c->w);
}
static int r_secret_put(struct api_call *c)
{
	if (c->rq->too_big)
		return reply_err(c->con, 413, "the body is over %u bytes", TC_SERVER_MAX_BODY);
	return h_secret_put(c->s, c->con, &c->w, c->secret, &c->rq->body.data);
}
static int r_secret_delete(struct api_call *c)
{
	return h_secret_delete(c->s, c->con, &c->w, c->secret);
}

/* Set-Cookie for a session secret, or (NULL) one that ends it. */
static int reply_cookie(const struct srv *s, struct MHD_Connection *con, unsigned status,
			const char *location, const char *secret, const char *json)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(json), (void *)json,
								  MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	struct sbuf ck = SBUF_INIT;
	/*
	 * HttpOnly: no script reads it; SameSite=Strict: no other site's page
	 * sends it; no Domain: this host alone, never an endpoint's host name
	 * (eporigin.c); Secure behind https (and the __Host- prefix)
	 */
	sbuf_addf(&ck, "%s=%s; Path=/; HttpOnly; SameSite=Strict; Max-Age=%d%s",
		  api_session_cookie(s), secret ? secret : "", secret ? API_SESSION_SECONDS : 0,
		  s->o.behind_https ? "; Secure" : "");
	MHD_add_response_header(r, "Content-Type", "application/json");
	MHD_add_response_header(r, "Cache-Control", "no-store");
	MHD_add_response_header(r, "Set-Cookie", ck.buf);
	if (location)
		MHD_add_response_header(r, "Location", location);
	api_page_headers(r);
	int ret = MHD_queue_response(con, status, r);
	MHD_destroy_response(r);
	sbuf_release(&ck);
	return ret;
}

/* A session cookie for w: 0 with the reply queued in *ret. */
static int start_session(struct api_call *c, const struct who *w, unsigned status,
			 const char *location)
{
	char *secret = NULL;
	struct tc_err err = TC_ERR_INIT;
	int ret;
	if (sessions_add(c->s->sessions, SESS_COOKIE, w, API_SESSION_SECONDS, &secret, &err)) {
		ret = reply_tc(c->con, &err);
	} else {
		struct sbuf b = SBUF_INIT;
		api_whoami_json(&b, w);
		ret = reply_cookie(c->s, c->con, status, location, secret, b.buf);
		sbuf_release(&b);
	}
	free(secret);
	tc_err_release(&err);
	return ret;
}

/*
 * GET /login?ticket=T: a one-time ticket (printed at start, or from POST
 * /api/v1/login) becomes a session cookie, then the UI.  A link on another
 * site may not log a browser in (login CSRF).
 */
static int r_login(struct api_call *c)
{
	const char *t = arg_of(c->con, "ticket");
	const char *site = MHD_lookup_connection_value(c->con, MHD_HEADER_KIND, "Sec-Fetch-Site");
	struct who w = { 0 };
	/* another site, or a job's endpoint host on ours (same-site): it could log you in as
	 * someone else (login CSRF), so only a link opened directly or from the UI counts */
	if (!api_fetch_site_ok(site))
		return reply_err(c->con, 403, "a login link must be opened directly, not from another"
				 " site or page (Sec-Fetch-Site: %s)", site);
	if (!t || sessions_use(c->s->sessions, SESS_TICKET, t, &w) != 0)
		return serve_login_refused(c->con, "this login link was used already or has expired:"
					   " `trainctl token login` on the server's machine prints a new one");
	int ret = start_session(c, &w, 303, "/");
	free(w.user);
	return ret;
}

/* POST /api/v1/session: the caller's credentials (a token) become a cookie, for the UI. */
static int r_session_new(struct api_call *c)
{
	/* c->w.token_hash (server_auth_decide): the session ends with its token */
	return start_session(c, &c->w, 200, NULL);
}

/* DELETE /api/v1/session: log out. */
static int r_session_end(struct api_call *c)
{
	const char *sid = MHD_lookup_connection_value(c->con, MHD_COOKIE_KIND,
						      api_session_cookie(c->s));
	if (sid)
		sessions_drop(c->s->sessions, sid);
	return reply_cookie(c->s, c->con, 200, NULL, NULL, "{\"ok\":true}");
}

/* POST /api/v1/login: a one-time login URL for the caller, valid 5 minutes. */
static int r_login_ticket(struct api_call *c)
{
	char *t = NULL;
	struct tc_err err = TC_ERR_INIT;
	int ret;
	if (sessions_add(c->s->sessions, SESS_TICKET, &c->w, 300, &t, &err)) {
		ret = reply_tc(c->con, &err);
	} else {
		struct sbuf b = SBUF_INIT;
		sbuf_addf(&b, "{\"path\":\"/login?ticket=%s\",\"expires_in\":300}", t);
		ret = reply_json(c->con, 201, b.buf);
		sbuf_release(&b);
	}
	free(t);
	tc_err_release(&err);
	return ret;
}

/* /jobs/{job}/endpoints/{ep}/...: the job's endpoint (proxy.c) */
static int r_endpoint(struct api_call *c)
{
	if (c->rq->too_big)
		return reply_err(c->con, 413, "the body is over %u bytes", TC_SERVER_MAX_BODY);
	struct proxy_req r = { .job = &c->job, .name = c->endpoint, .raw_uri = c->rq->raw_uri,
			       .method = c->method, .body = c->rq->body.data.buf,
			       .body_len = c->rq->body.data.len,
			       .gc = c->rq->gc };
	/* a browser never runs a job's pages in this origin (eporigin.c) */
	bool owner = c->w.user && c->job.user && !strcmp(c->w.user, c->job.user);
	switch (eporigin_decide(eporigin_on(c->s), c->w.via, owner)) {
	case EP_REDIRECT:
		return eporigin_redirect(c->s, c->con, &c->w, &r);
	case EP_REFUSE:
		return reply_err(c->con, 403, "job %s is %s's: without a host name of its own an"
				 " endpoint's pages run with your session, so the server serves them"
				 " to their owner only (trainctl server --endpoint-host NAME gives each"
				 " endpoint its own host name)", c->job.id, c->job.user);
	case EP_PROXY:
		break;
	}
	return proxy_answer(c->s, c->con, &r);
}

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
	/* the server's Slurm jobs report here: the job's secret, checked by the hub */
	{ ROUTE_POST, "/api/v1/hub/{hubjob}/events", r_hub_events, NEED_NONE },
	{ ROUTE_GET, "/api/v1/hub/{hubjob}/status", r_hub_status, NEED_NONE },
	{ ROUTE_POST, "/api/v1/hub/{hubjob}/rdzv", r_hub_rdzv, NEED_NONE },
	{ ROUTE_GET, "/api/v1/hub/{hubjob}/relay/{ep}", r_hub_relay, NEED_NONE },
	{ ROUTE_POST, "/api/v1/session", r_session_new, NEED_USER },
	{ ROUTE_DELETE, "/api/v1/session", r_session_end, NEED_USER },
	{ ROUTE_POST, "/api/v1/login", r_login_ticket, NEED_USER },
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
	{ ROUTE_GET, "/api/v1/jobs/{job}/metrics/records", r_metric_records, NEED_USER },
	{ ROUTE_GET, "/api/v1/jobs/{job}/metrics/series", r_metric_series, NEED_USER },
	{ ROUTE_GET, "/api/v1/jobs/{job}/checkpoints", r_checkpoints, NEED_USER },
	{ ROUTE_GET, "/api/v1/jobs/{job}/usage", r_usage, NEED_USER },
	{ ROUTE_GET, "/api/v1/jobs/{job}/report", r_report, NEED_USER },
	{ ROUTE_GET, "/api/v1/jobs/{job}/endpoints", r_endpoint_list, NEED_USER },
	{ ROUTE_GET, "/api/v1/usage", r_usage_report, NEED_USER },
	{ ROUTE_GET, "/api/v1/queue", r_queue, NEED_USER },
	{ ROUTE_GET, "/api/v1/teams", r_teams, NEED_USER },
	{ ROUTE_GET, "/api/v1/teams/{team}", r_teams, NEED_USER },
	{ ROUTE_POST, "/api/v1/server/reload", r_reload, NEED_ADMIN },
	{ ROUTE_GET, "/api/v1/sweeps", r_sweeps, NEED_USER },
	{ ROUTE_POST, "/api/v1/sweeps", r_sweep_submit, NEED_USER },
	{ ROUTE_GET, "/api/v1/sweeps/{sweep}", r_sweep_detail, NEED_USER },
	{ ROUTE_POST, "/api/v1/sweeps/{sweep}/stop", r_sweep_stop, NEED_USER },
	/* the caller's own secrets, whoever it is (names only are ever answered) */
	{ ROUTE_GET, "/api/v1/secrets", r_secrets, NEED_USER },
	{ ROUTE_POST, "/api/v1/secrets/{secret}", r_secret_put, NEED_USER },
	{ ROUTE_DELETE, "/api/v1/secrets/{secret}", r_secret_delete, NEED_USER },
	/* catch-alls, after what they stand behind: unknown parts of a job */
	{ ROUTE_ANY, "/api/v1/jobs/{job}/*", r_no_resource, NEED_USER },
	{ ROUTE_ANY, "/api/v1/jobs/{job}/*/*", r_no_resource, NEED_USER },
	/* the rest of the API: a stranger learns nothing of its shape without a token */
	{ ROUTE_ANY, "/api/v1/**", r_no_resource, NEED_USER },
	{ ROUTE_ANY, "/api/**", r_no_version, NEED_NONE },
	{ ROUTE_GET, "/login", r_login, NEED_NONE },
	/* a job's endpoints (docs/endpoints.md): its owner or an admin, through the proxy */
	{ ROUTE_ANY, "/jobs/{job}/endpoints/{ep}/**", r_endpoint, NEED_USER },
	/* the web UI's files and its own routes (#/job/..., /devices) */
	{ ROUTE_GET, "/**", r_asset, NEED_NONE },
};
const size_t api_nroutes = sizeof(api_routes) / sizeof(api_routes[0]);

static int reply_401(struct MHD_Connection *con)
{
	struct sbuf body = SBUF_INIT;
	api_error_json(&body, 401,
		       "a valid bearer token is required (Authorization: Bearer TOKEN; the trainctl"
		       " CLI sends $TRAINCTL_TOKEN; `trainctl token create --user NAME` makes one)");
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

/*
 * The most bytes of a body a route keeps; 0: it takes none (a short one
 * is read and dropped, a longer one refused).
 */
static size_t body_cap(const struct route *r)
{
	if (!r)
		return 0;
	if (r->fn == r_hub_events)
		return HUB_MAX_BODY;
	if (r->fn == r_hub_rdzv)
		return HUB_MAX_RDZV_BODY;
	if (r->fn == r_submit || r->fn == r_clone || r->fn == r_sweep_submit ||
	    r->fn == r_secret_put || r->fn == r_endpoint)
		return TC_SERVER_MAX_BODY;
	return 0;
}

const char api_budget_spent[] = "the server holds as many request bodies as its memory"
				   " budget allows (--body-memory): try again shortly";

/* A hub batch's headers (hub_check_batch): 0, or a refusal with *msg. */
static unsigned hub_secret_refusal(struct srv *s, struct MHD_Connection *con,
				   const struct route_match *m, char **msg)
{
	struct tc_err err = TC_ERR_INIT;
	struct hub *h = srv_hub(s, &err);
	int status = 503;
	if (!h) {
		*msg = xstrdup(err.msg ? err.msg : "hub: not running");
	} else {
		const char *secret = MHD_lookup_connection_value(con, MHD_HEADER_KIND,
								 "X-Trainctl-Hub-Secret");
		const char *stream = MHD_lookup_connection_value(con, MHD_GET_ARGUMENT_KIND,
								 "stream");
		status = m->route->fn == r_hub_rdzv
				 ? hub_check_rdzv(h, route_param(m, "hubjob"), secret, msg)
				 : hub_check_batch(h, route_param(m, "hubjob"), secret, stream, msg);
	}
	tc_err_release(&err);
	return (unsigned)status;
}

/*
 * On the headers, before a byte of the body is kept: the route, who asks,
 * a hub route's job secret, and room for the body (its route's cap, the
 * server's budget: reqbody.h).  A refusal leaves rq->auth or rq->refuse;
 * *now says to answer it at once, the body unread (a long or unsaid one),
 * rather than once a short body was read and dropped.
 */
void api_decide(struct srv *s, struct MHD_Connection *con, const char *url,
		const char *method, struct api_req *rq, bool *now)
{
	route_match(api_routes, api_nroutes, method, url, &rq->m);
	rq->decided = true;
	const struct route *r = rq->m.route ? rq->m.route : rq->m.resource;
	long long declared = reqbody_declared(
		MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Content-Length"),
		MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Transfer-Encoding"));
	*now = false;
	rq->auth = authenticate(s, con, r ? r->need : NEED_NONE, rq->peer_uid, &rq->w);
	if (!rq->auth && !rq->m.status && (rq->m.route->fn == r_hub_events ||
					   rq->m.route->fn == r_hub_rdzv))
		rq->refuse = hub_secret_refusal(s, con, &rq->m, &rq->refuse_msg);
	if (rq->auth || rq->refuse) {
		*now = !reqbody_drains(declared);
		return;
	}
	size_t cap = rq->m.status ? 0 : body_cap(rq->m.route);
	unsigned st = reqbody_admit(&rq->body, cap, declared, now);
	if (st == 413) {
		rq->too_big = true;
	} else if (st) {
		rq->refuse = st;
		rq->refuse_msg = xstrdup(api_budget_spent);
	}
}

/*
 * An endpoint host's request: its cookie passed on the headers
 * (eporigin_claim), so its body may take room, the server's budget too.
 * *now as decide's.
 */
void api_decide_endpoint(struct MHD_Connection *con, struct api_req *rq, bool *now)
{
	long long declared = reqbody_declared(
		MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Content-Length"),
		MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Transfer-Encoding"));
	unsigned st = reqbody_admit(&rq->body, TC_SERVER_MAX_BODY, declared, now);
	if (st == 413) {
		rq->too_big = true;
	} else if (st) {
		rq->refuse = st;
		rq->refuse_msg = xstrdup(api_budget_spent);
	}
}

/* The answer to a request refused on its headers (decide) or by its body's size. */
int api_reply_refused(struct MHD_Connection *con, const struct api_req *rq, const char *url)
{
	if (rq->auth == 401)
		return reply_401(con);
	if (rq->auth && rq->w.refusal)
		return reply_err(con, rq->auth, "user '%s' %s", rq->w.user ? rq->w.user : "?",
				 rq->w.refusal);
	if (rq->auth)
		return reply_err(con, rq->auth, "%s: only an admin may do this", rq->w.user);
	if (rq->refuse)
		return reply_err(con, rq->refuse, "%s", rq->refuse_msg);
	if (rq->too_big && !body_cap(rq->m.route))
		return reply_err(con, 413, "%s takes no request body (at most %zu bytes are read and"
				 " dropped)", url, (size_t)REQBODY_DRAIN_MAX);
	return reply_err(con, 413, "the body is over %zu bytes", body_cap(rq->m.route));
}

int api_dispatch(struct srv *s, struct MHD_Connection *con, const char *url,
		 const char *method, struct api_req *rq)
{
	const struct route_match *m = &rq->m;
	if (rq->auth || rq->refuse || (rq->too_big && !body_cap(m->route)))
		return api_reply_refused(con, rq, url);
	struct api_call c = { .s = s, .con = con, .url = url, .rq = rq, .w = rq->w,
			      .sweep = route_param(m, "sweep"), .secret = route_param(m, "secret"),
			      .endpoint = route_param(m, "ep"), .method = method,
			      .team = route_param(m, "team") };
	const char *job = route_param(m, "job");
	bool have_job = false;
	int ret;
	if (job && find_job(s, con, &c.w, job, &c.job, &ret) != 0) {
		/* answered: bad id, unknown job, or another user's */
	} else {
		have_job = job != NULL;
		if (!m->status) {
			ret = m->route->fn(&c);
		} else if (m->status == 405) {
			struct sbuf allow = SBUF_INIT;
			route_allow_text(m->allow, &allow);
			ret = reply_err(con, 405, "use %s", allow.buf);
			sbuf_release(&allow);
		} else {
			ret = reply_err(con, 404, "no such resource: %s", url);
		}
	}
	if (have_job)
		job_row_release(&c.job);
	return ret;
}
