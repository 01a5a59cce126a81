/*
 * store.h -- the job database: one SQLite file ($TRAINCTL_HOME/trainctl.db)
 * in WAL mode with a busy timeout, so the supervisor writing and `ps` or
 * `show` reading never block each other for long.
 *
 * Tables: jobs, workers (one row per rank and attempt), events (every state
 * change with its reason).  Nothing important lives only in memory: the
 * supervisor writes each change as it happens.
 *
 * The state column holds the words of jobs/state.h (job_state_name); the
 * state diagram and the function for each transition are there and in
 * jobs/jobs.h.  Every transition writes the state and an event row in one
 * transaction (store_job_set_state, store_job_finish, and the server's
 * store_job_launch and store_job_requeue).
 */
#ifndef TC_STORE_H
#define TC_STORE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/err.h"
#include "core/sbuf.h"
#include "jobs/state.h"

struct store;

/*
 * The job record: every column of a jobs row.  Readers get all of them;
 * store_job_create writes the first block plus user and the device columns
 * (the other columns keep their defaults), store_job_submit the server's
 * block too.
 */
struct job_row {
	char *id;
	char *name;
	enum job_state state;
	char *run_dir;
	char *spec_json;
	double created, started, ended; /* 0 when not yet */
	int exit_code;                  /* trainctl's exit status for the job; -1 while running */
	char *root_cause;               /* NULL or text */
	int restarts;
	int world_size;
	pid_t sup_pid;
	unsigned long long sup_ticks;
	/*
	 * trainctl server (see the server section below).  store_job_create
	 * writes user (the account of `trainctl run`; '' when NULL),
	 * device_type, device_count and devices too.
	 */
	char *user;
	int priority;
	bool preemptible;
	char *device_type;
	int device_count;
	char *device_want;         /* ids the spec named ("0,1"), or NULL for any */
	char *devices;             /* ids held while it runs, or NULL */
	enum job_stop stop_reason; /* why the server asked it to stop */
	bool managed;              /* the server schedules it */
	/* the backend (see the slurm section below) */
	char *backend;             /* "local" or "slurm" */
	char *slurm_job, *slurm_nodes, *slurm_state; /* NULL when not set */
};

struct worker_row {
	int attempt, rank, local_rank;
	pid_t pid;
	int exit_code; /* -1 while running or when killed by a signal */
	int signal;    /* 0 unless killed by one */
	double started, ended;
};

struct event_row {
	double time;
	enum job_state state;
	char *reason;
};

int store_open(const char *home, struct store **out, struct tc_err *err);
/*
 * The same, without SQLite's own lock around each call on the connection:
 * for a connection its owner lets one thread at a time use (a listing of
 * 10,000 jobs spent a sixth of its CPU taking and leaving that lock, twice
 * per column read).
 */
int store_open_unlocked(const char *home, struct store **out, struct tc_err *err);
void store_close(struct store *st);
/*
 * Let st keep up to mib MiB of database pages in memory (SQLite's default is
 * 2 MiB): for a long-lived connection that reads whole tables, such as the
 * server's (a listing of 10,000 jobs reads ~9 MB of pages, otherwise again
 * from the file every time).  Pages are kept as they are read, not up front.
 */
int store_keep_pages(struct store *st, int mib, struct tc_err *err);

/* A new unique job id that sorts by time: YYYYMMDD-HHMMSS-mmm-xxxx. */
char *store_new_job_id(void);

int store_job_create(struct store *st, const struct job_row *job, struct tc_err *err);
int store_job_set_state(struct store *st, const char *id, enum job_state state,
			const char *reason, struct tc_err *err);
/*
 * Record the end: state, exit status and root cause in one go.  A job
 * whose end is already recorded keeps it: this one changes nothing (0).
 */
int store_job_finish(struct store *st, const char *id, enum job_state state, int exit_code,
		     const char *root_cause, const char *reason, struct tc_err *err);
/*
 * An event row that is not a change of state (jobs_note): the job's
 * current state with reason.  Nothing is written for an unknown job.
 */
int store_job_event(struct store *st, const char *id, const char *reason, struct tc_err *err);
int store_job_set_restarts(struct store *st, const char *id, int restarts, struct tc_err *err);
int store_job_set_supervisor(struct store *st, const char *id, pid_t pid,
			     unsigned long long ticks, struct tc_err *err);

