/*
 * hub.c -- the hub's side of the channel (hub.h): check a batch's secret,
 * apply its events with the acknowledgement in one transaction, and a
 * standalone HTTP listener for hubs that are not `trainctl server`.
 */
#include "hub/hub.h"
#include "hub/hub_int.h"
#include "hub/rdzv.h"
#include "core/json.h"
#include "core/lazylib.h"
#include "core/reqbody.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "report/report.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

struct hub_job {
	char *id;
	char *sha;               /* the secret's SHA-256, hex */
	struct store_mbatch *mb; /* its metrics batch: series rows looked up once */
	/* when each stream's last batch came in (hub_heard_each): a node's lag */
	struct heard { char *stream; double at; } *heard;
	size_t nheard, heard_alloc;
	struct rdzv *rz; /* its rendezvous round (rdzv.h), read from the store on first use */
};

struct hub {
	struct store *st;
	pthread_mutex_t mu; /* st and jobs: one batch at a time, as SQLite has one writer */
	struct hub_job *jobs;
	size_t njobs, alloc;
	void (*warn)(void *ctx, const char *msg); /* hub_set_warn's, or NULL */
	void *warn_ctx;
};

int hub_new(const char *home, struct hub **out, struct tc_err *err)
{
	struct hub *h = xcalloc(1, sizeof(*h));
	int rc = store_open(home, &h->st, err);
	if (rc) {
		free(h);
		*out = NULL;
		return rc;
	}
	pthread_mutex_init(&h->mu, NULL);
	*out = h;
	return 0;
}

void hub_set_warn(struct hub *h, void (*warn)(void *ctx, const char *msg), void *ctx)
{
	h->warn = warn;
	h->warn_ctx = ctx;
}

void hub_free(struct hub *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < h->njobs; i++) {
		free(h->jobs[i].id);
		free(h->jobs[i].sha);
		store_mbatch_free(h->jobs[i].mb);
		for (size_t k = 0; k < h->jobs[i].nheard; k++)
			free(h->jobs[i].heard[k].stream);
		free(h->jobs[i].heard);
		rdzv_free(h->jobs[i].rz);
	}
	free(h->jobs);
	store_close(h->st);
	pthread_mutex_destroy(&h->mu);
	free(h);
}

int hub_rekey(struct hub *h, const char *job, const char *secret, const char *url,
	      struct tc_err *err)
{
	struct sbuf sha = SBUF_INIT;
	hub_secret_hash(secret, &sha);
	pthread_mutex_lock(&h->mu);
	int rc = store_hub_job_set(h->st, job, sha.buf, url, err);
	for (size_t i = 0; !rc && i < h->njobs; i++)
		if (!strcmp(h->jobs[i].id, job)) {
			free(h->jobs[i].sha);
			h->jobs[i].sha = xstrdup(sha.buf);
		}
	pthread_mutex_unlock(&h->mu);
	sbuf_release(&sha);
	return rc;
}

/* The job's entry, its secret's hash read once; NULL with *status 404 or 503. */
static struct hub_job *job_entry(struct hub *h, const char *job, int *status, struct tc_err *err)
{
	for (size_t i = 0; i < h->njobs; i++)
		if (!strcmp(h->jobs[i].id, job))
			return &h->jobs[i];
	char *sha = NULL, *url = NULL;
	int rc = store_hub_job_get(h->st, job, &sha, &url, err);
	free(url);
	if (rc) {
		*status = rc == TC_ENOTFOUND ? 404 : 503;
		free(sha);
		return NULL;
	}
	XGROW(h->jobs, h->njobs + 1, h->alloc);
	struct hub_job *j = &h->jobs[h->njobs++];
	*j = (struct hub_job){ .id = xstrdup(job), .sha = sha };
	return j;
}

