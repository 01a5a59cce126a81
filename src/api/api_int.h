/*
 * api_int.h -- private to src/api/ and src/gateway/: what the routing
 * (api.c), the request handlers (api_jobs.c, api_data.c), the event streams (stream.c),
 * the web assets (assets.c) and the auth decisions (auth.c) share.  The
 * functions that build answers without libmicrohttpd are declared here for
 * the unit tests (test_server.c).
 */
#ifndef TC_API_INT_H
#define TC_API_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "api/reply.h"
#include "api/route.h"
#include "backend/names.h"
#include "server/server_int.h"

struct MHD_Connection;
struct json_t;

#define API_SESSION_COOKIE "trainctl_session"
#define API_SESSION_SECONDS (7 * 24 * 3600)

/* How a caller proved who they are. */
enum auth_via { AUTH_VIA_NONE, AUTH_VIA_TOKEN, AUTH_VIA_SESSION, AUTH_VIA_PEER };

/* The caller of a request: a token's user, a session's, or the Unix socket's peer. */
struct who {
	char *user;
	bool admin;
	bool local;            /* the server's operator: the socket's root or own account, or the
				* login URL printed at start (their sessions too) */
	enum auth_via via;
	const char *refusal;   /* with a 403 from server_auth_decide: why (static text) */
	char token_hash[65];   /* the token a session was made from ("" for none): revoking it ends it */
};

/* ---- auth.c: who is asking, and what they may see (pure) ---- */

/* What a request carries and what the server knows, for server_auth_decide. */
struct auth_req {
	enum route_need need;
	const char *authorization; /* the Authorization header, or NULL */
	const char *session;       /* the trainctl_session cookie, or NULL */
	long peer_uid;             /* the Unix socket's peer (SO_PEERCRED), or -1 over TCP */
	uid_t server_uid;          /* the server's effective uid */
	/* 0 with *user (heap) and *admin for a known token, nonzero for an unknown one */
	int (*lookup)(void *arg, const char *token, char **user, bool *admin);
	/* 0 with w's user (heap), admin and local for a live session, nonzero otherwise */
	int (*session_lookup)(void *arg, const char *sid, struct who *w);
	/* the account name of uid (heap), or NULL */
	char *(*uid_name)(void *arg, uid_t uid);
	/* 0: user has an account that is not root; 1: no account; 2: it is root */
	int (*account)(void *arg, const char *user);
	void *arg;
};
/*
 * 0 with w filled, or the status to answer: 401 (no credentials, or
 * unknown ones) or 403 (w->refusal says why when it is not "an admin is
 * needed"; w says who asked).  w->user is a heap copy the caller frees
 * (NULL for NEED_NONE and on 401).  The credentials, in order: a bearer
 * token in the Authorization header (never the URL), the session cookie,
 * the Unix socket's peer.  There is no mode without them: how many tokens
 * exist changes nothing (finding 10).
 */
unsigned server_auth_decide(const struct auth_req *a, struct who *w);
/* Letters, digits, '.', '_', '-'; 1 to 64 (a token's --user). */
bool server_user_name_ok(const char *user);

/* Sessions (a cookie) and one-time tickets (the login URL), in memory. */
enum sess_kind { SESS_COOKIE, SESS_TICKET };
struct sessions;
struct sessions *sessions_new(void);
void sessions_free(struct sessions *ss);
/*
 * A new secret (64 hex digits, heap) for w, valid ttl s (0: until used or
 * the server stops); w->token_hash goes with it.
 */
int sessions_add(struct sessions *ss, enum sess_kind kind, const struct who *w, double ttl,
		 char **secret, struct tc_err *err);
/* 0 with w's user (heap), admin, local and token_hash, or -1; a ticket is used up. */
int sessions_use(struct sessions *ss, enum sess_kind kind, const char *secret, struct who *w);
void sessions_drop(struct sessions *ss, const char *secret);

/* ---- guard.c: checks before the caller is asked for (pure) and connection limits ---- */

/* Does a Host header name this server (listen port; names: --host-name, NULL-terminated)? */
bool api_host_ok(const char *host_header, long listen_port, const char *const *names);
/* Is a request with this Origin (or none) same-origin with Host? */
bool api_origin_ok(const char *origin, const char *host_header);
/* Is a state-changing request's Sec-Fetch-Site (or none) our own origin's or the user's own? */
bool api_fetch_site_ok(const char *site);
/* Is a Content-Type application/json or application/x-ndjson (parameters allowed)? */
bool api_json_type_ok(const char *ctype);
/* POST, PUT, PATCH, DELETE, ...: not GET, HEAD or OPTIONS. */
bool api_method_changes(const char *method);
struct guard;
struct gconn;
struct sockaddr;
struct guard *guard_new(unsigned max_total, unsigned max_client, double header_deadline);
int guard_start(struct guard *g);
void guard_free(struct guard *g);
/* A connection opened (sa NULL or not IP: the Unix socket, never counted) / closed. */
struct gconn *guard_open(struct guard *g, int fd, const struct sockaddr *sa);
/* guard_open for a libmicrohttpd connection (listen.c); ip false: the Unix socket's. */
struct gconn *guard_open_con(struct guard *g, struct MHD_Connection *con, bool ip);
void guard_close(struct guard *g, struct gconn *c);
/* A request's headers are in (busy) / it was answered (waiting for the next one's). */
void guard_busy(struct guard *g, struct gconn *c, bool busy);
/* Over the limits: answer 503 with Retry-After. */
bool guard_full(struct guard *g, struct gconn *c);
/* The connection is a stream now (an upgraded WebSocket): no header deadline for it. */
void guard_forget(struct guard *g, struct gconn *c);

