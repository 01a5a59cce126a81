/*
 * api_int.h -- private to src/server/: what the routing (api.c), the
 * request handlers (api_jobs.c, api_data.c), the event streams (stream.c),
 * the web assets (assets.c) and the auth decisions (auth.c) share.  The
 * functions that build answers without libmicrohttpd are declared here for
 * the unit tests (test_server.c).
 */
#ifndef TC_SERVER_API_INT_H
#define TC_SERVER_API_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "server/route.h"
#include "backend/names.h"
#include "server/server_int.h"

struct MHD_Connection;
struct json_t;

/* The caller of a request: token's user, or the local admin without tokens. */
struct who {
	char *user;
	bool admin;
};

/* ---- auth.c: who is asking, and what they may see (pure) ---- */

/* What a request carries and what the server knows, for server_auth_decide. */
struct auth_req {
	enum route_need need;
	long long ntokens;         /* tokens in the store */
	const char *os_user;       /* the caller while there are no tokens (the local admin) */
	const char *authorization; /* the Authorization header, or NULL */
	const char *token_arg;     /* ?token= (EventSource cannot set headers), or NULL */
	/* 0 with *user (heap) and *admin for a known token, nonzero for an unknown one */
	int (*lookup)(void *arg, const char *token, char **user, bool *admin);
	void *arg;
};
/*
 * 0 with w filled, or the status to answer: 401 (no token, or an unknown
 * one) or 403 (an admin is needed; w says who asked).  w->user is a heap
 * copy the caller frees (NULL for NEED_NONE and on 401).  Without tokens
 * everyone is the local admin, as the server then listens on loopback
 * only (server_run).
 */
unsigned server_auth_decide(const struct auth_req *a, struct who *w);
/* May w see and act on a job owned by owner?  Admins may, users their own. */
bool server_may_see(const struct who *w, const char *owner);

/* Replies return MHD_YES / MHD_NO. */
int reply_raw(struct MHD_Connection *con, unsigned status, const char *type, const char *body,
	      size_t len);
int reply_json(struct MHD_Connection *con, unsigned status, const char *json);
/* A body built in an sbuf, handed to MHD without a copy (body is left empty). */
int reply_owned(struct MHD_Connection *con, unsigned status, const char *type,
		struct sbuf *body);
int reply_err(struct MHD_Connection *con, unsigned status, const char *fmt, ...) TC_PRINTF(3, 4);
/* err as an error answer, with the status of its code (api_status_of). */
int reply_tc(struct MHD_Connection *con, const struct tc_err *err);
/* o as the JSON answer; takes the reference to o. */
int reply_jsont(struct MHD_Connection *con, unsigned status, struct json_t *o);
/* {"error": msg, "status": status}: the body of every error answer. */
void api_error_json(struct sbuf *out, unsigned status, const char *msg);
/* The HTTP status of a TC_E* code: 404 not found, 400 the caller's fault, else 500. */
unsigned api_status_of(int code);
/* {"user": ..., "admin": ...}: GET /api/v1/whoami. */
void api_whoami_json(struct sbuf *out, const struct who *w);
/* POST /api/v1/jobs's body: {"spec": text or object, "file", "base", "name", "set"}. */
struct api_submit {
	char *text; /* the spec, YAML or JSON text without NUL bytes */
	char *file; /* the name it is parsed under, or NULL ("spec") */
	char *base; /* absolute folder its relative paths start from, or NULL */
	char *name; /* a name replacing the spec's, or NULL */
	struct strvec sets; /* "set": ["KEY=VALUE", ...] overrides (spec_parse_set) */
};
/*
 * A function of the body's bytes (pure, for the tests and the fuzzer): 0
 * with out filled (release it), or the status to answer (400) with why
 * holding the message; out is then empty.
 */
unsigned api_submit_parse(const char *body, size_t len, struct api_submit *out, struct sbuf *why);
void api_submit_release(struct api_submit *a);
/*
 * The body of POST /api/v1/jobs/{job}/clone: empty, {} or {"set": [...]};
 * 0 with sets filled (clear it), or 400 with why.
 */
unsigned api_clone_parse(const char *body, size_t len, struct strvec *sets, struct sbuf *why);
/* Is id a job reference (id, prefix or name) that may be looked up at all? */
bool api_id_ok(const char *id);
const char *arg_of(struct MHD_Connection *con, const char *key);
bool arg_long(struct MHD_Connection *con, const char *key, long min, long max, long def,
	      long *out);