static bool same_secret(const char *a, const char *b)
{
	size_t n = strlen(a);
	if (n != strlen(b))
		return false;
	unsigned char d = 0;
	for (size_t i = 0; i < n; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

/* The job's entry once its secret checks out; else NULL with *status and err. */
static struct hub_job *authorized(struct hub *h, const char *job, const char *secret,
				  int *status, struct tc_err *err)
{
	if (!secret) {
		*status = 401;
		tc_error(err, TC_EUSAGE, "hub: X-Trainctl-Hub-Secret is required");
		return NULL;
	}
	struct sbuf sha = SBUF_INIT;
	hub_secret_hash(secret, &sha);
	struct hub_job *j = job_entry(h, job, status, err);
	if (j && !same_secret(sha.buf, j->sha)) {
		*status = 401;
		tc_error(err, TC_EUSAGE, "hub: wrong secret for job %s", job);
		j = NULL;
	}
	sbuf_release(&sha);
	return j;
}

int hub_check_secret(struct hub *h, const char *job, const char *secret, int *status,
		     struct tc_err *err)
{
	*status = 200;
	pthread_mutex_lock(&h->mu);
	struct hub_job *j = authorized(h, job, secret, status, err);
	pthread_mutex_unlock(&h->mu);
	return j ? 0 : -1;
}

int hub_check_rdzv(struct hub *h, const char *job, const char *secret, char **msg)
{
	struct tc_err err = TC_ERR_INIT;
	int status = 503;
	*msg = NULL;
	if (h && job && hub_check_secret(h, job, secret, &status, &err) == 0)
		status = 0;
	else
		*msg = xstrdup(err.msg ? err.msg : "hub: the job's secret is required");
	tc_err_release(&err);
	return status;
}

int hub_check_batch(struct hub *h, const char *job, const char *secret, const char *stream,
		    char **msg)
{
	struct tc_err err = TC_ERR_INIT;
	int status = 503;
	*msg = NULL;
	if (h && job && hub_check_secret(h, job, secret, &status, &err) == 0) {
		status = 0;
		if (!stream || !*stream) {
			status = 400;
			tc_error(&err, TC_EUSAGE, "hub: the job and ?stream= are required");
		}
	}
	if (status)
		*msg = xstrdup(err.msg ? err.msg : "hub: the job's secret is required");
	tc_err_release(&err);
	return status;
}

long long hub_line_seq(const char *p, const char *end, const char **rest)
{
	static const char pre[] = "{\"seq\":";
	size_t n = sizeof(pre) - 1;
	if ((size_t)(end - p) <= n || memcmp(p, pre, n))
		return -1;
	long long v = 0;
	const char *q = p + n;
	/* at most 2^60: one more digit never overflows (a longer number is no seq) */
	for (; q < end && *q >= '0' && *q <= '9' && v <= (1LL << 60) / 10; q++)
		v = v * 10 + (*q - '0');
	if (q == p + n || q >= end || *q != ',')
		return -1;
	*rest = q + 1;
	return v;
}

/* The job's round, read from the store once (h->mu held); NULL: the store failed (err). */
static struct rdzv *job_rdzv(struct hub *h, struct hub_job *j, struct tc_err *err)
{
	if (j->rz)
		return j->rz;
	char *text = NULL;
	if (store_hub_rdzv_get(h->st, j->id, &text, err))
		return NULL;
	struct rdzv *r = rdzv_new();
	/* a restarted hub: its members get a grace period from now (rdzv.h note 6) */
	if (text && rdzv_load(r, text, now_wall(), err)) {
		tc_error(err, TC_ESTORE, "hub: job %s: the stored rendezvous round is damaged: %s",
			 j->id, err->msg);
		free(text);
		rdzv_free(r);
		return NULL;
	}
	free(text);
	j->rz = r;
	return r;
}

/* The round into the store when it changed in a way a restart must keep (h->mu held). */
static int rdzv_save(struct hub *h, struct hub_job *j, struct tc_err *err)
{
	if (!j->rz || !rdzv_take_dirty(j->rz))
		return 0;
	struct sbuf t = SBUF_INIT;
	rdzv_json(j->rz, false, 0, &t);
	int rc = store_hub_rdzv_set(h->st, j->id, t.buf, err);
	sbuf_release(&t);
	return rc;
}

/*
 * A fenced stream's event (rdzv.h note 5) that would change the live job:
 * passed over (acknowledged, never applied), counted, said once per stream.
 */
static void fence_event(struct hub *h, struct hub_job *j, const char *stream, long long seq)
{
	if (!rdzv_count_fenced(j->rz, stream) || !h->warn)
		return;
	struct sbuf m = SBUF_INIT;
	sbuf_addf(&m, "warning: hub: job %s: stream %s is no member of rendezvous round %lld:"
		      " its events that change the job are refused from event %lld on",
		  j->id, stream, rdzv_round(j->rz), seq);
	h->warn(h->warn_ctx, m.buf);
	sbuf_release(&m);
}

/*
 * Apply the lines after acked; *acked moves with them.  TC_ESTORE aborts the
 * batch.  fence: stream is fenced (fence_event).
 */
static int apply_body(struct hub *h, struct hub_job *j, const char *stream, bool fence,
		      const char *body, size_t len, long long *acked, struct tc_err *err)
{
	const char *p = body, *end = body + len;
	struct sbuf ev = SBUF_INIT;
	int rc = 0;
	while (p < end && !rc) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end, *rest = NULL;
		long long seq = hub_line_seq(p, le, &rest);
		if (seq < 0) {
			rc = tc_error(err, TC_EINPUT, "hub: a line without its sequence number");
			break;
		}
		if (seq > *acked + 1)
			break; /* a gap: what follows waits for the sender's resend */
		if (seq == *acked + 1) {
			sbuf_reset(&ev);
			/* the event is '{' + what follows the seq's comma */
			sbuf_addch(&ev, '{');
			sbuf_add(&ev, rest, (size_t)(le - rest));
			if (fence && hub_ev_fenced(ev.buf, ev.len)) {
				fence_event(h, j, stream, seq);
				*acked = seq;
				p = le + (nl ? 1 : 0);
				continue;
			}
			struct tc_err e2 = TC_ERR_INIT;
			int arc = hub_apply_line(h->st, j->id, &j->mb, ev.buf, ev.len, &e2);
			if (arc == TC_ESTORE) {
				rc = tc_error(err, TC_ESTORE, "%s", e2.msg);
			} else {
				/*
				 * An event that can never apply (a transition the job is
				 * past, a malformed record) is passed over: it must not
				 * hold up every event after it.  Said, so it is not lost
				 * without a word.
				 */
				if (h->warn) {
					struct sbuf m = SBUF_INIT;
					sbuf_addf(&m, "warning: hub: job %s: event %lld passed over: %s",
						  j->id, seq, e2.msg ? e2.msg : "it cannot apply");
					h->warn(h->warn_ctx, m.buf);
					sbuf_release(&m);
				}
				*acked = seq;
			}
			tc_err_release(&e2);
		}
		p = le + (nl ? 1 : 0);
	}
	sbuf_release(&ev);
	return rc;
}

/*
 * One transaction: the lines of body after stream's acked seq, and the new
 * acked seq (*acked).  On failure what the job's metrics batch took in was
 * rolled back with the transaction, so the batch goes too.
 */
static int apply_stream(struct hub *h, struct hub_job *j, const char *job, const char *stream,
			const char *body, size_t len, long long *acked, struct tc_err *err)
{
	int rc = store_begin(h->st, err);
	if (!rc)
		rc = store_hub_acked(h->st, job, stream, acked, err);
	long long before = *acked;
	struct rdzv *rz = rc ? NULL : job_rdzv(h, j, err);
	if (!rc && !rz)
		rc = err->code ? err->code : TC_ESTORE;
	if (!rc)
		rc = apply_body(h, j, stream, rdzv_fences(rz, stream), body, len, acked, err);
	if (!rc && *acked != before)
		rc = store_hub_set_acked(h->st, job, stream, *acked, err);
	if (!rc)
		rc = rdzv_save(h, j, err); /* the fenced count */
	rc = store_commit(h->st, rc, err);
	if (rc) {
		store_mbatch_free(j->mb);
		j->mb = NULL;
	}
	return rc;
}

/* A batch of stream came in now (h->mu held). */
static void heard(struct hub_job *j, const char *stream)
{
	for (size_t k = 0; k < j->nheard; k++)
		if (!strcmp(j->heard[k].stream, stream)) {
			j->heard[k].at = now_wall();
			return;
		}
	XGROW(j->heard, j->nheard + 1, j->heard_alloc);
	j->heard[j->nheard++] = (struct heard){ xstrdup(stream), now_wall() };
}

void hub_receive(struct hub *h, const char *job, const char *stream, const char *secret,
		 const char *body, size_t len, int *status, long long *acked, struct tc_err *err)
{
	*status = 200;
	*acked = 0;
	if (!job || !stream || !*stream) {
		*status = 400;
		tc_error(err, TC_EUSAGE, "hub: the job and ?stream= are required");
		return;
	}
	pthread_mutex_lock(&h->mu);
	struct hub_job *j = authorized(h, job, secret, status, err);
	if (!j)
		goto out;
	long long a = 0;
	int rc = apply_stream(h, j, job, stream, body, len, &a, err);
	if (rc) {
		*status = rc == TC_EINPUT ? 400 : 503;
		goto out;
	}
	*acked = a;
	heard(j, stream);
out:
	pthread_mutex_unlock(&h->mu);
}

void hub_heard_each(struct hub *h, void (*fn)(void *ctx, const char *job, const char *stream,
					       double at),
		    void *ctx)
{
	pthread_mutex_lock(&h->mu);
	for (size_t i = 0; i < h->njobs; i++)
		for (size_t k = 0; k < h->jobs[i].nheard; k++)
			fn(ctx, h->jobs[i].id, h->jobs[i].heard[k].stream, h->jobs[i].heard[k].at);
	pthread_mutex_unlock(&h->mu);
}

int hub_apply_local(struct hub *h, const char *job, const char *stream, const char *body,
		    size_t len, long long *acked, struct tc_err *err)
{
	*acked = 0;
	pthread_mutex_lock(&h->mu);
	int status = 0;
	struct hub_job *j = job_entry(h, job, &status, err);
	int rc = j ? 0 : err->code ? err->code : TC_ENOTFOUND;
	long long a = 0;
	if (!rc)
		rc = apply_stream(h, j, job, stream, body, len, &a, err);
	if (!rc)
		*acked = a;
	pthread_mutex_unlock(&h->mu);
	return rc;
}

int hub_job_event(struct hub *h, const char *job, const char *reason, struct tc_err *err)
{
	pthread_mutex_lock(&h->mu);
	int rc = store_job_event(h->st, job, reason, err);
	pthread_mutex_unlock(&h->mu);
	return rc;
}

/* ,"ckpts":[...]: the job's complete checkpoints (a supervisor resumes from them) */
static int ckpts_json(struct store *st, const char *job, struct sbuf *out, struct tc_err *err)
{
	struct store_ckpt *v = NULL;
	size_t n = 0;
	int rc = store_ckpt_list(st, job, false, &v, &n, err);
	if (rc)
		return rc;
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(
			a, json_pack("{s:s,s:s,s:I,s:I,s:i,s:I,s:I,s:s?,s:s?,s:f,s:s}", "name", v[i].name,
				     "dir", v[i].dir, "step", (json_int_t)v[i].step, "epoch",
				     (json_int_t)v[i].epoch, "layout", v[i].layout, "nfiles",
				     (json_int_t)v[i].nfiles, "bytes", (json_int_t)v[i].bytes,
				     "checksum", v[i].checksum, "files", v[i].files_json, "created",
				     v[i].created, "state", v[i].state));
	char *text = json_dumps(a, JSON_COMPACT);
	sbuf_addf(out, ",\"ckpts\":%s", text ? text : "[]");
	free(text);
	json_decref(a);
	store_ckpt_free(v, n);
	return 0;
}

/*
 * ,"node_ckpts":[[node,step,"name"],...]: each node's complete checkpoints
 * on its own disk (checkpoint_nodes), for a node that rotates its copies
 * and must keep the newest step every node has (nodeckpt.c).
 */
static int node_ckpts_json(struct store *st, const char *job, struct sbuf *out,
			   struct tc_err *err)
{
	struct store_ckpt *v = NULL;
	int *nodes = NULL;
	size_t n = 0;
	int rc = store_ckpt_node_list(st, job, &v, &nodes, &n, err);
	if (rc)
		return rc;
	sbuf_adds(out, ",\"node_ckpts\":[");
	for (size_t i = 0, k = 0; i < n; i++) {
		if (!v[i].state || strcmp(v[i].state, "complete") != 0)
			continue;
		sbuf_addf(out, "%s[%d,%lld,", k++ ? "," : "", nodes[i], v[i].step);
		json_add_str(out, v[i].name);
		sbuf_addch(out, ']');
	}
	sbuf_addch(out, ']');
	store_ckpt_free(v, n);
	free(nodes);
	return 0;
}

static void status_json(struct hub *h, const char *job, const char *secret, int *status,
			struct sbuf *out, struct tc_err *err)
{
	*status = 200;
	pthread_mutex_lock(&h->mu);
	struct job_row r = { 0 };
	struct hub_job *j = authorized(h, job, secret, status, err);
	if (j) {
		struct rdzv *rz = NULL;
		if (store_job_get(h->st, job, &r, err) || !(rz = job_rdzv(h, j, err))) {
			*status = 503;
		} else {
			sbuf_adds(out, "{\"stop\":");
			json_add_str(out, job_stop_name(r.stop_reason));
			sbuf_addf(out, ",\"restarts\":%d,\"state\":\"%s\"", r.restarts,
				  job_state_name(r.state));
			if (ckpts_json(h->st, job, out, err) || node_ckpts_json(h->st, job, out, err))
				*status = 503;
			/* the rendezvous round: a driver reads a lost node here (rdzv.h) */
			double now = now_wall();
			rdzv_tick(rz, now);
			if (rdzv_round(rz) >= 0) {
				sbuf_adds(out, ",\"rdzv\":");
				rdzv_json(rz, true, now, out);
			}
			if (rdzv_save(h, j, err))
				*status = 503;
			sbuf_addch(out, '}');
		}
	}
	job_row_release(&r);
	pthread_mutex_unlock(&h->mu);
}

static enum MHD_Result answer(struct MHD_Connection *con, int status, const char *text);

/* out when ok, else {"error": err's message}; out and err released. */
static int answer_out(struct MHD_Connection *con, int status, bool ok, struct sbuf *out,
		      struct tc_err *err)
{
	if (!ok) {
		sbuf_reset(out);
		sbuf_adds(out, "{\"error\":");
		json_add_str(out, err->msg ? err->msg : "error");
		sbuf_adds(out, "}");
	}
	tc_err_release(err);
	int ret = answer(con, status, out->buf);
	sbuf_release(out);
	return ret;
}

static void rdzv_receive(struct hub *h, const char *job, const char *secret, const char *body,
			 size_t len, const void *con, int *status, struct sbuf *out,
			 struct tc_err *err)
{
	*status = 200;
	struct rdzv_reply a = { .why = SBUF_INIT };
	pthread_mutex_lock(&h->mu);
	struct hub_job *j = authorized(h, job, secret, status, err);
	struct rdzv *rz = j ? job_rdzv(h, j, err) : NULL;
	if (!j) {
		/* *status says */
	} else if (!rz) {
		*status = 503;
	} else if (rdzv_request(rz, body, len, con, now_wall(), &a, err)) {
		*status = 400;
	} else if (rdzv_save(h, j, err)) {
		*status = 503;
	} else {
		*status = a.status;
		rdzv_reply_json(&a, out);
	}
	pthread_mutex_unlock(&h->mu);
	rdzv_reply_release(&a);
}

void hub_rdzv_receive(struct hub *h, const char *job, const char *secret, const char *body,
		      size_t len, int *status, struct sbuf *out, struct tc_err *err)
{
	rdzv_receive(h, job, secret, body, len, NULL, status, out, err);
}

/* watch: this listener reports con's close (on_con below): a member's lease (rdzv.h note 7) */
static int http_rdzv(struct hub *h, struct MHD_Connection *con, const char *job,
		     const char *body, size_t len, bool watch)
{
	const char *secret = MHD_lookup_connection_value(con, MHD_HEADER_KIND,
							 "X-Trainctl-Hub-Secret");
	int status = 0;
	struct sbuf out = SBUF_INIT;
	struct tc_err err = TC_ERR_INIT;
	rdzv_receive(h, job, secret, body, len, watch ? con : NULL, &status, &out, &err);
	/* a 409 carries the round in its body (rdzv_client.c reads it) */
	return answer_out(con, status, status == 200 || status == 409, &out, &err);
}

int hub_http_rdzv(struct hub *h, struct MHD_Connection *con, const char *job, const char *body,
		  size_t len)
{
	return http_rdzv(h, con, job, body, len, false);
}

/* A connection of the hub's listener closed: a member that held it is lost (rdzv.h note 7). */
static void rdzv_con_gone(struct hub *h, const void *con)
{
	pthread_mutex_lock(&h->mu);
	double now = now_wall();
	for (size_t i = 0; i < h->njobs; i++) {
		struct hub_job *j = &h->jobs[i];
		struct tc_err err = TC_ERR_INIT;
		if (j->rz && rdzv_con_closed(j->rz, con, now) && rdzv_save(h, j, &err) && h->warn) {
			struct sbuf m = SBUF_INIT;
			sbuf_addf(&m, "warning: hub: job %s: %s", j->id, err.msg);
			h->warn(h->warn_ctx, m.buf);
			sbuf_release(&m);
		}
		tc_err_release(&err);
	}
	pthread_mutex_unlock(&h->mu);
}

/* The job's report.json (report/report.h), built from what the hub recorded. */
static void report_json(struct hub *h, const char *job, const char *secret, int *status,
			struct sbuf *out, struct tc_err *err)
{
	*status = 200;
	pthread_mutex_lock(&h->mu);
	struct job_row r = { 0 };
	json_t *rep = NULL;
	if (authorized(h, job, secret, status, err)) {
		if (store_job_get(h->st, job, &r, err) || report_build(h->st, &r, false, &rep, err)) {
			*status = 503;
		} else {
			char *t = json_dumps_shortest(rep, JSON_COMPACT | JSON_PRESERVE_ORDER);
			sbuf_adds(out, t ? t : "{}");
			free(t);
		}
	}
	json_decref(rep);
	job_row_release(&r);
	pthread_mutex_unlock(&h->mu);
}

struct put_ctx {
	struct hub *h;
	const char *job;
};

static int put_run_file(void *ctx, const char *rel, const char *text, size_t len,
			struct tc_err *err)
{
	const struct put_ctx *c = ctx;
	return hub_write_run_file(c->h->st, c->job, rel, text, len, err);
}

int hub_write_report(struct hub *h, const char *job, struct tc_err *err)
{
	pthread_mutex_lock(&h->mu);
	struct job_row r = { 0 };
	json_t *rep = NULL;
	struct put_ctx c = { h, job };
	int rc = store_job_get(h->st, job, &r, err);
	if (!rc && job_state_terminal(r.state) && !(rc = report_build(h->st, &r, false, &rep, err)))
		rc = report_put_files(rep, put_run_file, &c, err);
	json_decref(rep);
	job_row_release(&r);
	pthread_mutex_unlock(&h->mu);
	return rc;
}

/* ---- the standalone listener ---- */

#define HUB_MAX_BODY (64u << 20)
#define HUB_MAX_RDZV_BODY (64u << 10) /* a rendezvous request is a few names */

struct hub_daemon {
	struct hub *h;
	struct MHD_Daemon *mhd;
	int fd;
};

/* One request; its body is kept only once its job's secret passed on the headers. */
struct hub_req {
	struct reqbody body;
	size_t dropped; /* body bytes read and not kept */
	int refuse;     /* the answer decided on the headers (401, 404, 413, 503), or 0 */
	char *msg;      /* its message */
};

static enum MHD_Result answer(struct MHD_Connection *con, int status, const char *text)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text,
								  MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "application/json");
	enum MHD_Result ret = MHD_queue_response(con, (unsigned)status, r);
	MHD_destroy_response(r);
	return ret;
}

