/*
 * server.h -- `trainctl server`: the platform on one node.  An HTTP API and
 * web UI (libmicrohttpd), a queue and scheduler (sched/sched.h) that starts
 * one detached supervisor per job (`trainctl supervise`, like slurmstepd),
 * and resource telemetry.  The CLI's client is the tool's (cmd/client.h).
 *
 * INVARIANTS
 *  (1) The database is the truth.  The server keeps the active jobs in
 *      memory for the scheduler, but every change is written to the store
 *      first; supervisors write their own changes and the server learns
 *      them from the events table (polled by id), so a server killed with
 *      SIGKILL loses nothing and a restarted one rebuilds its memory from
 *      the store, finding running supervisors by pid and start time.
 *  (2) Supervisors are not the server's children: they are started
 *      detached, in a new session (core/proc.h: proc_start_detached), so
 *      they outlive the server.
 *  (3) A device is held by at most one job, from the scheduler's START until
 *      the job's supervisor is gone.
 *  (4) Every request is validated before it touches anything: bodies over
 *      TC_SERVER_MAX_BODY get 413, malformed JSON or wrong types 400,
 *      unknown jobs 404, another user's job 403; no input crashes the server.
 *  (5) Tokens are stored as SHA-256 hashes and never logged.
 *  (6) Every /api/v1 request proves who sends it (a bearer token, the
 *      session cookie, or the Unix socket's peer), whatever the number of
 *      tokens; Host, Origin and Content-Type are checked before that
 *      (docs/security.md).
 */
#ifndef TC_SERVER_H
#define TC_SERVER_H

#include <stdbool.h>

#include "core/err.h"
#include "core/sbuf.h"

#define TC_SERVER_MAX_BODY (1u << 20)
#define TC_SERVER_DEFAULT_LISTEN "127.0.0.1:8470"
#define TC_SERVER_SOCKET "server.sock" /* in the state folder, unless --socket */
#define TC_SERVER_HUB_SOCKET "hub.sock" /* in the state folder: its supervisors report here */

struct notify_hook;

struct server_quota {
	char *user;
	int max_devices;
};

struct server_opts {
	const char *home;      /* state folder: trainctl.db and runs/ */
	const char *listen;    /* host:port */
	int cpu_slots;         /* cpu "devices" the scheduler hands out; 0 = cores */
	double sample_seconds; /* telemetry period; 0 = 5 */
	struct server_quota *quotas;
	int nquotas;
	const char *exe;       /* the trainctl binary that runs `supervise` */
	bool quiet;            /* no request log on stderr */
	const char *backend;   /* every job's backend (local, slurm); NULL: its spec's */
	/* webhooks of jobs whose spec has no notify: (--notify-file, docs/server.md) */
	const struct notify_hook *notify;
	size_t nnotify;
	const char *const *pass_env; /* more server variables jobs inherit (NULL-terminated) */
	const char *socket;    /* the Unix socket for local clients; NULL: $home/server.sock */
	const char *const *host_names; /* names the Host header may give (--host-name), NULL-terminated */
	unsigned max_connections;      /* TCP connections in all; 0: 512 */
	unsigned max_per_client;       /* TCP connections of one client address; 0: 32 */
	double header_seconds;         /* a request's headers must be in within; 0: 10 */
	size_t body_memory;            /* bytes all request bodies may hold at once; 0: 256 MiB */
	/* --endpoint-host EPHOST: each endpoint a browser opens gets a host name of its
	 * own, JOB-NAME.EPHOST, served by this listener; NULL: none, endpoints are
	 * served on the server's origin to their job's owner only (docs/endpoints.md) */
	const char *endpoint_host;
	/* --behind-https: browsers reach the server over https (a reverse proxy ends
	 * TLS): cookies get the __Host- prefix and Secure, endpoint links https */
	bool behind_https;
	/* --allow-root-jobs: a root server may run a job as root (root's own, the operator's
	 * login); without it such a job is refused at admission and at start (admit.c) */
	bool allow_root_jobs;
	/* --metrics-job-series: per-job series of /metrics at most; 0: 500, < 0: none (prom.c) */
	int metrics_job_series;
	/* --retention: finished jobs that ended longer ago are removed, at start and
	 * hourly (jobs_gc); 0: kept */
	double retention;
	/* --default-max-runtime: limits.max_runtime, seconds, of a job whose spec has none; 0: none */
	long default_max_runtime;
	/* --default-idle-minutes: limits.idle_minutes of an interactive job whose spec has none; 0: none */
	double default_idle_minutes;
	/* --config FILE (absolute), whose teams: section the server reads at start and on a
	 * reload (SIGHUP, `trainctl server reload`; server/teams.h); NULL: no teams */
	const char *config;
	/* --fair-share on|off and --fair-share-half-life: they win over the file's fair_share:
	 * (server/teams.h); fair_share -1 and half-life 0: not given */
	int fair_share;
	double fair_share_half_life;
};

/* --endpoint-host: a lower-case DNS name of two labels or more, not an IP literal (eporigin.c). */
bool server_endpoint_host_ok(const char *text);

/* Run until SIGINT or SIGTERM (jobs keep running).  */
int server_run(const struct server_opts *o, struct tc_err *err);

/* ---- tokens (auth.c) ---- */

/* A new random token for user (printed once), stored hashed in home's database. */
int server_token_create(const char *home, const char *user, bool admin, char **token,
			struct tc_err *err);
/* SHA-256 of token as 64 hex digits into out. */
void server_token_hash(const char *token, struct sbuf *out);

#endif
