/*
 * supervisor_int.h -- private to src/launch/: the supervisor of one node
 * (launch.h: launch_run), split in files that share struct sup:
 *
 *   supervisor.c  the job: its run folder, signals, hooks and the attempts
 *                 of a one-node job (what follows each is attempt.h's);
 *   say.c         what it says: stderr and the supervisor log (a leaf);
 *   stop.c        the stop of the worker groups and the watchdog guard;
 *   userdir.c     the run's folders and files;
 *   record.c      the job's row, started workers and metrics reader,
 *                 through the sink;
 *   rootcause.c   why a rank failed: the cause line and the detail;
 *   workers.c     one attempt's workers: start them, copy their output
 *                 line by line, stop and reap them (sup_attempt_loop);
 *   node.c        the single attempt of one node of a multi-node job;
 *   lease.c       the devices of a `trainctl run` job, leased in the store;
 *   watch.c       the progress watchdog, stragglers, on_log:, the resume
 *                 check and diagnostics.json (docs/diagnostics.md);
 *   diskfull.c    a full disk: the records that wait for space (a hook);
 *   idle.c        limits.idle_minutes: an unused interactive job stopped
 *                 (a hook).
 *
 * The arrows between them go one way (scripts/check-arch.py reports the
 * folder's call cycles): supervisor.c and node.c call the rest; the hooks
 * (lease, health, container, endpoints, notify, watch, idle) call only the
 * leaves say.c, stop.c and userdir.c; a hook that must reach its driver
 * does it through a pointer the driver set (struct sup: node_hang).
 *
 * struct sup is owned by launch_run, on its stack, for the job's life; the
 * workers' pipe ends and log fds are owned by their struct worker.
 */
#ifndef TC_LAUNCH_SUPERVISOR_INT_H
#define TC_LAUNCH_SUPERVISOR_INT_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/err.h"
#include "core/sbuf.h"
#include "launch/attempt.h"
#include "launch/launch.h"
#include "launch/logcap.h"
#include "launch/notify_int.h"
#include "secret/secret.h"
#include "spec/spec.h"
#include "hub/sink.h"
#include "store/store.h"

struct json_t;

struct stream {
	int fd; /* -1 once at EOF */
	struct sbuf partial;
};

struct worker {
	int local_rank, rank;
	pid_t pid;
	struct stream out, err;
	struct logcap log;    /* logs/rank-N.log and .times, capped (launch/logcap.h) */
	bool reaped;
	int status;     /* wait status */
	double started; /* wall time it was started */
};

