/*
 * hub.h -- the one writer of a job and the channel supervisors elsewhere
 * report to it through (sink.h explains the roles).
 *
 * NOTES ON THE DESIGN
 * (1) Transport: HTTP/1.1, one POST per batch of events, JSON lines
 *     (event.c lists them):
 *         POST {url}/api/v1/hub/{job}/events?stream={stream}
 *         X-Trainctl-Hub-Secret: {secret}
 *     answered 200 {"acked":N}, N being the highest sequence number of
 *     (job, stream) the hub has applied.  A reviewer knows it; curl can
 *     replay it; libcurl (client) and libmicrohttpd (hub) are already in
 *     the binary; batching makes the per-request cost small (bench/hub_bench.py).
 * (2) Durability: a remote sink appends every event to its journal
 *     (journal_dir/{stream}.jsonl, fdatasync'd before each send) and then
 *     sends it; it resends from the last acknowledged sequence number after
 *     any failure: a hub restart or SIGKILL, a network cut.  The hub applies
 *     a batch and records the stream's acknowledged sequence number in one
 *     transaction, skipping what it already applied: each event is applied
 *     exactly once.
 * (3) A stream is one process's journal (one node supervisor's attempt, one
 *     driver): a process starts a new stream, so sequence numbers never
 *     restart within one.
 * (4) Authentication: a per-job secret (64 hex digits, from /dev/urandom),
 *     given to the job's processes in the environment of its batch script
 *     (TRAINCTL_HUB_SECRET) or a 0600 file, never in argv.  The hub keeps
 *     only its SHA-256 (store: hub_jobs) and compares in constant time.
 * (5) A sink's close waits for the hub to acknowledge everything, at most
 *     wait_s seconds (TRAINCTL_HUB_WAIT, default 180): a hub that comes
 *     back in that time catches up; the journal stays on the node either
 *     way, and a hub that comes back later pulls it (hub_flush_main, run
 *     on the job's nodes by slurm_hub.c, and by a restarted server as the
 *     job's account: backend.h, backend_pull_start) or, on its own host
 *     (`trainctl server`), reads it from the run folder (hub_ingest_journals).
 */
#ifndef TC_HUB_H
#define TC_HUB_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "core/err.h"
#include "core/sbuf.h"
#include "hub/sink.h"

/* ---- the sending side ---- */

struct hub_remote_opts {
	const char *url;         /* http://ADDR:PORT of the hub */
	const char *secret;      /* the job's secret */
	const char *job_id;
	const char *stream;      /* unique per process (note 3): "node1.a0", "driver.123" */
	const char *journal_dir; /* created when missing */
	const char *unix_path;   /* the hub's Unix socket (url is then http://localhost), or NULL */
	int wait_s;              /* note 5; <= 0: HUB_WAIT_DEFAULT */
	int max_batch;           /* bytes per POST; <= 0: 4 MiB */
	void (*warn)(void *ctx, const char *msg); /* each kind of trouble once; may be NULL */
	void *warn_ctx;
};

#define HUB_WAIT_DEFAULT 180 /* seconds (note 5) */

int sink_remote_open(const struct hub_remote_opts *o, struct sink **out, struct tc_err *err);
/* A remote sink's stream name (note 3: "node1.a0..."); NULL for a direct sink. */
const char *sink_remote_stream(const struct sink *k);
/* Counters of a remote sink (tests, benchmarks): events appended and acknowledged. */
void sink_remote_counts(const struct sink *k, long long *appended, long long *acked);
/*
 * The remote sink the environment names (TRAINCTL_HUB_URL, TRAINCTL_HUB_SECRET
 * or TRAINCTL_HUB_SECRET_FILE, and TRAINCTL_HUB_SOCKET when the hub is
 * reached over a Unix socket), journalled under home/journal/<job>/ (or in
 * $TRAINCTL_HUB_JOURNAL: a root server's job of another account); *out
 * stays NULL when TRAINCTL_HUB_URL is not set.
 */
int sink_from_env(const char *home, const char *job_id, const char *stream,
		  void (*warn)(void *, const char *), void *warn_ctx, struct sink **out,
		  struct tc_err *err);

/*
 * `trainctl hub JOB --flush`, run on a node by a hub that came back after
 * the job ended: send every journal of the job that no live process holds
 * (home/journal/<job>/) to the hub of the environment, waiting at most
 * TRAINCTL_HUB_WAIT seconds; *left: how many journals were not taken whole.
 */
int hub_flush_main(const char *home, const char *job_id, int *left, struct tc_err *err);

