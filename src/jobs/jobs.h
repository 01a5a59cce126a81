/*
 * jobs.h -- the job service: what `trainctl` (src/cmd/) and the HTTP API
 * (src/api/api.c) do to a job, written once.
 *
 *   transition.c  one function per edge of the state diagram (state.h),
 *                 each writing the state and its event row through the
 *                 store;
 *   job_json.c    the one JSON form of a job (job_to_json) and of its
 *                 history, for `ps --json`, `show --json` and the API;
 *   actions.c     show, stop, pause, resume, clone and delete, dispatched
 *                 through the job's backend (backend.h);
 *   show_text.c   the text of `trainctl show`, from the JSON form, so that
 *                 it reads the same with and without a server;
 *   diagjson.c    the types of diagnostics.json, which the job writes,
 *                 checked before it is shown (diagjson.h).
 *
 * Nothing here prints: progress goes to backend_env.say, errors to tc_err.
 * Every function that takes a store uses the caller's connection (the
 * server holds its lock around them).
 */
#ifndef TC_JOBS_H
#define TC_JOBS_H

#include <stdbool.h>
#include <sys/types.h>

#include <jansson.h>

#include "core/err.h"
#include "core/sbuf.h"
#include "jobs/state.h"
#include "store/store.h"

struct backend_env;

/* ---- transitions (transition.c); the diagram is in state.h ---- */

/* queued -> starting: a supervisor took the job (or staged its inputs; Slurm started it). */
int jobs_mark_starting(struct store *st, const char *id, const char *why, struct tc_err *err);
/* starting, restarting -> running: the workers of an attempt are up. */
int jobs_mark_running(struct store *st, const char *id, const char *why, struct tc_err *err);
/*
 * The same edge with the attempt's worker rows, and for a job recorded only
 * once its workers run, its creation, in one transaction (store_job_started).
 */
int jobs_mark_started(struct store *st, const struct store_start *s, struct tc_err *err);
/* running -> restarting: an attempt failed and restarts are left. */
int jobs_mark_restarting(struct store *st, const char *id, const char *why, struct tc_err *err);
/* running -> paused | preempted: stopped for what the server asked (asked). */
int jobs_mark_held(struct store *st, const char *id, enum job_stop asked, const char *why,
		   struct tc_err *err);
/* -> queued: submitted to, or requeued by, a backend with a queue (Slurm). */
int jobs_mark_queued(struct store *st, const char *id, const char *why, struct tc_err *err);
/*
 * -> succeeded | failed | killed (| lost, when Slurm says a node failed),
 * with the exit status and root cause (NULL or text).  The first end
 * recorded stays: for a job that already ended (two processes may see the
 * same end, e.g. a Slurm job's driver and whoever reads Slurm's state) this
 * and jobs_mark_lost change nothing and return 0.  The diagram has no edge
 * out of an end but the server's requeue of a lost job.
 */
int jobs_finish(struct store *st, const char *id, enum job_state end, int exit_code,
		const char *root_cause, const char *why, struct tc_err *err);
/* -> lost: the supervisor (or Slurm's record) vanished without an end; exit 3. */
int jobs_mark_lost(struct store *st, const char *id, const char *why, struct tc_err *err);
/* The server: queued -> starting on devices, with the supervisor it started. */
int jobs_launch(struct store *st, const char *id, const char *devices, pid_t pid,
		unsigned long long ticks, const char *why, struct tc_err *err);
/* The server: preempted, paused, lost -> queued, or queued -> paused; devices let go. */
int jobs_requeue(struct store *st, const char *id, enum job_state to, bool count_restart,
		 const char *why, struct tc_err *err);

/* An event that is no change of state (state.h: enum job_note), the job's current state with it. */
int jobs_note(struct store *st, const char *id, enum job_note n, const char *text,
	      struct tc_err *err);

/* ---- the JSON form (job_json.c) ---- */

enum job_json_flags {
	JOB_JSON_BRIEF = 1, /* a listing: no spec, root_cause cut at 300 characters */
};
/*
 * A job as JSON: id, name, user, state, priority, preemptible, device_type,
 * device_count, devices, created, started, ended (seconds, null when not
 * yet), exit_code, restarts, workers, root_cause, managed, run_dir,
 * backend, stop_reason, supervisor_pid, the backend's part (slurm: {job,
 * nodes, state}) and, unless brief, spec.  New reference.
 */
json_t *job_to_json(const struct job_row *j, unsigned flags);
/*
 * job_to_json(j, JOB_JSON_BRIEF) written straight to out as compact JSON
 * text, with no tree built: the same fields, names and values (a listing
 * of 10,000 jobs spent most of its time building and freeing the trees).
 */