int hub_http_answer(struct hub *h, struct MHD_Connection *con, const char *job,
		    const char *body, size_t len)
{
	const char *stream = MHD_lookup_connection_value(con, MHD_GET_ARGUMENT_KIND, "stream");
	const char *secret = MHD_lookup_connection_value(con, MHD_HEADER_KIND,
							 "X-Trainctl-Hub-Secret");
	int status = 0;
	long long acked = 0;
	struct tc_err err = TC_ERR_INIT;
	hub_receive(h, job, stream, secret, body, len, &status, &acked, &err);
	struct sbuf out = SBUF_INIT;
	if (status == 200) {
		sbuf_addf(&out, "{\"acked\":%lld}", acked);
	} else {
		sbuf_adds(&out, "{\"error\":");
		json_add_str(&out, err.msg ? err.msg : "error");
		sbuf_adds(&out, "}");
	}
	tc_err_release(&err);
	int ret = answer(con, status, out.buf);
	sbuf_release(&out);
	return ret;
}

static int http_get(struct hub *h, struct MHD_Connection *con, const char *job, bool report)
{
	const char *secret = MHD_lookup_connection_value(con, MHD_HEADER_KIND,
							 "X-Trainctl-Hub-Secret");
	int status = 0;
	struct sbuf out = SBUF_INIT;
	struct tc_err err = TC_ERR_INIT;
	if (report)
		report_json(h, job, secret, &status, &out, &err);
	else
		status_json(h, job, secret, &status, &out, &err);
	return answer_out(con, status, status == 200, &out, &err);
}