/*
 * Ask the hub of the environment (TRAINCTL_HUB_URL, the secret) what the
 * job's record says: why it was asked to stop and the restarts spent.
 * GET {url}/api/v1/hub/{job}/status, answered {"stop":WORD|null,"restarts":N,
 * "state":WORD, "rdzv":{...}} ("rdzv": the job's rendezvous round, rdzv.h,
 * when it has one).  An error when the hub does not answer within timeout_s.
 */
int hub_job_status(const char *job, int timeout_s, enum job_stop *stop, int *restarts,
		   struct tc_err *err);
/*
 * The whole answer (*out, the caller's): the members above, "ckpts", the
 * job's complete checkpoint records, oldest step first (the members of
 * struct store_ckpt), for a supervisor that resumes a job run before, and
 * "node_ckpts", [[node, step, name], ...], each node's complete records of
 * its own disk, for a node that rotates its copies (launch/nodeckpt.c).
 */
int hub_job_status_json(const char *job, int timeout_s, json_t **out, struct tc_err *err);
/*
 * GET {url}/api/v1/hub/{job}/report: the job's report (report/report.h:
 * report_build) from the hub's records, for a supervisor with no database
 * to write report.json (a hub on a Unix socket of `trainctl server` only).
 */
int hub_job_report(const char *job, int timeout_s, json_t **out, struct tc_err *err);

/* A new secret: 64 hex digits (heap). */
int hub_secret_new(char **out, struct tc_err *err);
/* Its SHA-256 as 64 hex digits into out. */
void hub_secret_hash(const char *secret, struct sbuf *out);

/*
 * Files of a run folder that is not shared (logs/rank-3.log), sent to the
 * hub as they grow: every period_ms and once more at hub_ship_stop; the hub
 * writes them at the same offsets into its own run folder, so `trainctl
 * logs [-f]` on the submit host reads them as it reads local ones.
 */
struct hub_ship;
struct hub_ship *hub_ship_start(struct sink *k, const char *job, const char *run_dir,
				int period_ms);
/* Follow run_dir/rel (a relative path); a name already followed is ignored. */
void hub_ship_add(struct hub_ship *s, const char *rel);
/* The same, read from the absolute path src (a file outside the run folder). */
void hub_ship_add_from(struct hub_ship *s, const char *rel, const char *src);
/* One pass now (the end of an attempt). */
void hub_ship_now(struct hub_ship *s);
void hub_ship_stop(struct hub_ship *s);
/* Is this run folder the submit host's too (a shared filesystem)? */
bool hub_run_dir_shared(const char *run_dir);

/* ---- the hub's side ---- */

/*
 * Where the hub hands a job's "notify" events (sink_notify): fn gets the
 * message, with the job's id, name and user from the store and the rest
 * from the event, for the server's own hooks (--notify-file), whose
 * secrets never leave the server.  A job whose stored spec has a notify:
 * of its own gets none.  fn runs on the applying thread and must not
 * block; NULL: such events are dropped.
 */
struct notify_msg;
void hub_notify_relay(void (*fn)(void *ctx, const struct notify_msg *m), void *ctx);

struct hub;

/* A hub writing the store of home (its own connection, used under its lock). */
int hub_new(const char *home, struct hub **out, struct tc_err *err);
void hub_free(struct hub *h);
/*
 * Where the hub says an event it passed over (one that can never apply: a
 * transition the job is past, a malformed record), which would otherwise
 * vanish; NULL: nowhere.  Called with the hub's lock held: warn must not
 * call the hub.  Set before the hub takes batches.
 */
void hub_set_warn(struct hub *h, void (*warn)(void *ctx, const char *msg), void *ctx);
/*
 * Apply a POST body of (job, stream) sent with secret: *status is the HTTP
 * status to answer (200, 400, 401, 404, 503) and *acked the stream's
 * acknowledged sequence number (200 only).  err says why when not 200.
 */
void hub_receive(struct hub *h, const char *job, const char *stream, const char *secret,
		 const char *body, size_t len, int *status, long long *acked, struct tc_err *err);

/*
 * fn for each stream a batch came in from through hub_receive since this
 * hub began: its job, its name ("node1.a0") and when (seconds since 1970).
 * fn runs under the hub's lock: it must not call the hub.
 */
void hub_heard_each(struct hub *h, void (*fn)(void *ctx, const char *job, const char *stream,
					       double at),
		    void *ctx);

/*
 * Answer one POST /api/v1/hub/{job}/events on con (the server's route and
 * the standalone listener): ?stream= and X-Trainctl-Hub-Secret are read
 * from it.  Returns MHD's result.
 */