int store_worker_start(struct store *st, const char *job, int attempt, int rank, int local_rank,
		       pid_t pid, struct tc_err *err);
int store_worker_end(struct store *st, const char *job, int attempt, int rank, int exit_code,
		     int signal, struct tc_err *err);

/*
 * The workers of an attempt are up: in one transaction, the job's row when
 * create is set (a supervisor that writes nothing before its workers run),
 * the workers' rows (rank, local_rank, pid, started) and, when why is set,
 * the state running with its event.
 */
struct store_start {
	const struct job_row *create; /* NULL: the row exists */
	const char *job_id;
	int attempt;
	const struct worker_row *workers;
	size_t nworkers;
	const char *why; /* NULL: the state stays */
};
int store_job_started(struct store *st, const struct store_start *s, struct tc_err *err);

/*
 * Several writes as one transaction: store_begin, then the writes (each
 * joins it), then store_commit(st, rc, err), which commits when rc is 0
 * and rolls back otherwise; it returns rc or the commit's error.
 */
int store_begin(struct store *st, struct tc_err *err);
int store_commit(struct store *st, int rc, struct tc_err *err);

/*
 * Find one job by id, unique id prefix, or name (the newest of that name).
 * Returns TC_ENOTFOUND (or TC_EUSAGE for an ambiguous prefix).
 */
/*
 * A server's runs/ made (or tightened) to 0711 when root, 0700 otherwise:
 * job accounts pass through to their own run folders and list nobody's
 * job ids (issue 23, L3).
 */
int store_runs_private(const char *home, struct tc_err *err);
int store_job_get(struct store *st, const char *ref, struct job_row *out, struct tc_err *err);
/*
 * store_job_get among user's jobs for prefixes and names (a whole id is
 * found whoever owns it); user NULL: everyone's.  Ambiguity errors then
 * name only user's ids.
 */
int store_job_get_of(struct store *st, const char *ref, const char *user, struct job_row *out,
		     struct tc_err *err);
/* Newest first; all=false keeps jobs that are not finished plus the 20 newest. */
int store_job_list(struct store *st, bool all, struct job_row **out, size_t *nr,
		   struct tc_err *err);
int store_workers(struct store *st, const char *job, struct worker_row **out, size_t *nr,
		  struct tc_err *err);
int store_events(struct store *st, const char *job, struct event_row **out, size_t *nr,
		 struct tc_err *err);

void job_row_release(struct job_row *j);
void job_rows_free(struct job_row *v, size_t nr);
void event_rows_free(struct event_row *v, size_t nr);

/* ---- metrics (store_metrics.c) ----------------------------------------
 *
 * Tables: metric_series (one per job, metric and rank; unique index on
 * (job_id, metric, rank)), metric_chunks (the points of a series, a packed
 * blob per flush: keeps ingestion near a million lines a second, where a
 * row per point tops out near 300,000), metric_params (PARAMETER records,
 * values as text), metric_meta (DLLogger METADATA: unit, GOAL, STAGE,
 * format), metric_counters (lines, records and malformed lines per rank).
 *
 * Writing goes through a batch (struct store_mbatch): the supervisor adds
 * records as it parses them and store_mbatch_write() stores everything
 * pending in one transaction.  A batch remembers its series, so a series
 * row is created once.  Reading decodes the chunks back into points.
 */

enum store_mkind { STORE_MPOINT = 0, STORE_MEPOCH = 1, STORE_MSUMMARY = 2 };

struct store_mpoint {
	int kind;          /* enum store_mkind */
	long long seq;     /* the rank's step counter (x of charts, TensorBoard step) */
	long long epoch;   /* -1 when none */
	long long iter;    /* -1 when none */
	const char *step;  /* the step as written; never NULL */
	double value;      /* NaN/Inf kept; NaN when text is set */
	const char *text;  /* non-numeric value, or NULL */
	double wall_time;
};

/*
 * The x of a point in charts, `metrics`, `export tb` and the API: the step
 * the job logged when it is one number (`step 10`, DLLogger `"step": 10`,
 * `Iteration: 10`: iter), so that runs resumed from checkpoints line up;
 * otherwise seq: for an (epoch, iteration) pair, whose iteration often
 * starts again each epoch, and for a line without a step.
 */
long long store_mpoint_x(const struct store_mpoint *p);

struct store_mbatch;

