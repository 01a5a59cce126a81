/*
 * sink.c -- the job records of a supervisor, through the store itself
 * (direct) or as events to the hub (remote); see sink.h.
 */
#include "hub/sink.h"
#include "hub/hub_int.h"
#include "hub/hub.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "jobs/jobs.h"
#include "store/store_ckpt.h"
#include "store/store_metrics.h"

#include <stdlib.h>
#include <string.h>

/* ---- records a full file system refused (sink.h note 5) ---- */

enum kept_kind {
	KEPT_MARK, KEPT_FINISH, KEPT_RESTARTS, KEPT_NOTE, KEPT_WORKER_END, KEPT_STARTED,
	KEPT_METRICS, KEPT_CKPT_PUT, KEPT_CKPT_STATE, KEPT_CKPT_NODE_STATE, KEPT_SUPERVISOR,
};

/*
 * One call of the sink, its arguments by kind.  A call fills one with
 * borrowed pointers; a kept one (kept_copy) owns copies of them.
 */
struct kept {
	enum kept_kind kind;
	char *job, *s1, *s2;
	long long i1, i2, i3, i4;
	struct store_ckpt ck;
	struct worker_row *rows;
	size_t nrows;
	struct sbuf blob; /* metrics: the batch's records packed (store_mbatch_pack) */
	struct kept *next;
};

/* Metrics beyond this many bytes kept are refused as before (the ingest drops them). */
#define KEPT_METRICS_MAX (64u << 20)
/* A record that waits is tried again with the next call, at most this often. */
#define KEPT_RETRY_MS 1000

struct sink {
	struct store *st;     /* direct: borrowed (own_st: sink_direct_open's, owned) */
	struct hub_remote *r; /* remote: owned (shared_r: sink_thread_open's, borrowed) */
	bool own_st, shared_r;
	/* direct only: what waits for space, oldest first, and the current group's records */
	struct kept *head, **tail, *grp, **grp_tail;
	bool keep; /* sink_keep_when_full: else a refusal fails the call, as any failure */
	bool in_grp, grp_txn, grp_kept;
	size_t kept_bytes;
	long long next_try; /* now_mono_ms() before which a call does not try the kept ones */
	char *why;          /* the last refusal's message */
	char *dropped;      /* the last kept record that could not be written at all, unsaid */
	int dropped_code;
};