struct sup {
	const struct spec *s;
	const struct launch_opts *o;
	struct sink *sink; /* where the job's records go (hub/sink.h) */
	bool own_sink;     /* a direct sink, its own connection (else launch_opts.sink, borrowed) */
	char *job_id, *run_dir, *log_dir, *output_dir, *ckpt_dir, *data_dir, *tb_dir;
	char *stop_file; /* TRAINCTL_STOP_FILE: made by sup_begin_stop before any signal */
	int suplog_fd, sigfd, watchdog_fd;
	pid_t watchdog_pid;
	sigset_t old_mask;
	struct worker *w;
	int n;
	int attempt;
	/* the attempt's outcome */
	bool failed;
	int fail_rank, fail_status;
	bool stopping;
	int user_signal; /* SIGINT/SIGTERM/SIGHUP that asked us to stop, or 0 */
	int64_t kill_at; /* monotonic ms for SIGKILL, 0 = none */
	struct sbuf console;
	struct sbuf result; /* the job's outcome, said last (sup_result) */
	struct metrics_ingest *mi; /* NULL with --no-metrics or metrics.format none */
	struct console *con;       /* progress lines on a terminal, or NULL (console_int.h) */
	struct jobio *io;          /* inputs, checkpoints, uploads (jobio_int.h) */
	/* lease.c: s points at own when the leased ids differ from the spec's */
	bool leased;
	struct spec own;           /* a shallow copy of the spec; own.device_ids is ours */
	/*
	 * The job's row, not written yet: a job this supervisor creates is
	 * recorded with its first workers (sup_record_started), so that nothing
	 * waits on the database before they run; NULL once written (or when the
	 * server or the driver wrote it).
	 */
	struct job_row *late;
	bool up;                      /* sup_workers_up ran */
	struct report_sampler *rsamp; /* device telemetry, from sup_workers_up */
	struct launch_notify *ln;     /* the job's webhooks, or NULL (notify_hook.c) */
	struct health_watch *hw;      /* device health between checks (health_hook.c) */
	/* watch.c: NULL unless the spec has watchdog:, on_log: or restart.policy first_step */
	struct watch *watch;
	struct sbuf fail_why; /* the attempt's failure when it is not a rank's exit (hang, log_match) */
	int64_t limit_at;     /* monotonic ms when limits.max_runtime is spent; 0 = no limit */
	bool over_limit;      /* ... and it was: the attempt's failure is fail_why, final */
	bool fail_final;      /* ... and it must not restart (on_log action fail) */
	/* the env: values from secrets and files (secret.h), resolved at the start; masked in logs */
	struct secret_vals secrets;
	struct endpoint_set *eps; /* the running endpoints, or NULL (endpoint_hook.c) */
	bool eps_started;         /* sup_endpoints_start ran */
	struct ep_relay *eprelay; /* node 0's connections to a server elsewhere (endpoint/relay.h) */
	struct sup_ctr *ctr;  /* image: jobs (container_hook.c); NULL on the host */
	/* a node's hang report to its driver (node.c sets it; watch.c calls it), or NULL */
	void (*node_hang)(struct sup *sp, struct json_t *h);
	struct sup_disk *disk; /* diskfull.c's, made when first needed */
	struct sup_idle *idle; /* idle.c's, made when first needed */
	bool idle_stop;        /* idle.c stopped the workers: the job ends killed, fail_why says why */
};

/* ---- say.c ---- */

/*
 * A message on stderr and in the node's supervisor log (launch_vsay); with
 * launch_opts.brief (run -q) only warnings ("warning: ...") reach stderr
 * (sup_event for what run -q shows too).
 */
void sup_say(struct sup *sp, const char *fmt, ...) TC_PRINTF(2, 3);
/* The node's supervisor log only (detail the terminal does not need). */
void sup_log(struct sup *sp, const char *fmt, ...) TC_PRINTF(2, 3);
/* sup_say, on stderr even under run -q: failures, restarts, signals. */
void sup_event(struct sup *sp, const char *fmt, ...) TC_PRINTF(2, 3);
/* The job's outcome line: said once everything else is (launch_run), on stderr always. */
void sup_result(struct sup *sp, const char *fmt, ...) TC_PRINTF(2, 3);
/* Say it (stderr and the log), when there is one: the last line of launch_run. */
void sup_say_result(struct sup *sp);
/* sup_say and sup_event as say(ctx, msg) callbacks (jobio, attempt.h, report); sp is the struct sup. */
void sup_say_cb(void *sp, const char *msg);
void sup_event_cb(void *sp, const char *msg);

/* ---- userdir.c ---- */

/* "a/b", heap. */
char *sup_join(const char *a, const char *b);
/* Write dir/name atomically. */
int sup_write_text(const char *dir, const char *name, const char *text, struct tc_err *err);
/* The same, mode 0600: job.yaml and job.env hold the spec's env values. */
int sup_write_private(const char *dir, const char *name, const char *text, struct tc_err *err);
/*
 * userdir.c: make base/rel (mkdir -p).  The supervisor runs as the job's
 * account, so what it makes is the user's.
 */
int sup_user_dir(struct sup *sp, const char *base, const char *rel, struct tc_err *err);
/* A folder outside the run folder (an absolute checkpoint.dir): made, and
 * for a server's job it must be writable by its account. */
int sup_user_dir_outside(struct sup *sp, const char *path, struct tc_err *err);

/* ---- stop.c ---- */

