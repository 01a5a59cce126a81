/*
 * endpoint.h -- a job's endpoints (docs/endpoints.md): services that run
 * beside its workers (Jupyter, TensorBoard, a command of the user's) and
 * that `trainctl server` proxies under /jobs/JOB/endpoints/NAME/.
 *
 * NOTES ON THE DESIGN
 * (1) A kind is one row of a table (endpoint_kinds, endpoint.c): how its
 *     command line is made from the port, the base path and the job's
 *     folders, and how the proxy talks to it.  A new kind is a new row (and
 *     its build function, in its own file when it is long: ssh.c).  The
 *     spec's endpoints: key (spec/endpoint_rules.c) checks kinds and keys
 *     against the table, so a kind without a row is refused by name.
 * (2) Each endpoint is a sidecar: one child started through core/proc by
 *     the job's supervisor, in its own process group, as the job's user,
 *     with the workers' environment (less the per-rank variables) and cwd.
 *     In a job with image: that child is the runtime's client running the
 *     endpoint in a container of the image (endpoint_opts.wrap), so it
 *     gets the image's programs and libraries, as the workers do; a kind
 *     marked on_host stays on the host (ssh: its sessions enter the rank's
 *     container themselves).  A program the image lacks is the endpoint's
 *     failure naming the image and the program, never a host fallback.
 *     It listens on 127.0.0.1 only, on a port trainctl picks
 *     (sock_free_port).  The proxy is the way in; a kind that can
 *     check a token is given one (secret, in its environment, never its
 *     argv) and the proxy presents it, so other local accounts that reach
 *     the port get nothing.
 * (3) It lives as long as the job, across restarts: started with the
 *     first attempt's workers, stopped (SIGTERM to its group, SIGKILL after
 *     the job's grace_seconds) when the job ends.  If the supervisor is
 *     killed, its watchdog kills the group, like the workers'.
 * (4) Where it listens and in what state (jobs/state.h: enum
 *     endpoint_state, its diagram and its words) is one row of
 *     job_endpoints (store.h: struct store_endpoint), written through the
 *     job's sink (hub/sink.h: sink_endpoint), so a supervisor that reports
 *     to a hub never opens the database.
 * (5) Activity, for limits.idle_minutes (launch/idle.c): a kind whose use
 *     trainctl can see has an activity function in its row: Jupyter is
 *     asked through its own REST API with the endpoint's token (activity.c),
 *     ssh counts the open connections to its sshd (ssh.c).  The supervisor
 *     asks from a thread of its own, so a probe gets copies
 *     (endpoint_probes), never the set.
 *
 * Ownership: struct endpoint_set owns its children's records and strings;
 * endpoint_set_free(NULL) is a no-op.  Nothing here prints: messages go to
 * the say callback.
 */
#ifndef TC_ENDPOINT_H
#define TC_ENDPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/err.h"
#include "core/strvec.h"

struct proc;
struct spec;
struct spec_endpoint;
struct sink;
struct endpoint_probe;

/* What a kind's build function knows of the endpoint it makes. */
struct endpoint_ctx {
	const struct spec_endpoint *ep; /* the spec's entry (name, kind, command, ...) */
	const char *job_id;
	int port;               /* where it must listen, on 127.0.0.1 */
	const char *base_path;  /* "/jobs/JOB/endpoints/NAME/" (with both slashes) */
	const char *run_dir;    /* the job's run folder */
	const char *tb_dir;     /* its TensorBoard folder (metrics/ingest.h writes there) */
	const char *workdir;    /* the workers' cwd */
	const char *secret;     /* 32 hex digits when the kind takes a token, else NULL */
};

/* The process a build function describes: argv and what it adds to the job's environment. */
struct endpoint_cmd {
	struct strvec argv;
	struct strvec env; /* "K=V", set over the job's environment */
};

/* Keys of a spec entry besides name and kind (spec/endpoint_rules.c). */
enum {
	ENDPOINT_KEY_COMMAND = 1,    /* command: (a shell command; $PORT is the port) */
	ENDPOINT_KEY_PORT = 2,       /* port: a fixed port instead of a free one */
	ENDPOINT_KEY_PUBLIC_KEY = 4, /* public_key: (ssh) */
};

struct endpoint_kind {
	const char *name;
	unsigned keys;          /* ENDPOINT_KEY_* an entry of this kind may give */
	unsigned needs;         /* ... and must give */
	bool http;              /* proxied by the server (ssh is a TCP service: false) */
	bool strip_prefix;      /* the proxy sends "/rest", not "/jobs/J/endpoints/N/rest" */
	/* the request header the proxy presents the secret in, printf form of the
	 * value ("token %s"), NULL: the kind takes no token */
	const char *auth_header, *auth_value;
	const char *not_yet;    /* non-NULL: refused with this reason (not built yet) */
	bool on_host;           /* runs on the host in an image job too (endpoint_opts.wrap) */
	/* the program its build runs, checked at submit like the spec's command
	 * (spec_check_command); also_in: a folder looked in besides PATH; NULL: none */
	const char *program, *also_in;
	/* Fill cmd for c; 0 or a negative TC_E* with err set. */
	int (*build)(const struct endpoint_ctx *c, struct endpoint_cmd *cmd, struct tc_err *err);
	/*
	 * Note 5: when p was last used, wall seconds, into *last (now: in use
	 * now; 0: no sign of use); 0 or a negative TC_E* with err set when it
	 * cannot be asked.  NULL: its use is not seen.
	 */
	int (*activity)(const struct endpoint_probe *p, double now, double *last, struct tc_err *err);
};
/* The ssh row's build and activity (endpoint/ssh.c, endpoint/ssh.h). */
int endpoint_build_ssh(const struct endpoint_ctx *c, struct endpoint_cmd *cmd, struct tc_err *err);
int endpoint_ssh_activity(const struct endpoint_probe *p, double now, double *last,
			  struct tc_err *err);

