/*
 * sink.c -- the job records of a supervisor, through the store itself
 * (direct) or as events to the hub (remote); see sink.h.
 */
#include "hub/sink.h"
#include "hub/hub_int.h"
#include "hub/hub.h"
#include "core/xalloc.h"
#include "jobs/jobs.h"

#include <stdlib.h>

struct sink {
	struct store *st;     /* direct: borrowed (own_st: sink_direct_open's, owned) */
	struct hub_remote *r; /* remote: owned (shared_r: sink_thread_open's, borrowed) */
	bool own_st, shared_r;
};

struct sink *sink_direct(struct store *st)
{
	struct sink *k = xcalloc(1, sizeof(*k));
	k->st = st;
	return k;
}

int sink_direct_open(const char *home, struct sink **out, struct tc_err *err)
{
	struct store *st = NULL;
	*out = NULL;
	int rc = store_open(home, &st, err);
	if (rc)
		return rc;
	*out = sink_direct(st);
	(*out)->own_st = true;
	return 0;
}

struct sink *sink_remote(struct hub_remote *r)
{
	struct sink *k = xcalloc(1, sizeof(*k));
	k->r = r;
	return k;
}

int sink_thread_open(struct sink *k, const char *home, struct sink **out, struct tc_err *err)
{
	*out = NULL;
	if (!k->r)
		return sink_direct_open(home, out, err);
	struct sink *t = xcalloc(1, sizeof(*t));
	t->r = k->r;
	t->shared_r = true;
	*out = t;
	return 0;
}

void sink_close(struct sink *k)
{
	if (!k)
		return;
	if (!k->shared_r)
		hub_remote_close(k->r);
	if (k->own_st)
		store_close(k->st);
	free(k);
}

struct store *sink_store(const struct sink *k)
{
	return k ? k->st : NULL;
}

struct hub_remote *sink_remote_of(const struct sink *k)
{
	return k ? k->r : NULL;
}

int sink_mark(struct sink *k, const char *job, enum job_state state, const char *why,
	      struct tc_err *err)
{
	if (k->r)
		return hub_ev_mark(k->r, job, state, why, err);
	return hub_apply_mark(k->st, job, state, why, err);
}

int sink_finish(struct sink *k, const char *job, enum job_state end, int exit_code,
		const char *root_cause, const char *why, struct tc_err *err)
{
	if (k->r)
		return hub_ev_finish(k->r, job, end, exit_code, root_cause, why, err);
	return jobs_finish(k->st, job, end, exit_code, root_cause, why, err);
}

int sink_restarts(struct sink *k, const char *job, int restarts, struct tc_err *err)
{
	if (k->r)
		return hub_ev_restarts(k->r, job, restarts, err);
	return store_job_set_restarts(k->st, job, restarts, err);
}

int sink_note(struct sink *k, const char *job, enum job_note n, const char *text,
	      struct tc_err *err)
{
	if (k->r)
		return hub_ev_note(k->r, job, n, text, err);
	return jobs_note(k->st, job, n, text, err);
}

int sink_node_health(struct sink *k, const char *job, const char *node, const char *type, int id,
		     const char *reason, struct tc_err *err)
{
	if (k->r)
		return hub_ev_node_health(k->r, job, node, type, id, reason, err);
	return store_node_health_set(k->st, node, type, id, reason, job, err);
}

int sink_started(struct sink *k, const struct store_start *s, struct tc_err *err)
{
	if (k->r)
		return hub_ev_started(k->r, s, err);
	return jobs_mark_started(k->st, s, err);
}

int sink_worker_end(struct sink *k, const char *job, int attempt, int rank, int exit_code,
		    int signal, struct tc_err *err)
{
	if (k->r)
		return hub_ev_worker_end(k->r, job, attempt, rank, exit_code, signal, err);
	return store_worker_end(k->st, job, attempt, rank, exit_code, signal, err);
}

int sink_metrics(struct sink *k, struct store_mbatch *b, struct tc_err *err)
{
	if (k->r)
		return hub_ev_metrics(k->r, b, err);
	return store_mbatch_write(k->st, b, err);
}