/* Start the watchdog: a guard process that kills every group it was told of when we die. */
int sup_watchdog_start(struct sup *sp, struct tc_err *err);
/* Tell the watchdog a worker group to kill if we die (pid), or that none is left (0). */
void sup_watchdog_tell(struct sup *sp, int32_t msg);
/* The groups are cleaned up: the watchdog ends without killing. */
void sup_watchdog_stop(struct sup *sp);
/* sig to every worker's process group. */
void sup_signal_groups(struct sup *sp, int sig);
/*
 * SIGTERM every group, SIGKILL after the spec's grace_seconds; the stop
 * file first (with why), so that a worker's should_stop() is true before
 * its signal comes.
 */
void sup_begin_stop(struct sup *sp);
/* The stop file, holding why (one line): a stop is pending.  Never fails the job. */
void sup_stop_pending(struct sup *sp, const char *why);
/*
 * limits.max_runtime, from the poll loop: ms until sp->limit_at (-1: none
 * or past); once past, the attempt fails for good with "stopped: it ran
 * past limits.max_runtime (90m)" and the usual stop (stop file, SIGTERM,
 * SIGKILL after the grace period), unless it is stopping already.
 */
int sup_limit_tick(struct sup *sp, int64_t now);
/*
 * The stop of a limit (max_runtime, idle_minutes) whose cause is in
 * fail_why: the attempt is failed (so that the workers the stop kills are
 * not its cause), said, and the usual stop begins.
 */
void sup_stop_for_limit(struct sup *sp);

/* ---- record.c ---- */

/*
 * The job's record: created here (written late, with the first workers,
 * unless something slow comes first), taken over from the server, or the
 * driver's (a node).
 */
int sup_record_job(struct sup *sp, struct tc_err *err);
/*
 * Record the workers this attempt started (those not reaped) and, with
 * why, the state running; the job's row first when it is still sp->late.
 * One transaction.
 */
int sup_record_started(struct sup *sp, const char *why, struct tc_err *err);
/* Write sp->late now, before anything that needs the job's row. */
int sup_record_late(struct sup *sp, struct tc_err *err);
/*
 * The first workers run (and are recorded): start the metrics reader, the
 * device sampler and the jobio thread.  Once per job; the error is the
 * jobio thread's.
 */
int sup_workers_up(struct sup *sp, struct tc_err *err);
/* The metrics reader (metrics/ingest.h), before any worker; never a reason to fail the job. */
void sup_metrics_start(struct sup *sp);
/* Its last records stored and its counts said; then it goes. */
void sup_metrics_end(struct sup *sp);

/* ---- rootcause.c ---- */

/* The failed rank's error file and log tail, appended to out. */
void sup_failure_detail(struct sup *sp, struct sbuf *out, int rank);
/*
 * "rank 1: KeyError: 'missing_key' (exited with code 1)": the exception
 * the rank died of when its error file or log's traceback names one, else
 * "rank 1 exited with code 1" (status: its wait status).
 */
void sup_rank_cause(struct sup *sp, struct sbuf *cause, int rank, int status);
/*
 * The failed attempt's cause, appended to cause: the watchdog's or
 * on_log's (fail_why), else the failed rank's; "failed before its first
 * step: " first under restart.policy first_step.  Returns why it must not
 * restart (enum attempt_final, attempt.h), or ATTEMPT_MAY_RESTART.
 */
enum attempt_final sup_failure_cause(struct sup *sp, struct sbuf *cause);

/* ---- workers.c ---- */

/* One endpoint port per rank when the framework needs them (heap), else NULL. */
int *sup_rank_ports(struct sup *sp);
/*
 * Write the attempt's environment to run_dir/env_file and start its
 * workers.  When they cannot all start, those that did are stopped and
 * reaped before the error returns; else run sup_attempt_loop next.
 */
int sup_start_workers(struct sup *sp, const struct env_plan *plan, const char *env_file,
		      struct tc_err *err);
/*
 * Resolve the job's {secret:} and {file:} env values into sp->secrets, as
 * the job's user (secret_resolve): before the first attempt, so that a
 * missing one fails the job (TC_ESTORAGE) before any worker starts.
 */
int sup_resolve_secrets(struct sup *sp, struct tc_err *err);
/* The secrets' values in sb from byte from on replaced by "***" (secret_mask). */
void sup_mask_secrets(struct sup *sp, struct sbuf *sb, size_t from);
/* Run the attempt to its end: every worker reaped, every pipe drained. */
void sup_attempt_loop(struct sup *sp);