struct store_mbatch *store_mbatch_new(const char *job_id);
void store_mbatch_free(struct store_mbatch *b);
/* Queue one point of (rank, metric); strings are copied. */
void store_mbatch_point(struct store_mbatch *b, int rank, const char *metric,
			const struct store_mpoint *p);
void store_mbatch_param(struct store_mbatch *b, int rank, const char *name, const char *value);
void store_mbatch_meta(struct store_mbatch *b, const char *metric, const char *key,
		       const char *value);
void store_mbatch_counters(struct store_mbatch *b, int rank, long long lines, long long records,
			   long long malformed, const char *last_error);
/* Points queued and not yet written; bytes they take. */
size_t store_mbatch_pending(const struct store_mbatch *b);
size_t store_mbatch_bytes(const struct store_mbatch *b);
/* Write everything queued in one transaction; on failure it stays queued. */
int store_mbatch_write(struct store *st, struct store_mbatch *b, struct tc_err *err);
/* Forget what is queued (after repeated failures). */
void store_mbatch_drop(struct store_mbatch *b);
/*
 * The batch's pending records as bytes (appended to out), for a hub in
 * another process; they leave b as a write's would.  store_mbatch_unpack
 * queues them into another batch (TC_EUSAGE for damaged bytes, after which
 * that batch holds a part of them: free it).
 */
void store_mbatch_pack(struct store_mbatch *b, struct sbuf *out);
int store_mbatch_unpack(struct store_mbatch *b, const void *data, size_t len,
			struct tc_err *err);

/* One series read back: its points in the order they were logged. */
struct store_mseries {
	char *metric;
	int rank;
	size_t n;
	struct store_mpoint *v; /* strings point into blobs owned by the series */
	char **blobs;
	size_t nblobs;
};

/* Series of a job, by metric then rank; metric NULL = all, rank -1 = all. */
int store_metric_series(struct store *st, const char *job, const char *metric, int rank,
			struct store_mseries **out, size_t *nr, struct tc_err *err);
void store_mseries_free(struct store_mseries *v, size_t nr);

/*
 * The lean read for charts: the (x, value) of a metric's plain numeric
 * points (x: store_mpoint_x) with a finite value and xmin <= x <= xmax, rank by rank (rank -1
 * = all), in logged order, handed to add() straight from the chunks (no
 * strings, nothing kept): several times faster than store_metric_series
 * on a long series.  begin() is called before each rank's points.
 */
struct store_xy_sink {
	void (*begin)(void *arg, int rank);
	void (*add)(void *arg, double x, double y);
	void *arg;
};
int store_metric_xy(struct store *st, const char *job, const char *metric, int rank, double xmin,
		    double xmax, const struct store_xy_sink *sink, struct tc_err *err);

/*
 * The summaries kept as points are written (store_metrics.c, note 4): per
 * series and kind, and per rank the distinct seq values of its point
 * records.  A reader must check them: a series whose kinds' points do not
 * add up to stored has to be read point by point.
 */
struct store_msum_kind {
	long long points;        /* points of this kind, text ones too; 0: no row */
	long long n, n_finite, n_pos;
	double sum, sum_pos;     /* of the finite values, of the positive ones */
	double min, max;         /* NaN when no finite value */
	double last;             /* the last number (NaN when none, or NaN) */
	long long last_index;    /* its index in the series */
	char *min_step, *max_step, *last_step; /* first step of min and max; NULL when none */
	char *last_text;         /* the last text value, or NULL */
};
struct store_msum {
	char *metric;
	int rank;
	long long stored;           /* points the series' chunks hold */
	struct store_msum_kind k[3]; /* by enum store_mkind */
};
/* The series of a job that hold points, by metric then rank. */
int store_metric_summaries(struct store *st, const char *job, struct store_msum **out,
			   size_t *nr, struct tc_err *err);
void store_msum_free(struct store_msum *v, size_t nr);

struct store_msteps {
	int rank;
	long long nseq;   /* distinct seq values of the rank's point records */
	long long last_seq;
	double last_t;    /* the latest wall time of the records of last_seq */
	bool ordered;     /* seq never went back: the counts above hold */
};
int store_metric_steps(struct store *st, const char *job, struct store_msteps **out, size_t *nr,
		       struct tc_err *err);