static char *dup_or_null(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

static struct kept *kept_copy(const struct kept *r)
{
	struct kept *c = xcalloc(1, sizeof(*c));
	*c = *r;
	c->next = NULL;
	c->job = dup_or_null(r->job);
	c->s1 = dup_or_null(r->s1);
	c->s2 = dup_or_null(r->s2);
	c->ck.name = dup_or_null(r->ck.name);
	c->ck.dir = dup_or_null(r->ck.dir);
	c->ck.checksum = dup_or_null(r->ck.checksum);
	c->ck.files_json = dup_or_null(r->ck.files_json);
	c->ck.state = dup_or_null(r->ck.state);
	if (r->nrows) {
		c->rows = xcalloc(r->nrows, sizeof(*c->rows));
		memcpy(c->rows, r->rows, r->nrows * sizeof(*c->rows));
	}
	sbuf_init(&c->blob, 0);
	if (r->blob.len)
		sbuf_add(&c->blob, r->blob.buf, r->blob.len);
	return c;
}

static void kept_free(struct kept *c)
{
	while (c) {
		struct kept *next = c->next;
		free(c->job);
		free(c->s1);
		free(c->s2);
		free(c->ck.name);
		free(c->ck.dir);
		free(c->ck.checksum);
		free(c->ck.files_json);
		free(c->ck.state);
		free(c->rows);
		sbuf_release(&c->blob);
		free(c);
		c = next;
	}
}

/* The store call a record stands for. */
static int kept_apply(struct store *st, const struct kept *r, struct tc_err *err)
{
	switch (r->kind) {
	case KEPT_MARK:
		return hub_apply_mark(st, r->job, (enum job_state)r->i1, r->s1, err);
	case KEPT_FINISH:
		return jobs_finish(st, r->job, (enum job_state)r->i1, (int)r->i2, r->s1, r->s2, err);
	case KEPT_RESTARTS:
		return store_job_set_restarts(st, r->job, (int)r->i1, err);
	case KEPT_NOTE:
		return jobs_note(st, r->job, (enum job_note)r->i1, r->s1, err);
	case KEPT_WORKER_END:
		return store_worker_end(st, r->job, (int)r->i1, (int)r->i2, (int)r->i3, (int)r->i4,
					err);
	case KEPT_STARTED: {
		struct store_start s = { .job_id = r->job, .attempt = (int)r->i1, .workers = r->rows,
					 .nworkers = r->nrows, .why = r->s1 };
		return jobs_mark_started(st, &s, err);
	}
	case KEPT_METRICS: {
		struct store_mbatch *b = store_mbatch_new(r->job);
		int rc = store_mbatch_unpack(b, r->blob.buf, r->blob.len, err);
		if (!rc)
			rc = store_mbatch_write(st, b, err);
		store_mbatch_free(b);
		return rc;
	}
	case KEPT_CKPT_PUT:
		return store_ckpt_put(st, r->job, &r->ck, err);
	case KEPT_CKPT_STATE:
		return store_ckpt_set_state(st, r->job, r->s1, r->s2, err);
	case KEPT_CKPT_NODE_STATE:
		return store_ckpt_node_set_state(st, r->job, (int)r->i1, r->s1, r->s2, err);
	case KEPT_SUPERVISOR:
		return store_job_set_supervisor(st, r->job, (pid_t)r->i1, (unsigned long long)r->i2,
						err);
	}
	return tc_error(err, TC_EUSAGE, "sink: unknown record kind %d", (int)r->kind);
}

/* A failure space coming back will cure (a sink that keeps): the file system refused a write. */
static bool refused(const struct sink *k, int rc)
{
	return k->keep && rc == TC_ESTORE && store_write_refused(k->st) && !store_read_only(k->st);
}

/* err's message becomes the sink's reason to wait; err is left empty (the record is kept). */
static void take_why(struct sink *k, struct tc_err *err)
{
	k->next_try = now_mono_ms() + KEPT_RETRY_MS;
	if (!err)
		return;
	if (err->msg) {
		free(k->why);
		k->why = err->msg;
		err->msg = NULL;
	}
	err->code = 0;
}

static void keep(struct sink *k, struct kept *c)
{
	if (!k->tail)
		k->tail = &k->head;
	*k->tail = c;
	k->tail = &c->next;
	k->kept_bytes += c->blob.len;
}

/* Write the kept records in order; false when the file system still refuses them. */
static bool write_kept(struct sink *k)
{
	while (k->head) {
		struct tc_err e = TC_ERR_INIT;
		int arc = kept_apply(k->st, k->head, &e);
		if (arc && refused(k, arc)) {
			take_why(k, &e);
			return false;
		}
		if (arc) { /* not the disk: it cannot be written at all; the next sink_flush says so */
			free(k->dropped);
			k->dropped = e.msg ? e.msg : xstrdup("database");
			k->dropped_code = arc;
			e.msg = NULL;
		}
		tc_err_release(&e);
		struct kept *c = k->head;
		k->head = c->next;
		if (!k->head)
			k->tail = &k->head;
		k->kept_bytes -= c->blob.len;
		c->next = NULL;
		kept_free(c);
	}
	return true;
}

int sink_flush(struct sink *k, struct tc_err *err)
{
	if (!k)
		return 0;
	if (!write_kept(k))
		return tc_error(err, TC_ESTORE, "%s", k->why ? k->why : "the file system is full");
	if (!k->dropped)
		return 0;
	int rc = tc_error(err, k->dropped_code, "%s", k->dropped);
	free(k->dropped);
	k->dropped = NULL;
	return rc;
}

void sink_keep_when_full(struct sink *k)
{
	if (k && k->st)
		k->keep = true;
}

bool sink_kept(const struct sink *k)
{
	return k && k->head;
}

bool sink_kept_end(const struct sink *k, enum job_state *end, int *exit_code,
		   const char **root_cause)
{
	for (const struct kept *c = k ? k->head : NULL; c; c = c->next)
		if (c->kind == KEPT_FINISH) {
			*end = (enum job_state)c->i1;
			*exit_code = (int)c->i2;
			*root_cause = c->s1;
			return true;
		}
	return false;
}

/* What waits is tried again before a new record, so that records keep their order. */
static void retry_kept(struct sink *k)
{
	if (!k->head || now_mono_ms() < k->next_try)
		return;
	(void)write_kept(k);
}

/* A direct call: written now, or kept when the file system refuses it (note 5). */
static int put(struct sink *k, const struct kept *r, struct tc_err *err)
{
	if (k->in_grp) {
		if (!k->grp_kept) {
			int rc = kept_apply(k->st, r, err);
			if (rc && !refused(k, rc))
				return rc;
			if (rc) {
				take_why(k, err);
				k->grp_kept = true;
			}
		}
		struct kept *c = kept_copy(r);
		*k->grp_tail = c;
		k->grp_tail = &c->next;
		return 0;
	}
	retry_kept(k);
	if (!k->head) {
		int rc = kept_apply(k->st, r, err);
		if (!rc || !refused(k, rc))
			return rc;
		take_why(k, err);
	}
	keep(k, kept_copy(r));
	return 0;
}

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
	kept_free(k->grp);
	kept_free(k->head); /* the caller waited with sink_flush as long as it would */
	free(k->why);
	free(k->dropped);
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
	return put(k, &(struct kept){ .kind = KEPT_MARK, .job = (char *)job, .i1 = state,
				    .s1 = (char *)why }, err);
}