int hub_http_status(struct hub *h, struct MHD_Connection *con, const char *job)
{
	return http_get(h, con, job, false);
}

/* "/api/v1/hub/JOB/<post>" -> JOB (heap), else NULL */
static char *route_job(const char *url, const char *post)
{
	static const char pre[] = "/api/v1/hub/";
	size_t n = strlen(url), a = sizeof(pre) - 1, b = strlen(post);
	if (n <= a + b || strncmp(url, pre, a) || strcmp(url + n - b, post))
		return NULL;
	char *job = xstrndup(url + a, n - a - b);
	if (strchr(job, '/')) {
		free(job);
		return NULL;
	}
	return job;
}

static const char too_big[] = "the batch is too big";
static const char budget_spent[] = "the hub holds as many request bodies as its memory budget"
				   " allows: try again shortly";

/* The answer to a request refused on its headers or by its body's size. */
static enum MHD_Result answer_refused(struct MHD_Connection *con, const struct hub_req *rq)
{
	struct sbuf out = SBUF_INIT;
	sbuf_adds(&out, "{\"error\":");
	json_add_str(&out, rq->msg ? rq->msg : "refused");
	sbuf_adds(&out, "}");
	enum MHD_Result ret = answer(con, rq->refuse, out.buf);
	sbuf_release(&out);
	return ret;
}