/*
 * The points of one series in logged order from its first, handed to fn
 * one at a time (valid for the call only) until fn returns non-zero, which
 * is returned: a series' beginning read without the rest.
 */
int store_metric_walk(struct store *st, const char *job, const char *metric, int rank,
		      int (*fn)(void *arg, const struct store_mpoint *p), void *arg,
		      struct tc_err *err);

struct store_mkv {
	int rank;     /* params: the rank; meta: -1 */
	char *name;   /* param name, or metric of a meta row */
	char *key;    /* meta: "unit", "GOAL", ...; params: NULL */
	char *value;
};
int store_metric_params(struct store *st, const char *job, struct store_mkv **out, size_t *nr,
			struct tc_err *err);
int store_metric_meta(struct store *st, const char *job, struct store_mkv **out, size_t *nr,
		      struct tc_err *err);
void store_mkv_free(struct store_mkv *v, size_t nr);

struct store_mcount {
	int rank;
	long long lines, records, malformed;
	char *last_error;
};
int store_metric_counters(struct store *st, const char *job, struct store_mcount **out,
			  size_t *nr, struct tc_err *err);
void store_mcount_free(struct store_mcount *v, size_t nr);

/* ---- checkpoints (store_ckpt.c) ----
 *
 * One row per complete checkpoint a supervisor saw: where (dir, name
 * relative to it), step/epoch, file count, bytes, the combined CRC32C and
 * the per-file list as JSON (ckpt_files_json).  state: complete, removed
 * (rotated away by checkpoint.keep) or damaged (failed verification).
 */
struct store_ckpt {
	char *name, *dir;
	long long step, epoch;
	int layout;
	long long nfiles, bytes;
	char *checksum;
	char *files_json;
	double created;
	char *state;
};

/* Insert or replace the row of (job, c->name). */
int store_ckpt_put(struct store *st, const char *job, const struct store_ckpt *c,
		   struct tc_err *err);
int store_ckpt_set_state(struct store *st, const char *job, const char *name, const char *state,
			 struct tc_err *err);
/* Rows of a job, oldest step first; all=false keeps state 'complete' only. */
int store_ckpt_list(struct store *st, const char *job, bool all, struct store_ckpt **out,
		    size_t *nr, struct tc_err *err);
void store_ckpt_free(struct store_ckpt *v, size_t nr);
/*
 * Node node's own record of a checkpoint on its disk (a multi-node job
 * whose nodes do not share a folder): table checkpoint_nodes, one row per
 * (job, node, name); the job's rows above stay the driver's view.
 */
int store_ckpt_node_put(struct store *st, const char *job, int node, const struct store_ckpt *c,
			struct tc_err *err);
int store_ckpt_node_set_state(struct store *st, const char *job, int node, const char *name,
			      const char *state, struct tc_err *err);
/* Every node's rows of a job, by node then step; (*nodes)[i] is row i's node. */
int store_ckpt_node_list(struct store *st, const char *job, struct store_ckpt **out, int **nodes,
			 size_t *nr, struct tc_err *err);

/* ---- trainctl server (store_server.c) ----
 *
 * Columns of jobs for the server: user (owner; '' for `trainctl run`),
 * priority, preemptible, device_type, device_count, device_want (ids the
 * spec named, "0,1", or NULL for any), devices (ids held while it runs),
 * stop_reason (why the server asked its supervisor to stop: preempted,
 * paused or stopped; the supervisor records that state on SIGTERM) and
 * managed (1: the server schedules it).  Tables tokens (SHA-256 of each
 * bearer token, hex) and job_usage (telemetry samples, dev as JSON).
 *
 *   queued --(scheduler: store_job_launch)--> starting -> running -> ...
 *   running --(stop_reason preempted, SIGTERM)--> preempted --(store_job_requeue)--> queued
 *   running --(stop_reason paused)--> paused --(resume: store_job_requeue)--> queued
 *   lost (supervisor died) --(restart budget left: store_job_requeue)--> queued
 */

/* A new managed job in state queued (id, name, run_dir, spec_json, created,
 * world_size, the server's block of j and its backend). */
int store_job_submit(struct store *st, const struct job_row *j, struct tc_err *err);
/* Managed jobs not in a terminal state, oldest first. */
int store_job_active_managed(struct store *st, struct job_row **out, size_t *nr,
			     struct tc_err *err);
/*
 * The scheduler started its supervisor: devices, pid, state starting, and
 * the job's leases handed to the supervisor, one transaction.
 */
