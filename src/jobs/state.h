/*
 * state.h -- the states of a job: one enum, one name table, the diagram;
 * and the same for sweeps, their trials and a job's endpoints (below).
 *
 * A leaf of the jobs module (no store, no backend): the store maps the
 * enum to and from its TEXT column through job_state_name() and
 * job_state_parse(), so the names below are the only place the stored
 * words are written.  The functions that move a job from one state to the
 * next are in jobs.h, one per edge of the diagram.
 *
 * JOB STATES
 *
 *   store_job_create (trainctl run) / store_job_submit (server)
 *        |
 *        v
 *     queued --jobs_mark_starting--> starting --jobs_mark_running--> running
 *      ^  ^                   (server: jobs_launch)                 |  ^
 *      |  |                                     jobs_mark_restarting|  |jobs_mark_running
 *      |  |                                                         v  |
 *      |  |                                                      restarting
 *      |  +---jobs_requeue--- paused <------jobs_mark_held------ running
 *      +------jobs_requeue--- preempted <---jobs_mark_held------ running
 *      +------jobs_requeue--- lost (the server, while restarts are left)
 *
 *   starting, running, restarting --jobs_finish--> succeeded | failed | killed
 *   starting, running, restarting --jobs_mark_lost--> lost
 *   running, restarting --jobs_mark_queued--> queued (Slurm requeued it)
 *   queued --jobs_mark_running--> running (a Slurm job's driver, when it
 *                    starts before the server's poll saw Slurm's RUNNING)
 *   running --jobs_mark_running--> running (a requeued Slurm job's next
 *                    attempt, its driver ahead of the poll that sees PENDING)
 *   queued, preempted --jobs_requeue--> paused (paused before it ran again)
 *   queued, paused, preempted --jobs_finish--> killed (stopped before it ran;
 *                    a queued Slurm job may also end as Slurm says)
 *
 * job_state_can() is this diagram as a table; the store refuses a write of
 * a state it does not draw (store_job_edge), naming the job and both states.
 *
 * Three kinds of state:
 *   active    starting, running, restarting: a supervisor owns the job and
 *             must be alive (store_job_reconcile marks it lost otherwise);
 *   waiting   queued, paused, preempted: nothing runs; `trainctl server`
 *             (or Slurm) starts it again;
 *   terminal  succeeded, failed, killed, lost: the end is recorded.  Only
 *             the server moves a job out of one (a lost job it requeues);
 *             the first end recorded stays (a second jobs_finish or
 *             jobs_mark_lost of the same job changes nothing).
 *
 * Why a job was asked to stop (the stop_reason column) is enum job_stop:
 * its supervisor records the state that reason names (job_stop_state).
 */
#ifndef TC_JOBS_STATE_H
#define TC_JOBS_STATE_H

#include <stdbool.h>
#include <stddef.h>

enum job_state {
	JOB_QUEUED,
	JOB_STARTING,
	JOB_RUNNING,
	JOB_RESTARTING,
	JOB_PAUSED,
	JOB_PREEMPTED,
	JOB_SUCCEEDED,
	JOB_FAILED,
	JOB_KILLED,
	JOB_LOST,
};
#define JOB_NSTATES (JOB_LOST + 1)

/* The stored word ("running"); "?" for a value outside the enum. */
const char *job_state_name(enum job_state s);
/* The state called name (len bytes of it); false for an unknown word. */
bool job_state_parse(const char *name, size_t len, enum job_state *out);
bool job_state_terminal(enum job_state s);
bool job_state_active(enum job_state s);
bool job_state_waiting(enum job_state s);
/* Is from -> to an edge of the diagram above? */
bool job_state_can(enum job_state from, enum job_state to);

/* Why the server (or `trainctl stop`) asked a job to stop. */
enum job_stop {
	JOB_STOP_NONE,      /* not asked: a plain signal */
	JOB_STOP_STOPPED,   /* trainctl stop: ends killed */
	JOB_STOP_PAUSED,    /* trainctl pause: held until resumed */
	JOB_STOP_PREEMPTED, /* the scheduler needs its devices: queued again */
};

/* The stored word ("paused"); NULL for JOB_STOP_NONE. */
const char *job_stop_name(enum job_stop why);
/* NULL or an unknown word give JOB_STOP_NONE. */
enum job_stop job_stop_parse(const char *name);
/* The state a supervisor stopped for why records (killed, paused, preempted). */
enum job_state job_stop_state(enum job_stop why);

/*
 * SWEEP STATES (sweeps.state; sweep/sweep.h)
 *
 *   running --every trial ended--> done
 *   running --the objective was never logged (sweep.h note 7)--> failed
 *   running --trainctl sweep stop, a signal to its driver--> stopped
 *
 * A local sweep whose driver is gone reads stopped (sweep_show_json).
 *
 * The store enforces the sweep and trial diagrams as the job's: an edge
 * they do not draw is refused, an end written over an end keeps the first
 * (store_sweep_set_state, store_trial_update).  Endpoint rows are not
 * checked: a job that runs again starts its endpoints again.
 */
enum sweep_state {
	SWEEP_RUNNING,
	SWEEP_DONE,
	SWEEP_FAILED,
	SWEEP_STOPPED,
};
#define SWEEP_NSTATES (SWEEP_STOPPED + 1)