/*
 * On the headers, before a byte of the body is kept: a batch's job secret
 * and room for it (its cap, the process's budget: reqbody.h).  *now: answer
 * at once, the body unread, rather than once a short one was dropped.
 */
static void decide(struct hub_daemon *d, struct MHD_Connection *con, const char *url,
		   const char *method, struct hub_req *rq, bool *now)
{
	long long declared = reqbody_declared(
		MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Content-Length"),
		MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Transfer-Encoding"));
	char *job = route_job(url, "/events");
	char *rjob = job ? NULL : route_job(url, "/rdzv");
	size_t cap = 0;
	*now = false;
	const char *secret = MHD_lookup_connection_value(con, MHD_HEADER_KIND,
							 "X-Trainctl-Hub-Secret");
	if (job && !strcmp(method, "POST")) {
		const char *stream = MHD_lookup_connection_value(con, MHD_GET_ARGUMENT_KIND, "stream");
		rq->refuse = hub_check_batch(d->h, job, secret, stream, &rq->msg);
		cap = HUB_MAX_BODY;
	} else if (rjob && !strcmp(method, "POST")) {
		rq->refuse = hub_check_rdzv(d->h, rjob, secret, &rq->msg);
		cap = HUB_MAX_RDZV_BODY;
	}
	free(job);
	free(rjob);
	if (rq->refuse) {
		*now = !reqbody_drains(declared);
		return;
	}
	unsigned st = reqbody_admit(&rq->body, cap, declared, now);
	if (st) {
		rq->refuse = (int)st;
		rq->msg = xstrdup(st == 413 ? too_big : budget_spent);
	}
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *con, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	struct hub_daemon *d = cls;
	(void)version;
	struct hub_req *rq = *con_cls;
	if (!rq) {
		rq = xcalloc(1, sizeof(*rq));
		rq->body = (struct reqbody)REQBODY_INIT;
		*con_cls = rq;
		bool now = false;
		decide(d, con, url, method, rq, &now);
		return now ? answer_refused(con, rq) : MHD_YES;
	}
	if (*upload_size) {
		/* a refused request's body, or one its route does not take, is dropped */
		int st = reqbody_take(&rq->body, !rq->refuse, upload, *upload_size, &rq->dropped);
		if (st < 0)
			return MHD_NO; /* more than any refusal reads (chunked): the connection ends */
		if (st) {
			rq->refuse = st;
			rq->msg = xstrdup(st == 413 ? too_big : budget_spent);
		}
		*upload_size = 0;
		return MHD_YES;
	}
	if (rq->refuse)
		return answer_refused(con, rq);
	char *job = route_job(url, "/events");
	enum MHD_Result ret;
	char *sjob = job ? NULL : route_job(url, "/status");
	char *rjob = job || sjob ? NULL : route_job(url, "/report");
	char *zjob = job || sjob || rjob ? NULL : route_job(url, "/rdzv");
	if (zjob && !strcmp(method, "POST"))
		ret = http_rdzv(d->h, con, zjob, rq->body.data.buf, rq->body.data.len, true) == MHD_YES
			      ? MHD_YES : MHD_NO;
	else if (sjob && !strcmp(method, "GET"))
		ret = hub_http_status(d->h, con, sjob) == MHD_YES ? MHD_YES : MHD_NO;
	else if (rjob && !strcmp(method, "GET"))
		ret = http_get(d->h, con, rjob, true) == MHD_YES ? MHD_YES : MHD_NO;
	else if (!job)
		ret = answer(con, 404, "{\"error\":\"this hub answers POST /api/v1/hub/JOB/events\"}");
	else if (strcmp(method, "POST") != 0)
		ret = answer(con, 405, "{\"error\":\"use POST\"}");
	else
		ret = hub_http_answer(d->h, con, job, rq->body.data.buf, rq->body.data.len)
			      == MHD_YES ? MHD_YES : MHD_NO;
	free(job);
	free(sjob);
	free(rjob);
	free(zjob);
	return ret;
}

static void on_done(void *cls, struct MHD_Connection *con, void **con_cls,
		    enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)con;
	(void)toe;
	struct hub_req *rq = *con_cls;
	if (rq) {
		reqbody_release(&rq->body);
		free(rq->msg);
		free(rq);
		*con_cls = NULL;
	}
}