/* The row of kind name, or NULL. */
const struct endpoint_kind *endpoint_kind_find(const char *name);
/* "jupyter, tensorboard, generic, ssh": the kinds with a row that is built, for messages. */
const char *endpoint_kind_names(void);
/* "jupyter or ssh": the kinds whose activity is seen (note 5), for messages. */
const char *endpoint_idle_kind_names(void);
/* Build cmd for c through its kind's row (argv unit-tested per kind). */
int endpoint_build(const struct endpoint_ctx *c, struct endpoint_cmd *cmd, struct tc_err *err);
void endpoint_cmd_clear(struct endpoint_cmd *cmd);
/* "/jobs/JOB/endpoints/NAME/" (heap). */
char *endpoint_base_path(const char *job_id, const char *name);

/*
 * A job's endpoints (store rows) as JSON for the API and the CLI: an array
 * of {name, kind, state, host, port, path, url, note}; path is the proxy's
 * ("/jobs/JOB/endpoints/NAME/", null for a kind that is not HTTP).  url:
 * base_url + path when base_url is given (a server's), else the local
 * address (http://127.0.0.1:PORT/..., with the kind's token as Jupyter
 * takes it when with_secret).  Secrets appear only so.  New reference.
 */
struct store_endpoint;
struct json_t *endpoint_list_json(const char *job_id, const struct store_endpoint *v, size_t n,
				  const char *base_url, bool with_secret);

/* ---- the sidecars of one job (the supervisor's side) ---- */

struct endpoint_opts {
	const struct spec *s;
	const char *job_id, *run_dir, *log_dir, *tb_dir;
	const struct strvec *env; /* the job's environment (the workers' common part) */
	struct sink *sink;        /* where the rows go */
	/* the host its rows name: NULL for "127.0.0.1" (the server's own); a node's name
	 * when the server reaches it through the node's relay (endpoint/relay.h) */
	const char *host;
	void (*say)(void *ctx, const char *msg); /* warnings and news, one line each */
	void *say_ctx;
	/* a new process group to kill should the supervisor die (its watchdog) */
	void (*watch)(void *ctx, pid_t pgid);
	void *watch_ctx;
	/*
	 * A job with image: (NULL: every endpoint runs on the host).  wrap
	 * makes p (argv, env, cwd) the runtime's client running it in the
	 * image in a container of the endpoint's own (launch/container_hook.c);
	 * gone is told when that endpoint's process has ended, and whether it
	 * was killed (a killed client leaves its container running).  In the
	 * container the program is looked up first: one the image lacks ends
	 * it with status 127, recorded failed with image and program named.
	 */
	const char *image;
	int (*wrap)(void *ctx, const char *name, struct proc *p, struct tc_err *err);
	void (*gone)(void *ctx, const char *name, bool killed);
	void *wrap_ctx;
};

struct endpoint_set;

/*
 * Start every endpoint of o->s (none: *out is NULL).  One that cannot
 * start (its program missing, no port) is recorded failed and said, never
 * the job's failure; so this fails only when the store does.  Each child's
 * log is logs/endpoint-NAME.log.
 */
int endpoint_start_all(const struct endpoint_opts *o, struct endpoint_set **out,
		       struct tc_err *err);
/* The process groups of the running sidecars, for a watchdog; n returned. */
size_t endpoint_groups(const struct endpoint_set *es, pid_t *out, size_t max);
/*
 * The running endpoints that are HTTP services: their names (es's) and
 * ports, at most max; how many.
 */
size_t endpoint_http_running(const struct endpoint_set *es, const char **names, int *ports,
			     size_t max);
/*
 * A child the supervisor reaped (waitpid(-1)): true when it was one of
 * ours, which is recorded exited with status.
 */
bool endpoint_reaped(struct endpoint_set *es, pid_t pid, int status);
/* ---- activity (note 5) ---- */

/* One running endpoint whose kind sees activity: copies, for another thread. */
struct endpoint_probe {
	const struct endpoint_kind *kind;
	char *name;
	char *base_path; /* "/jobs/JOB/endpoints/NAME/" */
	char *secret;    /* its token, or NULL */
	int port;        /* on 127.0.0.1 */
};
/* The running endpoints whose kind has an activity function, copied into out (at most max). */
size_t endpoint_probes(const struct endpoint_set *es, struct endpoint_probe *out, size_t max);
void endpoint_probe_release(struct endpoint_probe *p);
/* p's kind's activity function (endpoint_kind.activity). */
int endpoint_activity(const struct endpoint_probe *p, double now, double *last,
		      struct tc_err *err);
/* The Jupyter row's (activity.c). */
int endpoint_jupyter_activity(const struct endpoint_probe *p, double now, double *last,
			      struct tc_err *err);
/*
 * Pure parts of it (unit-tested): the newest activity in the answers of
 * GET api/status and GET api/kernels (either may be NULL): their
 * last_activity times, and now when a kernel's execution_state is busy.
 * 0 when neither says anything; -1 when one is not the JSON Jupyter sends.
 */
int endpoint_jupyter_parse(const char *status, const char *kernels, double now, double *last);
/* An ISO 8601 UTC time as Jupyter writes it ("2026-11-29T01:02:03.123456Z") -> epoch seconds. */
bool endpoint_iso_time(const char *s, double *out);

/*
 * Stop them all: SIGTERM to each group, SIGKILL after grace_seconds, every
 * child reaped, each recorded stopped.  Then free es.
 */
void endpoint_stop_all(struct endpoint_set *es, int grace_seconds);

#endif
