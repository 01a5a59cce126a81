/*
 * api.c -- the HTTP API (/api/v1, JSON), /metrics and the web UI, on
 * libmicrohttpd with one thread per connection (so server-sent event
 * streams may block).  Every handler validates its input first (server.h
 * invariant 4); errors are {"error": "..."} with the matching status.
 *
 * This file: the replies, who is asking, the route table and its
 * dispatch, and the daemon.  The handlers are in api_jobs.c (jobs) and
 * api_data.c (logs, metrics, usage, report, the node).
 */
#include "server/server_int.h"
#include "server/api_int.h"
#include "core/json.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "hub/hub.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include "core/lazylib.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
	api_page_headers(r);
	int ret = MHD_queue_response(con, status, r);
	MHD_destroy_response(r);
	return ret;
}

int reply_owned(struct MHD_Connection *con, unsigned status, const char *type,
		struct sbuf *body)
{
	size_t len = body->len;
	char *buf = sbuf_detach(body);
	struct MHD_Response *r = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(buf);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", type);
	MHD_add_response_header(r, "Cache-Control", "no-store");
	api_page_headers(r);
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

int reply_tc(struct MHD_Connection *con, const struct tc_err *err)
{
	unsigned st = api_status_of(err->code);
	const char *msg = err->msg ? err->msg : tc_code_name(err->code);
	if (st < 500)
		return reply_err(con, st, "%s", msg);
	/* the server's own failure: the details (paths of its state) go to its log */
	fprintf(stderr, "trainctl server: %s\n", msg);
	return reply_err(con, st, "the server failed (%s): its log says more",
			 tc_code_name(err->code));
}

int reply_jsont(struct MHD_Connection *con, unsigned status, json_t *o)
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
	return api_arg_long(arg_of(con, key), min, max, def, out);
}

bool api_arg_long(const char *v, long min, long max, long def, long *out)
{
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
	const char *sweep;     /* the path's {sweep}, as given */
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

static struct hub *api_hub; /* its own store connection, made on first use */
static pthread_mutex_t api_hub_mu = PTHREAD_MUTEX_INITIALIZER;

static struct hub *hub_of(struct srv *s, struct tc_err *err)
{
	pthread_mutex_lock(&api_hub_mu);
	if (!api_hub && hub_new(s->home, &api_hub, err))
		api_hub = NULL;
	struct hub *h = api_hub;
	pthread_mutex_unlock(&api_hub_mu);
	return h;
}

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
	struct hub *h = hub_of(c->s, &err);
	int ret;
	if (!h) {
		ret = reply_err(c->con, 503, "%s", err.msg);
	} else {
		char *job = hub_job_of(c->url);
		ret = hub_http_answer(h, c->con, job, c->rq->body.buf ? c->rq->body.buf : "",
				      c->rq->body.len);
		free(job);
	}
	tc_err_release(&err);
	return ret;
}

static int r_hub_status(struct api_call *c)
{
	struct tc_err err = TC_ERR_INIT;
	struct hub *h = hub_of(c->s, &err);
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
static int r_clone(struct api_call *c)
{
	if (c->rq->too_big)
		return reply_err(c->con, 413, "the body is over %u bytes", TC_SERVER_MAX_BODY);
	return h_clone_body(c->s, c->con, &c->w, &c->job, &c->rq->body);
}
static int r_logs(struct api_call *c) { return h_logs(c->s, c->con, &c->job); }
static int r_metric_list(struct api_call *c) { return h_metric_list(c->s, c->con, &c->job); }
static int r_metric_points(struct api_call *c) { return h_metric_points(c->s, c->con, &c->job); }
static int r_usage(struct api_call *c) { return h_usage(c->s, c->con, &c->job); }
static int r_report(struct api_call *c) { return h_report(c->con, &c->job); }

static int r_sweeps(struct api_call *c) { return h_sweep_list(c->s, c->con, &c->w); }
static int r_sweep_submit(struct api_call *c)
{
	if (c->rq->too_big)
		return reply_err(c->con, 413, "the body is over %u bytes", TC_SERVER_MAX_BODY);
	return h_sweep_submit(c->s, c->con, &c->w, &c->rq->body);
}
static int r_sweep_detail(struct api_call *c)
{
	return h_sweep_detail(c->s, c->con, &c->w, c->sweep);
}
static int r_sweep_stop(struct api_call *c)
{
	return h_sweep_stop(c->s, c->con, &c->w, c->sweep);
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
	{ ROUTE_GET, "/api/v1/sweeps", r_sweeps, NEED_USER },
	{ ROUTE_POST, "/api/v1/sweeps", r_sweep_submit, NEED_USER },
	{ ROUTE_GET, "/api/v1/sweeps/{sweep}", r_sweep_detail, NEED_USER },
	{ ROUTE_POST, "/api/v1/sweeps/{sweep}/stop", r_sweep_stop, NEED_USER },
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

static int dispatch(struct srv *s, struct MHD_Connection *con, const char *url,
		    const char *method, struct req *rq)
{
	struct route_match m;
	route_match(api_routes, api_nroutes, method, url, &m);
	struct api_call c = { .s = s, .con = con, .url = url, .rq = rq,
			      .sweep = route_param(&m, "sweep") };
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

static size_t body_limit(const char *url)
{
	return strncmp(url, "/api/v1/hub/", 12) ? TC_SERVER_MAX_BODY : HUB_MAX_BODY;
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
		if (cl && parse_long(cl, 0, 1L << 62, &n) && n > 64L * (long)body_limit(url)) {
			rq->answered = true;
			return reply_err(con, 413, "the body is over %u bytes", TC_SERVER_MAX_BODY) == MHD_YES
				       ? MHD_YES : MHD_NO;
		}
		return MHD_YES;
	}
	if (*upload_size) {
		if (!rq->answered) {
			if (rq->body.len + *upload_size > body_limit(url))
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

/* libmicrohttpd's own messages, ours in form; none while starting (api_start says why it failed) */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	const struct srv *s = cls;
	if (!s->mhd)
		return;
	struct sbuf sb = SBUF_INIT;
	sbuf_adds(&sb, "trainctl server: ");
	sbuf_vaddf(&sb, fmt, ap);
	if (!sb.len || sb.buf[sb.len - 1] != '\n')
		sbuf_addch(&sb, '\n');
	if (write_all(STDERR_FILENO, sb.buf, sb.len) < 0)
		errno = 0;
	sbuf_release(&sb);
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
				  MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
				  MHD_OPTION_END);
	if (!s->mhd && errno == EADDRINUSE)
		return tc_error(err, TC_ESYS,
				"server: cannot listen on %s: the port is in use (another server?"
				" --listen HOST:PORT picks another)", listen);
	if (!s->mhd)
		return tc_error_errno(err, TC_ESYS, "server: cannot listen on %s", listen);
	return 0;
}

void api_stop(struct srv *s)
{
	if (s->mhd)
		MHD_stop_daemon(s->mhd);
	s->mhd = NULL;
	pthread_mutex_lock(&api_hub_mu);
	hub_free(api_hub);
	api_hub = NULL;
	pthread_mutex_unlock(&api_hub_mu);
}