static void on_con(void *cls, struct MHD_Connection *con, void **socket_context,
		   enum MHD_ConnectionNotificationCode toe)
{
	struct hub_daemon *d = cls;
	(void)socket_context;
	if (toe == MHD_CONNECTION_NOTIFY_CLOSED)
		rdzv_con_gone(d->h, con);
}

/*
 * Each node of a job keeps a connection (rdzv.h note 7): the soft limit on
 * descriptors goes up to the hard one (at most 65536), as containers start
 * at 1024; past the limit, connections wait in the backlog.
 */
static void fd_room(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	rlim_t top = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > 65536 ? 65536 : rl.rlim_max;
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= top)
		return;
	rl.rlim_cur = top;
	(void)setrlimit(RLIMIT_NOFILE, &rl);
}

/* Serve hub routes on the listening socket fd (taken: closed on failure too). */
static int daemon_on(struct hub *h, int fd, struct hub_daemon **out, struct tc_err *err)
{
	struct hub_daemon *d = xcalloc(1, sizeof(*d));
	d->h = h;
	d->fd = fd;
	fd_room();
	/* poll(): a connection's descriptor may lie past FD_SETSIZE in a busy server */
	d->mhd = MHD_start_daemon(MHD_USE_POLL_INTERNAL_THREAD, 0, NULL, NULL, on_request, d,
				  MHD_OPTION_LISTEN_SOCKET, fd,
				  MHD_OPTION_NOTIFY_COMPLETED, on_done, d,
				  MHD_OPTION_NOTIFY_CONNECTION, on_con, d,
				  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)120,
				  /* every node keeps one for its heartbeats (rdzv_client.c) */
				  MHD_OPTION_CONNECTION_LIMIT, (unsigned int)4096,
				  MHD_OPTION_END);
	if (!d->mhd) {
		int rc = tc_error_errno(err, TC_ESYS, "hub: cannot start the HTTP listener");
		close(fd);
		free(d);
		return rc;
	}
	*out = d;
	return 0;
}