/*
 * TRIAL STATES (sweep_trials.state; sweep/sweep.h note 3)
 *
 *   pending --started--> running --its job ended--> succeeded | failed |
 *                                  killed | stopped (early stopping) |
 *                                  failed-objective (sweep.h notes 6, 7)
 *   pending --could not be started--> failed
 *   pending, running --the sweep was stopped--> killed
 *   succeeded --the objective was never logged (note 7)--> failed-objective
 */
enum trial_state {
	TRIAL_PENDING,
	TRIAL_RUNNING,
	TRIAL_SUCCEEDED,
	TRIAL_FAILED,
	TRIAL_KILLED,
	TRIAL_STOPPED,
	TRIAL_FAILED_OBJECTIVE,
};
#define TRIAL_NSTATES (TRIAL_FAILED_OBJECTIVE + 1)

/*
 * ENDPOINT STATES (job_endpoints.state; endpoint/endpoint.h)
 *
 *   (started) --> running | failed (did not start)
 *   running --its process ended by itself--> exited | failed (exit 127 in an image)
 *   running --stopped with the job--> stopped
 */
enum endpoint_state {
	ENDPOINT_RUNNING,
	ENDPOINT_FAILED,
	ENDPOINT_EXITED,
	ENDPOINT_STOPPED,
};
#define ENDPOINT_NSTATES (ENDPOINT_STOPPED + 1)

/* The stored words, as job_state_name: "?" outside the enum. */
const char *sweep_state_name(enum sweep_state s);
const char *trial_state_name(enum trial_state s);
const char *endpoint_state_name(enum endpoint_state s);
/* The state called name (NUL-terminated); false for NULL or an unknown word. */
bool sweep_state_parse(const char *name, enum sweep_state *out);
bool trial_state_parse(const char *name, enum trial_state *out);
bool endpoint_state_parse(const char *name, enum endpoint_state *out);
/* Is word (a stored word, or NULL) the name of state s? */
bool sweep_state_is(const char *word, enum sweep_state s);
bool trial_state_is(const char *word, enum trial_state s);
bool endpoint_state_is(const char *word, enum endpoint_state s);
/* Is s an end (nothing moves it on, but the edges drawn above)? */
bool sweep_state_final(enum sweep_state s);
bool trial_state_final(enum trial_state s);
bool endpoint_state_final(enum endpoint_state s);
/* Is from -> to an edge of the diagrams above? */
bool sweep_state_can(enum sweep_state from, enum sweep_state to);
bool trial_state_can(enum trial_state from, enum trial_state to);
bool endpoint_state_can(enum endpoint_state from, enum endpoint_state to);
/*
 * May a stored row holding the word from (NULL or unknown: none checked)
 * be written with the word to?  WORD_WRITE along a drawn edge or to the
 * same state; WORD_KEEP for an end over an end (the first stays, as a
 * job's); WORD_REFUSE otherwise, and for a to that is no state.  The store
 * asks this before each write (store_sweep_set_state, store_trial_update).
 */
enum word_edge { WORD_WRITE, WORD_KEEP, WORD_REFUSE };
enum word_edge sweep_word_edge(const char *from, const char *to);
enum word_edge trial_word_edge(const char *from, const char *to);
enum word_edge endpoint_word_edge(const char *from, const char *to);

/*
 * Events that are not changes of state (docs/diagnostics.md): a row of
 * the events table with the job's current state and the reason
 * "<name>: text", where name is job_note_name's.  The JSON form of such
 * an event carries "kind": name.  No reason of a change of state starts
 * so ("hang detected: ..." is the restart's and the failure's).
 */
enum job_note {
	JOB_NOTE_NONE = 0,
	JOB_NOTE_HANG,            /* "hang": no progress past the watchdog's timeout */
	JOB_NOTE_STRAGGLER,       /* "straggler": a rank slower than the others, persistently */
	JOB_NOTE_LOG_MATCH,       /* "log_match": an on_log: pattern matched */
	JOB_NOTE_RESUME_MISMATCH, /* "resume_mismatch": the first step after a resume is not ckpt + 1 */
	JOB_NOTE_UNHEALTHY,       /* "unhealthy": a node's device failed its health check */
	JOB_NOTE_NODE_EXCLUDED,   /* "node_excluded": a node left out of the next attempts (on_log exclude_node) */
	JOB_NOTE_DISK_FULL,       /* "disk_full": a file system the job writes is full */
	JOB_NOTE_IDLE,            /* "idle": limits.idle_minutes: the stop is near, or called off */
	/*
	 * "node_lost": one per restart a lost node caused (a multi-node job's
	 * node ended without reporting): the job's restarts after a lost node
	 * are these notes, the others followed a failing worker
	 * (job_restart_causes)
	 */
	JOB_NOTE_NODE_LOST,
	/* "wait_nodes": an elastic job below nodes.min waits for a node to be usable again */
	JOB_NOTE_WAIT_NODES,
	/*
	 * "round": a multi-node job's attempt started, who runs it (a line,
	 * then its record as JSON: jobs.h job_round_text, job_rounds_json)
	 */
	JOB_NOTE_ROUND,
	/* "spares_ignored": spares: in a job on one machine, which has no node to replace */
	JOB_NOTE_SPARES_IGNORED,
};
const char *job_note_name(enum job_note n);
/* The note a reason text is, JOB_NOTE_NONE for a change of state's. */
enum job_note job_note_of_reason(const char *reason);

#endif