int store_job_launch(struct store *st, const char *id, const char *devices, pid_t pid,
		     unsigned long long ticks, const char *reason, struct tc_err *err);
/* Back to state (queued or paused) holding nothing; count_restart adds one to restarts. */
int store_job_requeue(struct store *st, const char *id, enum job_state state, bool count_restart,
		      const char *reason, struct tc_err *err);
int store_job_set_devices(struct store *st, const char *id, const char *devices,
			  struct tc_err *err);
int store_job_set_stop_reason(struct store *st, const char *id, enum job_stop why,
			      struct tc_err *err);
/* The job's stop_reason (JOB_STOP_NONE when not set or no such job). */
int store_job_stop_reason(struct store *st, const char *id, enum job_stop *out,
			  struct tc_err *err);
int store_job_delete(struct store *st, const char *id, struct tc_err *err);

struct store_event {
	long long id;
	char *job_id;
	enum job_state state;
	char *reason, *user;
	double time;
};
/* Events with id > after, oldest first, at most limit. */
int store_events_after(struct store *st, long long after, int limit, struct store_event **out,
		       size_t *nr, struct tc_err *err);
int store_events_last(struct store *st, long long *last, struct tc_err *err);
void store_events_free(struct store_event *v, size_t nr);

/* Listing filter: NULL fields match all; states is a set of (1u << JOB_*), 0 for all. */
struct store_jfilter {
	unsigned states;
	const char *user, *name;
	long limit, offset;
};
/* The matching jobs, newest first (limit, offset); *total counts all matches. */
int store_job_query(struct store *st, const struct store_jfilter *f, struct job_row **out,
		    size_t *nr, long long *total, struct tc_err *err);
/*
 * The same listing handed to fn row by row as it is read, nothing kept: the
 * row is fn's for the call only, and its spec_json is NULL (a listing does
 * not read it).  A non-zero return from fn stops the listing and is
 * returned.  *total is set before the first call.
 */
int store_job_each(struct store *st, const struct store_jfilter *f,
		   int (*fn)(void *arg, const struct job_row *j), void *arg, long long *total,
		   struct tc_err *err);

int store_token_add(struct store *st, const char *hash, const char *user, bool admin,
		    struct tc_err *err);
/* TC_ENOTFOUND for an unknown hash. */
int store_token_find(struct store *st, const char *hash, char **user, bool *admin,
		     struct tc_err *err);
int store_token_count(struct store *st, long long *n, struct tc_err *err);
/* Every token (its hash, never the token), oldest first; fn's nonzero stops and is returned. */
int store_token_each(struct store *st,
		     int (*fn)(void *arg, const char *hash, const char *user, bool admin,
			       double created),
		     void *arg, struct tc_err *err);
/* Delete the tokens whose hash starts with prefix, or (prefix NULL) all of user's; *n deleted. */
int store_token_revoke(struct store *st, const char *prefix, const char *user, long long *n,
		       struct tc_err *err);

int store_usage_add(struct store *st, const char *id, double t, double cpu, double mem,
		    const char *dev_json, struct tc_err *err);
/* counts[s] = the jobs in state s. */
int store_state_counts(struct store *st, long long counts[JOB_NSTATES], struct tc_err *err);
/* {"series": [{"metric", "rank", "points"}]} of a job. */
int store_metric_names_json(struct store *st, const char *job, struct sbuf *out,
			    struct tc_err *err);
/* [{"time", "cpu", "mem", "devices": [...]}] of samples after since. */
int store_usage_json(struct store *st, const char *id, double since, struct sbuf *out,
		     struct tc_err *err);

/* ---- device leases (store_lease.c) ----
 *
 * Table leases: one row per device held, (device_type, device_id) unique,
 * naming the job and the holder process by pid and start ticks.  This is
 * how `trainctl run` and `trainctl server` on one state folder share the
 * machine's accelerators: each takes its devices here before workers
 * start, and neither hands out a device another holds.
 *
 * A lease is held while its holder is alive (pid with the same start
 * ticks, not a zombie) and its job, when it has a row yet, has not ended.
 * Anything else is stale: a holder killed by SIGKILL releases its devices
 * by dying, and the next taker replaces the row.  Holders:
 *   `trainctl run`: its supervisor, from before its job row exists to the
 *     end (store_lease_drop);
 *   the server: itself while it starts a job's supervisor, then that
 *     supervisor (store_job_launch hands the job's leases over), until the
 *     server sees the job stop holding devices (store_lease_drop).
 * cpu "devices" are worker slots, not hardware: nobody leases them.
 */