int sink_finish(struct sink *k, const char *job, enum job_state end, int exit_code,
		const char *root_cause, const char *why, struct tc_err *err)
{
	if (k->r)
		return hub_ev_finish(k->r, job, end, exit_code, root_cause, why, err);
	return put(k, &(struct kept){ .kind = KEPT_FINISH, .job = (char *)job, .i1 = end,
				    .i2 = exit_code, .s1 = (char *)root_cause, .s2 = (char *)why },
		   err);
}

int sink_restarts(struct sink *k, const char *job, int restarts, struct tc_err *err)
{
	if (k->r)
		return hub_ev_restarts(k->r, job, restarts, err);
	return put(k, &(struct kept){ .kind = KEPT_RESTARTS, .job = (char *)job, .i1 = restarts },
		   err);
}

int sink_note(struct sink *k, const char *job, enum job_note n, const char *text,
	      struct tc_err *err)
{
	if (k->r)
		return hub_ev_note(k->r, job, n, text, err);
	return put(k, &(struct kept){ .kind = KEPT_NOTE, .job = (char *)job, .i1 = n,
				    .s1 = (char *)text }, err);
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
	if (s->create) { /* the job's first row: nothing to keep it for, the job cannot start */
		retry_kept(k);
		return jobs_mark_started(k->st, s, err);
	}
	return put(k, &(struct kept){ .kind = KEPT_STARTED, .job = (char *)s->job_id,
				    .i1 = s->attempt, .rows = (struct worker_row *)s->workers,
				    .nrows = s->nworkers, .s1 = (char *)s->why }, err);
}

int sink_worker_end(struct sink *k, const char *job, int attempt, int rank, int exit_code,
		    int signal, struct tc_err *err)
{
	if (k->r)
		return hub_ev_worker_end(k->r, job, attempt, rank, exit_code, signal, err);
	return put(k, &(struct kept){ .kind = KEPT_WORKER_END, .job = (char *)job, .i1 = attempt,
				    .i2 = rank, .i3 = exit_code, .i4 = signal }, err);
}