/* ---- proxy.c: /jobs/{job}/endpoints/{name}/... into a job's endpoint ---- */

struct proxy_req {
	const struct job_row *job; /* found, and the caller may see it */
	const char *name;          /* the path's endpoint name */
	const char *raw_uri;       /* the request target as sent (not decoded), with its query */
	const char *method;
	const char *body;          /* the request's body (read whole, up to the API's limit) */
	size_t body_len;
	struct gconn *gc;          /* its connection (guard.c) */
	int origin_id;             /* the endpoint host it came in on (eporigin.c), 0: the API's */
};
/* Answer r through the job's endpoint (HTTP, or a WebSocket pumped until it closes). */
int proxy_answer(struct srv *s, struct MHD_Connection *con, const struct proxy_req *r);
/* GET /api/v1/jobs/{job}/endpoints: {"endpoints": [...]} (endpoint_list_json, no secrets). */
int proxy_list(struct srv *s, struct MHD_Connection *con, const struct job_row *job);
/* Shut down every pumped WebSocket (the server stops). */
void proxy_stop_all(void);
/* "/jobs/J/endpoints/N/rest?q" -> "/rest?q" (heap, "" for none); -1 when not such a path. */
int proxy_split_uri(const char *raw, char **rest);
/* Request headers that never reach an endpoint: hop-by-hop ones and the caller's credentials. */
bool proxy_header_dropped(const char *name);
/* A Cookie header less trainctl's own cookies (the session's, an endpoint's), appended to out. */
void proxy_cookie_filter(const char *cookie, struct sbuf *out);

/*
 * Is job's endpoint (r) one the proxy would answer (recorded, an HTTP
 * service, running on this host, its job not ended)?  0, or the refusal
 * is queued in *ret (404, 400, 503, 502).
 */
int proxy_endpoint_ready(struct srv *s, struct MHD_Connection *con, const struct proxy_req *r,
			 int *ret);
/* Shut down the WebSockets that came in on endpoint host id (it is forgotten, eporigin.c). */
void proxy_stop_origin(int id);
/* May an endpoint's answer carry this Set-Cookie value?  Not one of trainctl's cookies (its
 * name compared without case, spaces or TABs), and only one scoped to the endpoint's host. */
bool proxy_set_cookie_ok(const char *value);

/* ---- eporigin.c: one host name per endpoint (--endpoint-host EPHOST) ---- */

#define EPORIGIN_COOKIE "trainctl_endpoint"
#define EPORIGIN_KEY_BYTES 32
#define EPORIGIN_TICKET_SECONDS 60          /* a ticket's life: the redirect's */
#define EPORIGIN_COOKIE_SECONDS (12 * 3600) /* an endpoint cookie's */

/* How the API's host answers /jobs/J/endpoints/N/... */
enum ep_route {
	EP_PROXY,    /* proxied here: a script's token or socket, or the owner's browser without
		      * --endpoint-host */
	EP_REDIRECT, /* a browser, with --endpoint-host: on to the endpoint's own host name */
	EP_REFUSE,   /* a browser of an admin who is not the owner, without --endpoint-host */
};
enum ep_route eporigin_decide(bool own_origins, enum auth_via via, bool owner);
/* JOB-NAME, the label of job's endpoint name, to out: 0, or -1 when it is no DNS label. */
int eporigin_label(const char *job, const char *name, struct sbuf *out);
/* Does the Host header name LABEL.ephost?  1 with the label (lower case) in *label; 0: another
 * host (the API's); -1: under ephost but no label of ours (a dot in it, a bad port, junk). */
int eporigin_host_label(const char *host_header, const char *ephost, struct sbuf *label);
/* The cookie's value (HEX(user).ADMIN.EXPIRES.TOKEN.MAC) of w for job's endpoint name at the
 * host label, to out.  TOKEN: w's token hash, or "-". */
void eporigin_cookie_make(const unsigned char *key, const struct who *w, long long expires,
			  const char *job, const char *name, const char *label, struct sbuf *out);
/* 0 with w (user heap, admin, token_hash) when value is a live cookie of this endpoint at this
 * label, or -1. */
int eporigin_cookie_check(const unsigned char *key, const char *value, const char *job,
			  const char *name, const char *label, double now, struct who *w);
/* http(s)://LABEL.EPHOST[:PORT]/.trainctl/enter?ticket=T, PORT from the request's Host header. */
void eporigin_location(bool https, const char *label, const char *ephost, const char *host_header,
		       const char *ticket, struct sbuf *out);