int sink_ckpt_put(struct sink *k, const char *job, const struct store_ckpt *c,
		  struct tc_err *err)
{
	if (k->r)
		return hub_ev_ckpt_put(k->r, job, -1, c, err);
	return store_ckpt_put(k->st, job, c, err);
}

int sink_ckpt_state(struct sink *k, const char *job, const char *name, const char *state,
		    struct tc_err *err)
{
	if (k->r)
		return hub_ev_ckpt_state(k->r, job, -1, name, state, err);
	return store_ckpt_set_state(k->st, job, name, state, err);
}

int sink_ckpt_node_put(struct sink *k, const char *job, int node, const struct store_ckpt *c,
		       struct tc_err *err)
{
	if (k->r)
		return hub_ev_ckpt_put(k->r, job, node < 0 ? 0 : node, c, err);
	return store_ckpt_node_put(k->st, job, node, c, err);
}

int sink_ckpt_node_state(struct sink *k, const char *job, int node, const char *name,
			 const char *state, struct tc_err *err)
{
	if (k->r)
		return hub_ev_ckpt_state(k->r, job, node < 0 ? 0 : node, name, state, err);
	return store_ckpt_node_set_state(k->st, job, node, name, state, err);
}

int sink_slurm(struct sink *k, const char *job, const char *slurm_job, const char *nodes,
	       const char *slurm_state, struct tc_err *err)
{
	if (k->r)
		return hub_ev_slurm(k->r, job, slurm_job, nodes, slurm_state, err);
	return store_slurm_set(k->st, job, slurm_job, nodes, slurm_state, err);
}

int sink_delivery(struct sink *k, const char *job, const struct store_delivery *d,
		  struct tc_err *err)
{
	if (k->r)
		return hub_ev_delivery(k->r, job, d, err);
	return store_delivery_add(k->st, job, d, err);
}

int sink_notify(struct sink *k, const char *job, const struct notify_msg *m, struct tc_err *err)
{
	return k->r ? hub_ev_notify(k->r, job, m, err) : 0;
}

int sink_endpoint(struct sink *k, const char *job, const struct store_endpoint *e,
		  struct tc_err *err)
{
	if (k->r)
		return hub_ev_endpoint(k->r, job, e, err);
	return store_endpoint_put(k->st, job, e, err);
}

int sink_file(struct sink *k, const char *job, const char *rel, long long off,
	      const void *data, size_t len, struct tc_err *err)
{
	if (k->r)
		return hub_ev_file(k->r, job, rel, off, data, len, err);
	return 0; /* the run folder is the hub's own */
}

int sink_create(struct sink *k, const struct job_row *job, struct tc_err *err)
{
	if (k->r)
		return tc_error(err, TC_EUSAGE, "job %s: its hub creates its record", job->id);
	return store_job_create(k->st, job, err);
}

int sink_supervisor(struct sink *k, const char *job, pid_t pid, unsigned long long ticks,
		    struct tc_err *err)
{
	if (k->r)
		return 0; /* the server that started us recorded it */
	return store_job_set_supervisor(k->st, job, pid, ticks, err);
}

int sink_device_health(struct sink *k, const char *job, const char *node, const char *type,
		       int id, const char *reason, struct tc_err *err)
{
	if (k->r)
		return node ? hub_ev_node_health(k->r, job, node, type, id, reason, err) : 0;
	return store_device_health_set(k->st, type, id, reason, err);
}

int sink_stop_reason(struct sink *k, const char *job, enum job_stop *asked, struct tc_err *err)
{
	*asked = JOB_STOP_NONE;
	if (k->st)
		return store_job_stop_reason(k->st, job, asked, err);
	int restarts = 0;
	return hub_job_status(job, 10, asked, &restarts, err);
}

int sink_begin(struct sink *k, struct tc_err *err)
{
	if (k->r)
		return 0; /* the sender batches on its own: a group is what was appended */
	return store_begin(k->st, err);
}

int sink_commit(struct sink *k, int rc, struct tc_err *err)
{
	if (k->r)
		return rc ? rc : hub_remote_kick(k->r, err);
	return store_commit(k->st, rc, err);
}