struct MHD_Connection;
int hub_http_answer(struct hub *h, struct MHD_Connection *con, const char *job,
		    const char *body, size_t len);
/*
 * POST /api/v1/hub/{job}/rdzv (rdzv.h): {"op":"open"|"join"|"beat","round":R,
 * "node":..,"host":..,"stream":..,"rank":..,"min":..,"max":..,"window_s":..,
 * "beat_s":..,"lost_s":..}, answered 200 or 409 {"round","state","rank","world",
 * "poll_ms","why"|"error"}; *status 400, 401, 404, 503 with err otherwise.
 */
void hub_rdzv_receive(struct hub *h, const char *job, const char *secret, const char *body,
		      size_t len, int *status, struct sbuf *out, struct tc_err *err);
int hub_http_rdzv(struct hub *h, struct MHD_Connection *con, const char *job, const char *body,
		  size_t len);
/* A rendezvous request's headers: 0, or the refusal's status with *msg (heap). */
int hub_check_rdzv(struct hub *h, const char *job, const char *secret, char **msg);
/* Answer GET /api/v1/hub/{job}/status on con (see hub_job_status). */
int hub_http_status(struct hub *h, struct MHD_Connection *con, const char *job);

/*
 * The job's secret becomes secret (its hash stored, url kept): a hub that
 * pulls what the job's nodes left behind (slurm_hub.c) hands a new one to
 * the processes it starts, as it never knew the first.
 */
int hub_rekey(struct hub *h, const char *job, const char *secret, const char *url,
	      struct tc_err *err);

/*
 * A hub on the supervisor's own host (`trainctl server`) takes what a gone
 * supervisor of job left in runs/<job>/journal/ (ingest_journals.c): each
 * <stream>.jsonl no live process holds, from its first unacknowledged line,
 * applied as the job's stream with the dedup of note 2.  runs_fd is the
 * hub's own runs/ folder; the run folder is owner's and untrusted: a name
 * that is a link, a file not owner's or not regular, more than max_bytes
 * to read, a line no supervisor of this host writes (a file record, a
 * record naming another job, a gap) make the journal refused: a job event
 * says why and it is renamed <name>.refused (what came before the bad line
 * is applied).  One taken whole is renamed <name>.done.  Errors: the store
 * (the journals stay for a later look).
 */
/*
 * The report.json (and Ais-Bench files) of job, once it has ended, built
 * from the hub's records and written into its run folder as the folder's
 * owner, following no link: for a job whose end the hub learned from a
 * journal its gone supervisor left, which could not write it (below).
 * Nothing for a job that has not ended.
 */
int hub_write_report(struct hub *h, const char *job, struct tc_err *err);

struct hub_ingest_result {
	int taken, refused, busy; /* journals: read whole, refused, held by a live process */
};
int hub_ingest_journals(struct hub *h, int runs_fd, const char *job, uid_t owner,
			long long max_bytes, struct hub_ingest_result *res, struct tc_err *err);

/*
 * Does secret open job's hub routes?  0, or -1 with *status (401, 404,
 * 503) and err: the relay route of `trainctl server` (gateway/parking.h).
 */
int hub_check_secret(struct hub *h, const char *job, const char *secret, int *status,
		     struct tc_err *err);
/*
 * A batch's headers (POST .../events): the job's secret opens its hub
 * routes and ?stream= names the sender.  0, or the HTTP status of the
 * refusal (400, 401, 404, 503) with *msg (heap).  Every listener that takes
 * batches asks this: the hub's own sockets and the server's API.
 */
int hub_check_batch(struct hub *h, const char *job, const char *secret, const char *stream,
		    char **msg);
/* The job's secret from the environment (TRAINCTL_HUB_SECRET or _FILE), heap; NULL: err. */
char *hub_env_secret(struct tc_err *err);

/* A standalone hub: an HTTP listener on addr:port (0: any) that only takes events. */
struct hub_daemon;
int hub_daemon_start(struct hub *h, const char *addr, int port, struct hub_daemon **out,
		     int *bound_port, struct tc_err *err);
/*
 * The same on a Unix socket at path (mode 0777: any local account may
 * connect, each request proves its job by the job's secret): how
 * `trainctl server` hears the supervisors it starts on its own host.
 */
int hub_daemon_start_unix(struct hub *h, const char *path, struct hub_daemon **out,
			  struct tc_err *err);
void hub_daemon_stop(struct hub_daemon *d);

#endif
