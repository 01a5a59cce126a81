/*
 * sink.h -- where a supervisor's records of a job go: the one interface
 * for everything a supervisor, a node supervisor or the multi-node driver
 * writes about its job (state changes, worker starts and exits with the
 * root cause, metric batches, checkpoint records, Slurm columns).
 *
 * NOTES ON THE DESIGN
 * (1) One writer per job (docs/ARCHITECTURE.md, invariant 3).  The hub is
 *     the process that writes the job's rows: the supervisor itself for a
 *     local `trainctl run` (the embedded default), `trainctl server` for its
 *     jobs, the foreground `trainctl run --backend slurm` for Slurm jobs run
 *     without a server.  Every other supervisor reports to it.
 * (2) Two implementations behind the same calls:
 *       direct  the store itself (sink_direct): each call is the store
 *               call it replaces, so the embedded default costs nothing;
 *       remote  (sink_remote_open, hub/remote.h) each call becomes one
 *               event: appended to the node's journal first, then sent in
 *               batches to the hub, which applies it through hub_apply
 *               (hub/event.h) with the same store calls as direct.
 *     So a record means the same whichever way it travels.
 * (3) State changes name their state (sink_mark) and the hub records them
 *     through the one jobs_* transition of that state (jobs/jobs.h).
 * (4) sink_begin/sink_commit group records: one transaction when direct,
 *     one batch when remote.  Groups do not nest.
 * (5) A full disk loses nothing (docs/reliability.md): a direct sink told
 *     so (sink_keep_when_full) whose write the file system refuses (full,
 *     over quota) keeps the record in memory, returns 0, and writes it
 *     before any later record, with the next call (at most once a second)
 *     or sink_flush.  Its owner waits with sink_flush before it closes it:
 *     sink_close drops what is still kept.  Kept: state changes,
 *     ends, notes, worker starts and ends, restarts, checkpoint rows, the
 *     supervisor's pid, and metrics up to 64 MiB.  A group one of whose
 *     records is refused is rolled back and kept whole.  The job's first
 *     row (sink_create) is never kept: the job cannot start without it.
 *     A remote sink is not changed: its events go through its journal.
 *
 * Ownership: a direct sink borrows its store (sink_direct_open's owns
 * it); sink_close frees the sink and never a borrowed store.  Strings passed in are copied or written at once.
 */
#ifndef TC_HUB_SINK_H
#define TC_HUB_SINK_H

#include <stdbool.h>
#include <sys/types.h>

#include "core/err.h"
#include "jobs/state.h"
#include "store/store.h"

struct sink;

/* The store itself (note 2); st is borrowed and must outlive the sink. */
struct sink *sink_direct(struct store *st);
/*
 * A direct sink over a connection of its own to home's database, which
 * sink_close closes: for a thread of the hub's process (a connection is
 * used from one thread only).
 */
int sink_direct_open(const char *home, struct sink **out, struct tc_err *err);
/*
 * A sink for another thread (a delivery thread): a direct sink's own
 * connection to the store under home (a connection is one thread's), a
 * remote sink's sender shared (it takes events from any thread).
 */
int sink_thread_open(struct sink *k, const char *home, struct sink **out, struct tc_err *err);
/* Flush what a remote sink holds (bounded wait) and free it; NULL is a no-op. */
void sink_close(struct sink *k);
/* The direct sink's store, or NULL for a remote one. */
struct store *sink_store(const struct sink *k);

/* A state that is not an end: starting, running, restarting, queued, paused, preempted. */
int sink_mark(struct sink *k, const char *job, enum job_state state, const char *why,
	      struct tc_err *err);
/* The end (jobs_finish): a terminal state, exit status, root cause. */
int sink_finish(struct sink *k, const char *job, enum job_state end, int exit_code,
		const char *root_cause, const char *why, struct tc_err *err);
int sink_restarts(struct sink *k, const char *job, int restarts, struct tc_err *err);
/* An event that is no change of state (jobs_note: a hang, an on_log match, ...). */
int sink_note(struct sink *k, const char *job, enum job_note n, const char *text,
	      struct tc_err *err);
/*
 * A device of node (its host name, never "") checked by the job's node
 * supervisor: unhealthy for reason, or healthy again (reason NULL); the
 * hub's device_health rows of that node (store_node_health_set).
 */