/* arg_long on a value (decoded by libmicrohttpd): pure, for the fuzzer. */
bool api_arg_long(const char *v, long min, long max, long def, long *out);
/* ?state=a,b: a set of states (1u << JOB_*); false naming the first word that is not one. */
bool api_parse_states(const char *text, unsigned *set, const char **bad, int *badlen);

/* ---- info.c: GET /api/v1/info ---- */

#define API_NBACKENDS BACKEND_COUNT /* in enum backend_id order */
/* What the server found of Slurm (h_info looks on each request). */
struct backend_probe {
	bool have_sbatch; /* on PATH */
	bool have_conf;   /* $SLURM_CONF, else /etc/slurm/slurm.conf, exists */
};
struct api_backend_info {
	const char *name;
	bool available;  /* a job submitted here may use it */
	bool multi_node; /* runs jobs with nodes > 1 */
	const char *why; /* why it is not available, or NULL */
};
/* The backends a job may use on a server started with --backend forced (or NULL). */
void api_backends(const char *forced, const struct backend_probe *p,
		  struct api_backend_info out[API_NBACKENDS]);
/* {"version", "states": [{"name", "terminal", "active"}], "backends": [{"name", ...}]} */
void api_info_json(struct sbuf *out, const struct api_backend_info *b, size_t nb);
int h_info(struct srv *s, struct MHD_Connection *con);

/*
 * The handlers, reached through the route table (api.c), which has already
 * checked the caller and found the path's job x, visible to that caller.
 */
/* api_jobs.c: submit, list, detail; action is stop, pause, resume, clone or delete */
int h_submit(struct srv *s, struct MHD_Connection *con, const struct who *w,
	     const struct sbuf *body);
int h_list(struct srv *s, struct MHD_Connection *con, const struct who *w);
int h_detail(struct srv *s, struct MHD_Connection *con, const struct job_row *x);
int h_action(struct srv *s, struct MHD_Connection *con, const struct who *w,
	     const struct job_row *x, const char *action);
/* clone with the request's body (api_clone_parse: --set overrides) */
int h_clone_body(struct srv *s, struct MHD_Connection *con, const struct who *w,
		 const struct job_row *x, const struct sbuf *body);
/* api_data.c: a job's logs, metrics, usage and report; the node's devices and /metrics */
int h_logs(struct srv *s, struct MHD_Connection *con, const struct job_row *x);
int h_metric_list(struct srv *s, struct MHD_Connection *con, const struct job_row *x);
int h_metric_points(struct srv *s, struct MHD_Connection *con, const struct job_row *x);
int h_usage(struct srv *s, struct MHD_Connection *con, const struct job_row *x);
int h_report(struct MHD_Connection *con, const struct job_row *x);
int h_devices(struct srv *s, struct MHD_Connection *con);
/* api_sweeps.c: POST/GET /api/v1/sweeps, GET /api/v1/sweeps/{sweep}, POST .../stop */
int h_sweep_submit(struct srv *s, struct MHD_Connection *con, const struct who *w,
		   const struct sbuf *body);
int h_sweep_list(struct srv *s, struct MHD_Connection *con, const struct who *w);
int h_sweep_detail(struct srv *s, struct MHD_Connection *con, const struct who *w, const char *ref);
int h_sweep_stop(struct srv *s, struct MHD_Connection *con, const struct who *w, const char *ref);
int h_prometheus(struct srv *s, struct MHD_Connection *con);

/* The route table (api.c): every endpoint, in matching order (route.h). */
extern const struct route api_routes[];
extern const size_t api_nroutes;

/* stream.c: server-sent events */
int stream_logs(struct srv *s, struct MHD_Connection *con, const struct job_row *x, int rank,
		long tail);
int stream_events(struct srv *s, struct MHD_Connection *con, const struct who *w);
/* One log line as an event: data: {"rank": rank, "line": "..."} */
void sse_log_line(struct sbuf *out, int rank, const char *line, size_t len);
/* One state change as an event: id, event: state, data: {"id", "job", ...} */
void sse_state_event(struct sbuf *out, const struct store_event *ev);

/* assets.c: the web UI, embedded at build time */
int serve_asset(struct MHD_Connection *con, const char *url);
struct MHD_Response;
/* CSP, X-Frame-Options, nosniff, Referrer-Policy: on every answer (finding 16). */
void api_page_headers(struct MHD_Response *r);

#endif