struct store_lease {
	char *type;           /* device type */
	int id;               /* device id */
	char *job_id;
	pid_t pid;            /* the holder */
	unsigned long long ticks;
	char *job_name, *user; /* of its job; NULL while it has no row */
	bool managed;          /* its job is the server's */
};
/*
 * Take n devices of type for job, held by (pid, ticks), in one transaction:
 * the first n of cand[0..ncand) that no live lease of another job holds
 * (n == ncand: exactly those), written to got[0..n).  All or none: when
 * fewer than n are free, TC_EBUSY naming the job that holds the first
 * candidate in the way, and *busy (when not NULL) is its lease (release
 * with store_lease_release).
 */
int store_lease_take(struct store *st, const char *job, const char *type, const int *cand,
		     int ncand, int n, pid_t pid, unsigned long long ticks, int *got,
		     struct store_lease *busy, struct tc_err *err);
/* Release every lease of job. */
int store_lease_drop(struct store *st, const char *job, struct tc_err *err);
/* The leases held now, by type and id. */
int store_leases_held(struct store *st, struct store_lease **out, size_t *nr,
		      struct tc_err *err);
void store_lease_release(struct store_lease *l);
void store_leases_free(struct store_lease *v, size_t nr);

/* ---- backend: slurm (store_slurm.c) ----
 *
 * Columns of jobs: backend ('local' or 'slurm'), slurm_job (the Slurm job
 * id), slurm_nodes (its node list, "n[1-2]"), slurm_state (the Slurm state
 * last seen, e.g. RUNNING); struct job_row carries them.
 * store_job_reconcile leaves slurm jobs alone: their supervisors are not
 * processes of this machine.
 */
/* Mark id as a slurm job; job, nodes, state: NULL leaves the column as is. */
int store_slurm_set(struct store *st, const char *id, const char *job, const char *nodes,
		    const char *state, struct tc_err *err);

/* ---- webhook deliveries and device health (store_notify.c) ---- */

/* One webhook delivery of a job (notify/notify.h); url is already redacted. */
struct store_delivery {
	double time;
	char *event, *url;
	bool ok;
	int tries;
	long status;  /* the last HTTP status, 0 = none */
	char *error;  /* NULL when delivered */
};
int store_delivery_add(struct store *st, const char *job, const struct store_delivery *d,
		       struct tc_err *err);
/* A job's deliveries, oldest first. */
int store_deliveries(struct store *st, const char *job, struct store_delivery **out, size_t *nr,
		     struct tc_err *err);
void store_deliveries_free(struct store_delivery *v, size_t nr);

/*
 * A job's endpoint (endpoint/endpoint.h, store_endpoint.c): one row per
 * name, replaced whole by each put.  secret is the token the proxy hands
 * the service (never shown by the API); host:port where it listens.
 */
struct store_endpoint {
	char *name, *kind;
	char *host;     /* "127.0.0.1" for a sidecar of this machine */
	int port;
	char *state;    /* starting | running | exited | stopped | failed */
	long pid;       /* the sidecar's pid (its group), 0 when none */
	char *secret;   /* NULL: the service has no token of ours */
	char *note;     /* why it exited or failed, or NULL */
	double updated;
};
int store_endpoint_put(struct store *st, const char *job, const struct store_endpoint *e,
		       struct tc_err *err);
/* A job's endpoints, by name. */
int store_endpoints(struct store *st, const char *job, struct store_endpoint **out, size_t *nr,
		    struct tc_err *err);
/* One of them: TC_ENOTFOUND when the job has none of that name. */
int store_endpoint_get(struct store *st, const char *job, const char *name,
		       struct store_endpoint *out, struct tc_err *err);
void store_endpoint_release(struct store_endpoint *e);
void store_endpoints_free(struct store_endpoint *v, size_t nr);

/*
 * A device that failed its health check (devices/health.h): one of this
 * machine's (node "") or one a node of a multi-node job found on its own
 * host (node: its name, job: the job that found it; hub/sink.h).
 */