void job_json_brief_text(const struct job_row *j, struct sbuf *out);
/*
 * Add a job's history: "events" (time, state, reason) and
 * "workers_history" (one entry per rank and attempt; exit_code null when
 * killed by a signal or running).
 */
void job_history_json(json_t *o, const struct event_row *ev, size_t nev,
		      const struct worker_row *wk, size_t nwk);
/*
 * Of restarts, how many a lost node caused (its node_lost notes in ev,
 * state.h) and how many a failing worker (a rank's failure, a hang, an
 * on_log match: the rest).  job_history_json adds them as
 * "restarts_by_cause": {"node_lost", "worker_failed"}.
 */
void job_restart_causes(const struct event_row *ev, size_t nev, int restarts, int *node_lost,
			int *worker_failed);

/* ---- rounds of a multi-node job (rounds.c, docs/formats.md "rounds") ---- */

/*
 * The text of a round note (state.h JOB_NOTE_ROUND) from its record:
 * one line for people ("attempt 1: 2 nodes n1,n3; n2 lost: ...; spare n3
 * takes node 1"), a newline, the record as JSON.  The record: "attempt",
 * "nodes", "members" (hosts by node rank), "left_out" [{"node", "host",
 * "why", "cause"}], "spares" [{"node", "host", "in_place_of"}], "lost_at"
 * (time or null).  Caller frees.
 */
char *job_round_text(json_t *record);
/* Why a round left a node out: its "why" word ("lost", "unhealthy", "excluded"). */
enum job_round_why { JOB_ROUND_LOST, JOB_ROUND_UNHEALTHY, JOB_ROUND_EXCLUDED, JOB_ROUND_LEFT_OUT };
const char *job_round_why_name(enum job_round_why w);
/*
 * The job's rounds from its round notes in ev, each its record plus
 * "started" (the note's time) and "loss_to_first_step_s" (null: filled
 * by job_rounds_first_step).  A note whose JSON does not parse is skipped.
 */
json_t *job_rounds_json(const struct event_row *ev, size_t nev);
/*
 * Each round's first training step: the first plain point of the job's
 * lowest rank's first metric that has such points (of ms, the job's
 * metrics summary; not one logged per epoch) logged at
 * or after the round's start and before the next round's;
 * "loss_to_first_step_s" is its time less "lost_at".  Metric points carry
 * no attempt: time is what tells the rounds apart.  Metrics that cannot
 * be read leave the times null.
 */
struct metrics_job_summary;
void job_rounds_first_step(struct store *st, const char *job_id,
			   const struct metrics_job_summary *ms, json_t *rounds);

/* ---- actions (actions.c) ---- */

/*
 * The detail of job ref: job_to_json plus its history, checkpoints,
 * metrics summary and duration.  reconcile: bring its state up to date
 * through its backend first (the CLI; the server follows its jobs itself,
 * and a finished job's backend need not be reachable).
 */
int jobs_show(struct store *st, const char *ref, bool reconcile, json_t **out,
	      struct tc_err *err);
/*
 * run_dir/diagnostics.json, which the supervisor of a watched job writes
 * (docs/diagnostics.md: per-rank step times, stragglers, hangs with their
 * stacks, on_log matches), or NULL.  The job wrote it: only its known
 * keys of their types are kept (diagjson.h).  jobs_show adds it as
 * "diagnostics".
 */
json_t *jobs_diagnostics(const char *run_dir);
/* The text of `trainctl show` from that JSON (appended to out). */
void jobs_show_text(json_t *job, struct sbuf *out);
/*
 * Stop a job that has not ended, for why (backend_ops.stop).  TC_EUSAGE
 * for an ended job.
 */
int jobs_stop(const struct backend_env *env, struct store *st, const struct job_row *j,
	      enum job_stop why, struct tc_err *err);
/* Pause a job that has not ended; TC_EUSAGE when its backend cannot. */
int jobs_pause(const struct backend_env *env, struct store *st, const struct job_row *j,
	       struct tc_err *err);
/* Let a paused job run again; TC_EUSAGE when it is not paused. */
int jobs_resume(const struct backend_env *env, struct store *st, const struct job_row *j,
		struct tc_err *err);
/* Delete an ended job: its rows, then its run folder.  TC_EUSAGE while it has not ended. */
int jobs_delete(struct store *st, const struct job_row *j, struct tc_err *err);
/*
 * The spec to submit for a clone of j (JSON text, heap): the spec as
 * stored, less the device ids the allocator chose (ids the spec named
 * stay) and the planner's choice (made again).
 */
int jobs_clone_spec(const struct job_row *j, char **text, struct tc_err *err);

#endif