int sink_metrics(struct sink *k, struct store_mbatch *b, struct tc_err *err)
{
	if (k->r)
		return hub_ev_metrics(k->r, b, err);
	if (k->in_grp) /* metrics are no part of a group's records */
		return store_mbatch_write(k->st, b, err);
	retry_kept(k);
	if (!k->head) {
		int rc = store_mbatch_write(k->st, b, err);
		if (!rc || !refused(k, rc))
			return rc;
		if (k->kept_bytes + store_mbatch_bytes(b) > KEPT_METRICS_MAX)
			return rc; /* kept enough: the ingest keeps or drops the rest (ingest.h) */
		take_why(k, err);
	} else if (k->kept_bytes + store_mbatch_bytes(b) > KEPT_METRICS_MAX) {
		return tc_error(err, TC_ESTORE, "%s", k->why ? k->why : "the disk is full");
	}
	struct kept *c = xcalloc(1, sizeof(*c));
	c->kind = KEPT_METRICS;
	c->job = xstrdup(store_mbatch_job(b));
	sbuf_init(&c->blob, 0);
	store_mbatch_pack(b, &c->blob); /* the records leave b as a write's would */
	keep(k, c);
	return 0;
}

int sink_ckpt_put(struct sink *k, const char *job, const struct store_ckpt *c,
		  struct tc_err *err)
{
	if (k->r)
		return hub_ev_ckpt_put(k->r, job, -1, c, err);
	return put(k, &(struct kept){ .kind = KEPT_CKPT_PUT, .job = (char *)job, .ck = *c }, err);
}

int sink_ckpt_state(struct sink *k, const char *job, const char *name, const char *state,
		    struct tc_err *err)
{
	if (k->r)
		return hub_ev_ckpt_state(k->r, job, -1, name, state, err);
	return put(k, &(struct kept){ .kind = KEPT_CKPT_STATE, .job = (char *)job,
				    .s1 = (char *)name, .s2 = (char *)state }, err);
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
	return put(k, &(struct kept){ .kind = KEPT_CKPT_NODE_STATE, .job = (char *)job, .i1 = node,
				    .s1 = (char *)name, .s2 = (char *)state }, err);
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
	return put(k, &(struct kept){ .kind = KEPT_SUPERVISOR, .job = (char *)job, .i1 = pid,
				    .i2 = (long long)ticks }, err);
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
	retry_kept(k);
	k->in_grp = true;
	k->grp = NULL;
	k->grp_tail = &k->grp;
	/* behind records that wait, the whole group waits: no transaction */
	k->grp_kept = k->head != NULL;
	k->grp_txn = false;
	if (k->grp_kept)
		return 0;
	int rc = store_begin(k->st, err);
	k->grp_txn = !rc;
	k->in_grp = !rc;
	return rc;
}

int sink_commit(struct sink *k, int rc, struct tc_err *err)
{
	if (k->r)
		return rc ? rc : hub_remote_kick(k->r, err);
	if (!k->in_grp)
		return store_commit(k->st, rc, err);
	k->in_grp = false;
	bool kept = k->grp_kept;
	int crc = rc;
	if (k->grp_txn) {
		/* a refused record rolls the whole group back: it is kept whole */
		crc = store_commit(k->st, kept || rc ? (rc ? rc : TC_ESTORE) : 0, kept ? NULL : err);
		if (crc && !rc && !kept && refused(k, crc)) {
			take_why(k, err);
			store_commit(k->st, TC_ESTORE, NULL); /* a failed COMMIT leaves it open */
			kept = true;
		}
	}
	struct kept *g = k->grp;
	k->grp = NULL;
	if (kept && !rc) {
		while (g) {
			struct kept *next = g->next;
			g->next = NULL;
			keep(k, g);
			g = next;
		}
		return 0;
	}
	kept_free(g);
	return crc;
}