struct store_sick {
	char *type;
	int id;
	char *reason;
	double since;
	char *node; /* "" for this machine */
	char *job;  /* a node's: the job that found it; else NULL */
};
/* Mark a device of this machine unhealthy (reason replaces an older one), or healthy again (reason NULL). */
int store_device_health_set(struct store *st, const char *type, int id, const char *reason,
			    struct tc_err *err);
/* The same for a device of node (a name, never ""), found by job. */
int store_node_health_set(struct store *st, const char *node, const char *type, int id,
			  const char *reason, const char *job, struct tc_err *err);
/* Every row: this machine's first (node ""), then each node's. */
int store_devices_unhealthy(struct store *st, struct store_sick **out, size_t *nr,
			    struct tc_err *err);
void store_sick_free(struct store_sick *v, size_t nr);

/* ---- sweeps (store_sweep.c) ----
 *
 * Tables sweeps (one row per sweep: its definition as JSON, state
 * running/done/stopped, who drives it: managed 1 = the server, else the
 * `trainctl sweep` process driver_pid/driver_ticks) and sweep_trials (one
 * row per trial, all written when the sweep is created: parameters as a
 * JSON object, state, the job once it exists, objective, steps seen, note:
 * the root cause or why early stopping stopped it).  The words of the
 * states are sweep/sweep.h's.
 */
struct sweep_row {
	char *id, *name, *state, *def_json, *user;
	bool managed;
	double created, ended; /* ended 0 while running */
	pid_t driver_pid;
	unsigned long long driver_ticks;
	char *note;
};
struct trial_row {
	char *sweep_id;
	int idx;
	char *params_json, *state, *job_id; /* job_id NULL until the job exists */
	double objective;                   /* NaN when none */
	long long steps;
	char *note;
	bool early;                         /* early stopping asked it to stop */
	double started, ended;              /* 0 when not yet */
};
/* The sweep and all its trials, one transaction. */
int store_sweep_create(struct store *st, const struct sweep_row *s, const struct trial_row *t,
		       size_t nt, struct tc_err *err);
/* By id, unique id prefix, or name (the newest); TC_ENOTFOUND. */
int store_sweep_get(struct store *st, const char *ref, struct sweep_row *out, struct tc_err *err);
/* Newest first; running_managed: only the server's sweeps still running. */
int store_sweep_list(struct store *st, bool running_managed, struct sweep_row **out, size_t *nr,
		     struct tc_err *err);
int store_sweep_set_state(struct store *st, const char *id, const char *state, const char *note,
			  bool ended, struct tc_err *err);
int store_sweep_set_driver(struct store *st, const char *id, pid_t pid, unsigned long long ticks,
			   struct tc_err *err);
/* Trials by index. */
int store_sweep_trials(struct store *st, const char *id, struct trial_row **out, size_t *nr,
		       struct tc_err *err);
/* Write a trial's state, job_id, objective, steps, note, early, started, ended. */
int store_trial_update(struct store *st, const struct trial_row *t, struct tc_err *err);
/* The sweep and trial of a job (TC_ENOTFOUND when it is no trial). */
int store_trial_of_job(struct store *st, const char *job_id, struct trial_row *out,
		       struct tc_err *err);
void sweep_row_release(struct sweep_row *s);
void sweep_rows_free(struct sweep_row *v, size_t n);
void trial_row_release(struct trial_row *t);
void trial_rows_free(struct trial_row *v, size_t n);

/* ---- the hub's bookkeeping (store_hub.c; hub/hub.h) ----
 *
 * hub_jobs: a job whose supervisors report from elsewhere: the SHA-256 of
 * its secret (hex) and the URL they send to.  hub_streams: per (job,
 * stream), the highest sequence number applied; the hub writes it in the
 * transaction of the events it acknowledges, so an event is applied once.
 */
int store_hub_job_set(struct store *st, const char *job, const char *secret_sha256,
		      const char *url, struct tc_err *err);
/* *sha and *url: heap or NULL; TC_ENOTFOUND for a job without a hub row. */
int store_hub_job_get(struct store *st, const char *job, char **secret_sha256, char **url,
		      struct tc_err *err);
/* 0 when the stream has sent nothing yet. */
int store_hub_acked(struct store *st, const char *job, const char *stream, long long *seq,
		    struct tc_err *err);
int store_hub_set_acked(struct store *st, const char *job, const char *stream, long long seq,
			struct tc_err *err);

#endif