/* ---- container_hook.c: image: jobs (docs/containers.md) ---- */

struct proc;
/*
 * Before any worker: find the runtime, check (or pull) the image, start
 * the reaper (a child holding a pipe from us that removes the job's
 * containers when the pipe closes without "done": we were killed).
 * TC_EBACKEND with the runtime's message when the runtime or the image is
 * missing (exit 3, never a host fallback).  Nothing for a host job.
 */
int sup_container_begin(struct sup *sp, struct tc_err *err);
void sup_container_end(struct sup *sp);
/* p (the worker's argv and env) becomes the runtime's client running it in its container. */
int sup_container_wrap(struct sup *sp, struct worker *w, struct proc *p, struct tc_err *err);
/* After an attempt: remove the containers whose client was killed (their monitor keeps them). */
void sup_container_attempt_end(struct sup *sp);
/* Do the job's endpoints run in its image?  (Not with runtime pyxis yet: they run on the host.) */
bool sup_container_endpoints_in_image(const struct sup *sp);
/* The same for an endpoint: its own container, trainctl-<job>-ep-<name> (endpoint.h: wrap). */
int sup_container_wrap_endpoint(struct sup *sp, const char *endpoint, struct proc *p,
				struct tc_err *err);
/* An endpoint's process ended: its env file goes, and its container if its client was killed. */
void sup_container_endpoint_gone(struct sup *sp, const char *endpoint, bool killed);

/* ---- lease.c ---- */

/*
 * A `trainctl run` of accelerators: lease its devices (the spec's ids, or
 * the lowest free ones when it named none, which sp->s then carries) for
 * the job, held by this process.  TC_EBUSY naming the job that holds them.
 * A job the server started, a node of a multi-node job and cpu workers
 * lease nothing here.
 */
int sup_lease_devices(struct sup *sp, struct tc_err *err);
/* Release them (at the end of the job, whatever it was). */
void sup_lease_end(struct sup *sp);

/* ---- notify_hook.c ---- */

/* Start the job's webhooks (a secret that cannot be read is a warning, never a failure). */
void sup_notify_begin(struct sup *sp);
/*
 * The one call for every event of the job (started, restarted, hang, a
 * log-policy match, its end, ...): queued for the hooks that want it,
 * never blocking.  state: the job's state word after it, or NULL;
 * exit_code -1 while the job runs.
 */
void sup_notify(struct sup *sp, enum notify_event e, const char *state, const char *reason,
		int exit_code);
/* At the job's end: what is in flight gets a few seconds, then the notifier goes. */
void sup_notify_end(struct sup *sp);
/* ---- endpoint_hook.c: the job's endpoints (endpoint/endpoint.h) ---- */

/* Start them, once per job, with plan's environment (the first workers are up). */
void sup_endpoints_start(struct sup *sp, const struct env_plan *plan);
/* A child reaped by the attempt loop: true when it was an endpoint's. */
bool sup_endpoints_reaped(struct sup *sp, pid_t pid, int status);
/* Tell the watchdog their groups again (after it was told none is left). */
void sup_endpoints_watch(struct sup *sp);
/* Stop them (the job ends); a no-op when none runs. */
void sup_endpoints_stop(struct sup *sp);

/* ---- watch.c ---- */

/* Set up for a spec that wants it (sp->watch; else nothing): the stack dump hook's folders. */
int sup_watch_begin(struct sup *sp, struct tc_err *err);
/* Write diagnostics.json a last time and free sp->watch. */
void sup_watch_end(struct sup *sp);
/*
 * A new attempt resuming from resume (NULL: none): clears the attempt's
 * failure (fail_why) and progress, makes its stack folder and sets the
 * plan's stack fields.
 */
int sup_watch_attempt(struct sup *sp, const char *resume, struct env_plan *plan,
		      struct tc_err *err);
