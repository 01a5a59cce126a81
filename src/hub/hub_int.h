/*
 * hub_int.h -- private to src/hub/: the events a remote sink sends
 * (event.c encodes them, hub.c applies them) and the sender (remote.c).
 */
#ifndef TC_HUB_INT_H
#define TC_HUB_INT_H

#include "core/err.h"
#include "core/sbuf.h"
#include "hub/sink.h"
#include "store/store.h"

struct hub;
struct hub_remote;

/* ---- sink.c ---- */
struct sink *sink_remote(struct hub_remote *r);
struct hub_remote *sink_remote_of(const struct sink *k);

/* ---- event.c: one call = one event appended to the remote's journal ---- */
int hub_ev_mark(struct hub_remote *r, const char *job, enum job_state state, const char *why,
		struct tc_err *err);
int hub_ev_finish(struct hub_remote *r, const char *job, enum job_state end, int exit_code,
		  const char *root_cause, const char *why, struct tc_err *err);
int hub_ev_restarts(struct hub_remote *r, const char *job, int restarts, struct tc_err *err);
int hub_ev_note(struct hub_remote *r, const char *job, enum job_note n, const char *text,
		struct tc_err *err);
int hub_ev_node_health(struct hub_remote *r, const char *job, const char *node, const char *type,
		       int id, const char *reason, struct tc_err *err);
int hub_ev_started(struct hub_remote *r, const struct store_start *s, struct tc_err *err);
int hub_ev_worker_end(struct hub_remote *r, const char *job, int attempt, int rank,
		      int exit_code, int signal, struct tc_err *err);
int hub_ev_metrics(struct hub_remote *r, struct store_mbatch *b, struct tc_err *err);
/* node < 0: the job's record; else node's own ("node" in the event) */
int hub_ev_ckpt_put(struct hub_remote *r, const char *job, int node, const struct store_ckpt *c,
		    struct tc_err *err);
int hub_ev_ckpt_state(struct hub_remote *r, const char *job, int node, const char *name,
		      const char *state, struct tc_err *err);
int hub_ev_slurm(struct hub_remote *r, const char *job, const char *slurm_job,
		 const char *nodes, const char *slurm_state, struct tc_err *err);

int hub_ev_delivery(struct hub_remote *r, const char *job, const struct store_delivery *d,
		    struct tc_err *err);
int hub_ev_notify(struct hub_remote *r, const char *job, const struct notify_msg *m,
		  struct tc_err *err);
int hub_ev_endpoint(struct hub_remote *r, const char *job, const struct store_endpoint *e,
		    struct tc_err *err);
int hub_ev_file(struct hub_remote *r, const char *job, const char *rel, long long off,
		const void *data, size_t len, struct tc_err *err);

/*
 * Would this event ('{' "ev":...) change the live job, so that a fenced
 * node's is refused (rdzv.h note 5)?  (event.c)
 */
bool hub_ev_fenced(const char *line, size_t len);

/*
 * hub.c: the seq of a journal line ({"seq":N,...) in [p, end), and in *rest
 * where the event after the seq's comma starts; -1 when the line has none.
 */
long long hub_line_seq(const char *p, const char *end, const char **rest);

/* A state that is not an end, through its jobs_* transition (direct sinks and the hub). */
int hub_apply_mark(struct store *st, const char *job, enum job_state state, const char *why,
		   struct tc_err *err);

/*
 * Apply one event line (without its seq) to job in st; *mb is the job's
 * metrics batch, created on first use (series rows are looked up once).
 * TC_ESTORE: the store failed (try again later); other codes: the event
 * is malformed and never will apply.
 */
int hub_apply_line(struct store *st, const char *job, struct store_mbatch **mb,
		   const char *line, size_t len, struct tc_err *err);

/* The whole file rel of job's run folder, written as the folder's owner (event.c). */
int hub_write_run_file(struct store *st, const char *job, const char *rel, const char *text,
		       size_t len, struct tc_err *err);
/* Is name one of the nodes of the Slurm host list ("gpu[01-04,07],cpu3")? (event.c) */
bool hub_nodelist_has(const char *list, const char *name);

/* ---- hub.c, for ingest_journals.c ---- */
/*
 * hub_receive without a secret, for a body the hub's own process read
 * (a journal it took from a run folder): applied as job's stream, with the
 * same checks and dedup; *acked is the stream's acknowledged seq after it.
 */
int hub_apply_local(struct hub *h, const char *job, const char *stream, const char *body,
		    size_t len, long long *acked, struct tc_err *err);
/* An event row of job that is no change of state (store_job_event). */
int hub_job_event(struct hub *h, const char *job, const char *reason, struct tc_err *err);

/* ---- remote.c ---- */
/* The remote's job id (events of other jobs are refused). */
const char *hub_remote_job(const struct hub_remote *r);
/* Append body (the event's members after "seq", closing brace included) to the journal. */
int hub_remote_append(struct hub_remote *r, const char *body, size_t len, struct tc_err *err);
/* Wake the sender: what was appended goes out now. */
int hub_remote_kick(struct hub_remote *r, struct tc_err *err);
/* Send what is left (waiting at most the remote's wait time), stop and free. */
void hub_remote_close(struct hub_remote *r);


#endif