/* With o.endpoint_host: the key and the reaper (hosts are made when first opened). */
int eporigin_start(struct srv *s, struct tc_err *err);
void eporigin_stop(struct srv *s);
bool eporigin_on(const struct srv *s);
/* A browser's GET of r on the API's host: 302 to the endpoint's host with a new ticket. */
int eporigin_redirect(struct srv *s, struct MHD_Connection *con, const struct who *w,
		      const struct proxy_req *r);
/*
 * A request whose Host is an endpoint host, checked on its headers alone
 * (the host, Origin, the path, the endpoint cookie): 0 with *q NULL (not an
 * endpoint host: the API's checks apply) or *q set (answer it with
 * eporigin_answer once its body is in, then eporigin_req_free), or 1 with
 * the refusal queued in *ret.
 */
struct epreq;
int eporigin_claim(struct srv *s, struct MHD_Connection *con, const char *url, const char *method,
		   struct epreq **q, int *ret);
int eporigin_answer(struct srv *s, struct MHD_Connection *con, const struct epreq *q,
		    const char *method, const char *raw_uri, const char *body, size_t body_len,
		    bool too_big, struct gconn *gc);
void eporigin_req_free(struct epreq *q);
/* The API's session cookie's name: __Host-trainctl_session behind https, else trainctl_session. */
const char *api_session_cookie(const struct srv *s);

/* May w see and act on a job owned by owner?  Admins may, users their own. */
bool server_may_see(const struct who *w, const char *owner);
/* Whether the token a session or endpoint cookie was made from is still
 * there (true for one made without a token): revoking it ends them. */
bool srv_token_alive(struct srv *s, const struct who *w);

/* {"user": ..., "admin": ...}: GET /api/v1/whoami. */
void api_whoami_json(struct sbuf *out, const struct who *w);
/* POST /api/v1/jobs's body: {"spec": text or object, "file", "base", "name", "set"}. */
struct api_submit {
	char *text; /* the spec, YAML or JSON text without NUL bytes */
	char *file; /* the name it is parsed under, or NULL ("spec") */
	char *base; /* absolute folder its relative paths start from, or NULL */
	char *name; /* a name replacing the spec's, or NULL */
	struct strvec sets; /* "set": ["KEY=VALUE", ...] overrides (spec_parse_set) */
	char *team; /* "team": the team asked for (--team), or NULL */
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
/* Every point of one metric of one rank: its logged step, value and wall time. */
int h_metric_records(struct srv *s, struct MHD_Connection *con, const struct job_row *x);
/* every point of a job's series (?name, ?rank) and its checkpoints, as source.h writes them */
int h_metric_series(struct srv *s, struct MHD_Connection *con, const struct job_row *x);
int h_checkpoints(struct srv *s, struct MHD_Connection *con, const struct job_row *x);
int h_usage(struct srv *s, struct MHD_Connection *con, const struct job_row *x);
int h_report(struct MHD_Connection *con, const struct job_row *x);
int h_devices(struct srv *s, struct MHD_Connection *con, const struct who *w);
/* GET /api/v1/usage?since=&until=&by=&user=: usage_report_json; not an admin: their own only */
int h_usage_report(struct srv *s, struct MHD_Connection *con, const struct who *w);
/* api_sweeps.c: POST/GET /api/v1/sweeps, GET /api/v1/sweeps/{sweep}, POST .../stop */
int h_sweep_submit(struct srv *s, struct MHD_Connection *con, const struct who *w,
		   const struct sbuf *body);
int h_sweep_list(struct srv *s, struct MHD_Connection *con, const struct who *w);
int h_sweep_detail(struct srv *s, struct MHD_Connection *con, const struct who *w, const char *ref);
int h_sweep_stop(struct srv *s, struct MHD_Connection *con, const struct who *w, const char *ref);
/* api_teams.c: GET /api/v1/teams, /api/v1/teams/{team}; POST /api/v1/server/reload (admin) */
int h_teams(struct srv *s, struct MHD_Connection *con, const char *team, const struct who *w);
/* GET /api/v1/queue: the local queue in order, each job's reason (srv_queue_json). */
int h_queue(struct srv *s, struct MHD_Connection *con, const struct who *w);
int h_reload(struct srv *s, struct MHD_Connection *con);
/*
 * prom.c: GET /metrics; full adds the series that name jobs and users
 * (admins and the operator only).
 */
int h_prometheus(struct srv *s, struct MHD_Connection *con, bool full);
/* api_secrets.c: the caller's own secrets (names only ever listed) */
int h_secret_list(struct srv *s, struct MHD_Connection *con, const struct who *w);
int h_secret_put(struct srv *s, struct MHD_Connection *con, const struct who *w, const char *name,
		 const struct sbuf *body);
int h_secret_delete(struct srv *s, struct MHD_Connection *con, const struct who *w,
		    const char *name);

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
/* 403 for a refused login link: a page for a browser (Accept: text/html), else msg as JSON. */
int serve_login_refused(struct MHD_Connection *con, const char *msg);

#endif