int hub_daemon_start_unix(struct hub *h, const char *path, struct hub_daemon **out,
			  struct tc_err *err)
{
	*out = NULL;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path))
		return tc_error(err, TC_EUSAGE, "hub: the socket path %s is over %zu bytes", path,
				sizeof(sa.sun_path) - 1);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return tc_error_errno(err, TC_ESYS, "hub: socket");
	struct stat st;
	/* ours from a server that is gone (the state folder is locked by the caller) */
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(path);
	/* any account may connect: each request proves its job by the job's secret */
	mode_t old = umask(0);
	int rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc < 0 || listen(fd, 4096) < 0) {
		rc = tc_error_errno(err, TC_ESYS, "hub: cannot listen on %s", path);
		close(fd);
		return rc;
	}
	return daemon_on(h, fd, out, err);
}

int hub_daemon_start(struct hub *h, const char *addr, int port, struct hub_daemon **out,
		     int *bound_port, struct tc_err *err)
{
	*out = NULL;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
		return tc_error(err, TC_EUSAGE, "hub: '%s' is not an IPv4 address", addr);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return tc_error_errno(err, TC_ESYS, "hub: socket");
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	socklen_t sl = sizeof(sa);
	/* a backlog for every node of a large job connecting at once (rdzv.h): a SYN dropped waits 1 s */
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 4096) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) < 0) {
		int rc = tc_error_errno(err, TC_ESYS, "hub: cannot listen on %s:%d", addr, port);
		close(fd);
		return rc;
	}
	int rc = daemon_on(h, fd, out, err);
	if (!rc)
		*bound_port = ntohs(sa.sin_port);
	return rc;
}

void hub_daemon_stop(struct hub_daemon *d)
{
	if (!d)
		return;
	MHD_stop_daemon(d->mhd); /* it closes the listening socket it was given */
	free(d);
}