int sink_node_health(struct sink *k, const char *job, const char *node, const char *type, int id,
		     const char *reason, struct tc_err *err);
/* Workers up (jobs_mark_started); s->create must be NULL for a remote sink. */
int sink_started(struct sink *k, const struct store_start *s, struct tc_err *err);
int sink_worker_end(struct sink *k, const char *job, int attempt, int rank, int exit_code,
		    int signal, struct tc_err *err);
/* Everything queued in b (its pending records leave b when taken). */
int sink_metrics(struct sink *k, struct store_mbatch *b, struct tc_err *err);
int sink_ckpt_put(struct sink *k, const char *job, const struct store_ckpt *c,
		  struct tc_err *err);
int sink_ckpt_state(struct sink *k, const char *job, const char *name, const char *state,
		    struct tc_err *err);
/* The same for node node's own disk (store_ckpt_node_put: nodes with disks of their own). */
int sink_ckpt_node_put(struct sink *k, const char *job, int node, const struct store_ckpt *c,
		       struct tc_err *err);
int sink_ckpt_node_state(struct sink *k, const char *job, int node, const char *name,
			 const char *state, struct tc_err *err);
/* store_slurm_set: NULL leaves a column as is. */
int sink_slurm(struct sink *k, const char *job, const char *slurm_job, const char *nodes,
	       const char *slurm_state, struct tc_err *err);

/* A webhook delivery of the job (store_delivery_add). */
int sink_delivery(struct sink *k, const char *job, const struct store_delivery *d,
		  struct tc_err *err);
/*
 * One event for the server's own webhooks (its --notify-file hooks, whose
 * secrets only the server holds): a remote sink sends it for the hub to
 * deliver (hub.h: hub_notify_relay); a direct sink has no server and
 * does nothing.  The hub takes only the event's own fields from it.
 */
struct notify_msg;
int sink_notify(struct sink *k, const char *job, const struct notify_msg *m, struct tc_err *err);
/* A job's endpoint, its whole row (store_endpoint_put; endpoint/endpoint.h). */
int sink_endpoint(struct sink *k, const char *job, const struct store_endpoint *e,
		  struct tc_err *err);
/*
 * len bytes at off of the run folder's file rel (relative, no ".."): a
 * remote sink sends them for the hub's copy of the run folder (hub.h:
 * hub_ship_*); a direct sink has the folder itself and does nothing.
 */
int sink_file(struct sink *k, const char *job, const char *rel, long long off,
	      const void *data, size_t len, struct tc_err *err);

/*
 * The supervisor's own records (launch/): the job's row a `trainctl run`
 * creates (a remote sink refuses: the hub created it), the supervisor's
 * pid on a job it takes over (remote: the server recorded it when it
 * started us), a device of this host checked (direct: the host's
 * device_health rows; remote: the hub's rows of node, its name, when it
 * is one of a multi-node job, else nothing), and what the server asked
 * of a job a signal stopped (its stop reason).
 */
int sink_create(struct sink *k, const struct job_row *job, struct tc_err *err);
int sink_supervisor(struct sink *k, const char *job, pid_t pid, unsigned long long ticks,
		    struct tc_err *err);
int sink_device_health(struct sink *k, const char *job, const char *node, const char *type,
		       int id, const char *reason, struct tc_err *err);
int sink_stop_reason(struct sink *k, const char *job, enum job_stop *asked, struct tc_err *err);

/* Keep what a full disk refuses (note 5): a direct sink only (a remote one journals, note 2). */
void sink_keep_when_full(struct sink *k);
/*
 * Write what a full disk made the sink keep (note 5): 0 when nothing
 * waits any more; TC_ESTORE with the file system's refusal while records
 * still wait (sink_kept), or the error of a kept record that could not be
 * written for another reason (it is dropped, the rest written).
 */
int sink_flush(struct sink *k, struct tc_err *err);
bool sink_kept(const struct sink *k);
/*
 * The job's end among the kept records (sink_finish's arguments): true
 * when there is one; *root_cause (may be NULL) is the sink's, valid until
 * the next call.
 */
bool sink_kept_end(const struct sink *k, enum job_state *end, int *exit_code,
		   const char **root_cause);

/* Group what follows (note 4); commit writes or sends it (rc != 0: rolled back when direct). */
int sink_begin(struct sink *k, struct tc_err *err);
int sink_commit(struct sink *k, int rc, struct tc_err *err);

#endif