/* Whole lines rank printed: on_log: and progress_pattern. */
void sup_watch_lines(struct sup *sp, int rank, const char *data, size_t len);
/* A worker ended (ok: exit 0): a finished rank is progress, and the attempt is ending. */
void sup_watch_exit(struct sup *sp, bool ok);
/* The metrics reader's step callback (ingest.h; ctx is the struct sup). */
void sup_watch_step(void *ctx, int rank, long long epoch, long long iter, double own, double wall);
/*
 * The watchdog's checks due at now (now_mono_ms()); a hang starts the
 * stack dumps, and once they are in, records it and stops the workers.
 * Returns the ms until it wants to run again, or -1.
 */
int sup_watch_tick(struct sup *sp, int64_t now);
/* Did this attempt make progress (a step record or a progress_pattern line)? */
bool sup_watch_progressed(const struct sup *sp);
/* The action (enum spec_log_action) of this attempt's on_log match, or -1. */
int sup_watch_log_action(const struct sup *sp);
/*
 * A node's diagnostics for its driver: diagnostics.json without the hangs
 * (a new reference), or NULL when nothing is watched.
 */
struct json_t *sup_watch_summary(struct sup *sp);

/* ---- health_hook.c ---- */

/*
 * Check the job's devices (devices/health.h) before its first attempt
 * (first) or a restart.  Each one checked is marked in the store (healthy
 * or why not).  Failing ones are not handed to the job: a first `trainctl
 * run` that named no ids takes other healthy ones; otherwise the job runs
 * on fewer when devices.min_per_node allows (*changed: sp->s, sp->n now
 * say which), else TC_EDEVICE naming each device and why.
 */
int sup_health_check(struct sup *sp, bool first, bool *changed, struct tc_err *err);
/* Close the health watch (the job's end). */
void sup_health_end(struct sup *sp);

/* ---- node.c ---- */

/*
 * The one attempt of a node of a multi-node job (sp->o->node).  Its hang
 * reports (sp->node_hang, from watch.c; h borrowed, gains node, host and
 * node_name) go to the driver at once: attempts/<a>/hang-node-<n>.json,
 * and on stdout (LAUNCH_NODE_HANG_TAG) for a node that reports to a hub.
 */
int sup_node_attempt(struct sup *sp, int *exit_status, struct tc_err *err);

/* ---- idle.c: limits.idle_minutes ---- */

/*
 * The attempt loop's timer: once the endpoints run, their activity is
 * asked from idle.c's thread; a job idle for the limit less a lead gets a
 * warning (an idle note), then the usual stop with "stopped: idle for 30
 * minutes (limits.idle_minutes)" in fail_why and idle_stop set; use after
 * the warning calls it off (a note).  ms until the next look, or -1.
 */
int sup_idle_tick(struct sup *sp, int64_t now);
/* Stop the thread and free what it had (the job's end). */
void sup_idle_end(struct sup *sp);

/* ---- diskfull.c: a full disk (docs/reliability.md) ---- */

/*
 * The attempt loop's timer, once a second: the records the sink kept
 * (hub/sink.h note 5) tried again; the output disk (run folder, checkpoint
 * folder) looked at while workers run, and on_disk_full: applied when it
 * is full; paused workers resumed when space returns.  ms until the next
 * look.
 */
int sup_disk_tick(struct sup *sp, int64_t now);
/*
 * len bytes of rank w's output to its log: a write the file system
 * refuses (full, over quota) applies on_disk_full and keeps the bytes
 * until space returns; another failure is a warning, as it was.
 */
void sup_log_write(struct sup *sp, struct worker *w, const char *data, size_t len);
/* After an attempt: the log bytes kept written (or said lost), workers never left stopped. */
void sup_disk_attempt_end(struct sup *sp);
/* on_disk_full: wait has the workers paused now (the watchdog counts no silence then). */
bool sup_disk_paused(const struct sup *sp);
void sup_disk_end(struct sup *sp);
/*
 * Before the supervisor ends: wait until every kept record is written,
 * saying once that the file system is full.  Only a kill ends the wait.
 */
void sup_disk_wait_records(struct sup *sp);
/*
 * Reserve the run folder's outcome.json (runpath.h) while there is space:
 * the job's end is written there should the supervisor be killed while it
 * waits for space (backend.c reads it); removed once the end is recorded.
 */
void sup_disk_reserve(struct sup *sp);

#endif
