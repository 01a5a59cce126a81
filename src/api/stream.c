/*
 * stream.c -- server-sent events: a job's log lines as they are written
 * (logs?follow=1) and the state changes of jobs (/api/v1/events).  Each
 * stream runs in its connection's own thread (thread per connection), polls
 * with short sleeps, sends a comment every few seconds so that a closed
 * client is noticed, and uses its own database connection (server_int.h).
 */
#include "api/api_int.h"
#include "core/json.h"
#include "core/upath.h"
#include "core/util.h"
#include "jobs/runpath.h"
#include "logs/logs.h"
#include "source/source.h"
#include "core/xalloc.h"

#include <fcntl.h>
#include "core/lazylib.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define POLL_MS 200
#define PING_MS 3000
#define TAIL_WINDOW (8u << 20) /* a tail looks back at most this far */

struct sse {
	struct srv *s;
	struct store *st;      /* own connection (events) */
	struct job_source *src; /* own connection (logs): the job's state through the local source */
	struct sbuf pending;   /* formatted, not yet sent */
	size_t sent;           /* of pending */
	int64_t last_send;
	bool end;              /* send what is pending, then close */
	/* logs */
	char *job_id, *run_dir;
	int logs_fd;           /* the job's logs/ (logs_open_dir), -1 until it is there */
	uid_t owner;           /* whose files it holds */
	long tail;
	int rank;              /* -1: all */
	int nranks;
	struct upath_follow *fol; /* one per rank, once logs_fd is open */
	struct sbuf *partial;
	/* events */
	long long after;
	char *user;
	bool admin;
};

static void nap(void)
{
	struct timespec ts = { 0, POLL_MS * 1000000L };
	nanosleep(&ts, NULL);
}

static void sse_free(void *cls)
{
	struct sse *e = cls;
	store_close(e->st);
	source_close(e->src);
	sbuf_release(&e->pending);
	for (int i = 0; e->partial && i < e->nranks; i++)
		sbuf_release(&e->partial[i]);
	for (int i = 0; e->fol && i < e->nranks; i++)
		upath_follow_release(&e->fol[i]);
	free(e->partial);
	free(e->fol);
	if (e->fol && e->logs_fd >= 0) /* fol: a log stream, whose logs_fd was set */
		close(e->logs_fd);
	free(e->job_id);
	free(e->run_dir);
	free(e->user);
	free(e);
}

/* Copy pending bytes out; -1 when nothing is pending. */
static ssize_t drain_pending(struct sse *e, char *buf, size_t max)
{
	if (e->sent >= e->pending.len) {
		sbuf_reset(&e->pending);
		e->sent = 0;
		return -1;
	}
	size_t n = e->pending.len - e->sent;
	if (n > max)
		n = max;
	memcpy(buf, e->pending.buf + e->sent, n);
	e->sent += n;
	e->last_send = now_mono_ms();
	return (ssize_t)n;
}

static int start_stream(struct MHD_Connection *con, struct sse *e,
			ssize_t (*cb)(void *, uint64_t, char *, size_t))
{
	struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, cb, e,
								   sse_free);
	if (!r) {
		sse_free(e);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", "text/event-stream");
	MHD_add_response_header(r, "Cache-Control", "no-store");
	MHD_add_response_header(r, "X-Accel-Buffering", "no");
	int ret = MHD_queue_response(con, 200, r);
	MHD_destroy_response(r);
	return ret;
}

/* ---- logs ---- */

void sse_log_line(struct sbuf *out, int rank, const char *p, size_t n)
{
	struct sbuf line = SBUF_INIT;
	sbuf_add(&line, p, n);
	sbuf_addf(out, "data: {\"rank\":%d,\"line\":", rank);
	json_add_str(out, line.buf);
	sbuf_adds(out, "}\n\n");
	sbuf_release(&line);
}

/* Rank r's log was cut (logs.h): go on in the new file; true when it did. */
static bool follow_cut(struct sse *e, int r)
{
	struct upath_follow *f = &e->fol[r];
	struct tc_err err = TC_ERR_INIT;
	sbuf_reset(&e->partial[r]); /* the writer writes whole lines: nothing is cut off */
	int rc = logs_after_cut(e->logs_fd, e->owner, r, &f->fd, &f->off, &err);
	tc_err_release(&err);
	if (rc) {
		f->fd = -1; /* opened again by the next read, from its start */
		return false;
	}
	return true;
}

/* Read what rank r's log gained; whole lines become events. */
static bool read_rank(struct sse *e, int r)
{
	bool got = false;
	char buf[65536];
	struct upath_follow *f = &e->fol[r];
	/* asked before the old file is read to its end: the cut renames after its last write */
	bool cut = f->fd >= 0 && logs_was_cut(e->logs_fd, r, f->fd);
	for (int rounds = 0; rounds < 64; rounds++) {
		/* opened from logs/'s descriptor, O_NOFOLLOW, the account's (core/upath.h) */
		ssize_t n = upath_follow_read(f, buf, sizeof(buf));
		if (n <= 0) {
			if (n == 0 && cut)
				got |= follow_cut(e, r);
			break;
		}
		struct sbuf *pp = &e->partial[r];
		sbuf_add(pp, buf, (size_t)n);
		size_t start = 0;
		for (size_t i = 0; i < pp->len; i++)
			if (pp->buf[i] == '\n') {
				sse_log_line(&e->pending, r, pp->buf + start, i - start);
				start = i + 1;
				got = true;
			}
		sbuf_remove_front(pp, start);
		if (e->pending.len > (1u << 20))
			break;
	}
	return got;
}

/* Start at the last `tail` lines of each rank's log (or the start). */
static void seek_tail(struct sse *e, int r, long tail)
{
	struct upath_follow *f = &e->fol[r];
	off_t size = upath_follow_size(f);
	f->off = 0;
	if (size <= 0 || tail < 0)
		return;
	off_t from = size > (off_t)TAIL_WINDOW ? size - (off_t)TAIL_WINDOW : 0;
	size_t len = (size_t)(size - from);
	char *buf = xmalloc(len);
	ssize_t n = pread(f->fd, buf, len, from);
	off_t at = from;
	if (n > 0) {
		long lines = 0;
		ssize_t i = n - 1;
		if (buf[i] == '\n')
			i--;
		for (; i >= 0; i--)
			if (buf[i] == '\n' && ++lines >= tail)
				break;
		if (i >= 0)
			at = from + i + 1;
	}
	f->off = tail == 0 ? size : at;
	free(buf);
}

/*
 * Open the job's logs/ once it is there (0: open or not yet), and each
 * rank's follower in it; anything but a missing folder (a link) is an error.
 */
static int open_logs(struct sse *e, struct tc_err *err)
{
	if (e->logs_fd >= 0)
		return 0;
	int rc = logs_open_dir(e->run_dir, &e->logs_fd, &e->owner, err);
	if (rc == TC_ENOTFOUND) {
		tc_err_release(err);
		return 0;
	}
	if (rc)
		return rc;
	struct sbuf name = SBUF_INIT;
	for (int r = 0; r < e->nranks; r++) {
		sbuf_reset(&name);
		run_leaf(&name, RUN_RANK_LOG, r);
		upath_follow_init(&e->fol[r], e->logs_fd, name.buf, e->owner, 0);
		seek_tail(e, r, e->tail);
	}
	sbuf_release(&name);
	return 0;
}

static bool job_finished(struct sse *e)
{
	struct source_job j = { 0 };
	struct tc_err err = TC_ERR_INIT;
	bool done = true;
	if (source_job(e->src, e->job_id, &j, &err) == 0)
		done = j.ended || !strcmp(j.state, job_state_name(JOB_PAUSED));
	source_job_release(&j);
	tc_err_release(&err);
	return done;
}

static ssize_t logs_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct sse *e = cls;
	(void)pos;
	for (;;) {
		ssize_t n = drain_pending(e, buf, max);
		if (n >= 0)
			return n;
		if (e->end || e->s->stopping)
			return MHD_CONTENT_READER_END_OF_STREAM;
		bool finished = job_finished(e);
		bool got = false;
		struct tc_err err = TC_ERR_INIT;
		if (open_logs(e, &err)) {
			/* logs/ became a link: say so and end, never read through it */
			sbuf_adds(&e->pending, "event: error\ndata: ");
			struct sbuf m = SBUF_INIT;
			json_add_str(&m, err.msg ? err.msg : "cannot read the logs");
			sbuf_addf(&e->pending, "{\"error\":%s}\n\n", m.buf);
			sbuf_release(&m);
			tc_err_release(&err);
			e->end = true;
			continue;
		}
		for (int r = 0; e->logs_fd >= 0 && r < e->nranks; r++)
			if (e->rank < 0 || e->rank == r)
				got |= read_rank(e, r);
		if (got)
			continue;
		if (finished) {
			sbuf_adds(&e->pending, "event: end\ndata: {}\n\n");
			e->end = true;
			continue;
		}
		if (now_mono_ms() - e->last_send >= PING_MS) {
			sbuf_adds(&e->pending, ": ping\n\n");
			continue;
		}
		nap();
	}
}

int stream_logs(struct srv *s, struct MHD_Connection *con, const struct job_row *x, int rank,
		long tail)
{
	struct sse *e = xcalloc(1, sizeof(*e));
	struct tc_err err = TC_ERR_INIT;
	e->s = s;
	sbuf_init(&e->pending, 0);
	if (source_local_open(s->home, &e->src, &err)) {
		int ret = reply_err(con, 500, "%s", err.msg);
		tc_err_release(&err);
		sse_free(e);
		return ret;
	}
	e->job_id = xstrdup(x->id);
	e->run_dir = xstrdup(x->run_dir ? x->run_dir : "");
	e->logs_fd = -1;
	e->tail = tail;
	e->rank = rank;
	e->nranks = x->device_count > 0 ? x->device_count : 1;
	if (rank >= e->nranks) {
		sse_free(e);
		return reply_err(con, 400, "rank %d: the job has %d ranks", rank, x->device_count);
	}
	e->fol = xcalloc((size_t)e->nranks, sizeof(*e->fol));
	e->partial = xcalloc((size_t)e->nranks, sizeof(struct sbuf));
	for (int r = 0; r < e->nranks; r++) {
		sbuf_init(&e->partial[r], 0);
		e->fol[r].fd = -1;
	}
	if (open_logs(e, &err)) {
		int ret = reply_tc(con, &err);
		tc_err_release(&err);
		sse_free(e);
		return ret;
	}
	e->last_send = now_mono_ms();
	return start_stream(con, e, logs_cb);
}

/* ---- state changes ---- */

void sse_state_event(struct sbuf *out, const struct store_event *ev)
{
	sbuf_addf(out, "id: %lld\nevent: state\ndata: {\"id\":%lld,\"job\":", ev->id, ev->id);
	json_add_str(out, ev->job_id);
	sbuf_adds(out, ",\"state\":");
	json_add_str(out, job_state_name(ev->state));
	sbuf_adds(out, ",\"reason\":");
	json_add_str(out, ev->reason);
	/* an event that is no change of state says which (as job_history_json does) */
	enum job_note note = job_note_of_reason(ev->reason);
	if (note != JOB_NOTE_NONE) {
		sbuf_adds(out, ",\"kind\":");
		json_add_str(out, job_note_name(note));
	}
	sbuf_adds(out, ",\"user\":");
	json_add_str(out, ev->user);
	sbuf_addf(out, ",\"time\":%.3f}\n\n", ev->time);
}

static ssize_t events_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct sse *e = cls;
	(void)pos;
	for (;;) {
		ssize_t n = drain_pending(e, buf, max);
		if (n >= 0)
			return n;
		if (e->s->stopping)
			return MHD_CONTENT_READER_END_OF_STREAM;
		struct store_event *ev = NULL;
		size_t nev = 0;
		struct tc_err err = TC_ERR_INIT;
		if (store_events_after(e->st, e->after, 500, &ev, &nev, &err)) {
			tc_err_release(&err);
			nev = 0;
		}
		const struct who w = { .user = e->user, .admin = e->admin };
		for (size_t i = 0; i < nev; i++) {
			e->after = ev[i].id;
			if (server_may_see(&w, ev[i].user))
				sse_state_event(&e->pending, &ev[i]);
		}
		store_events_free(ev, nev);
		if (e->pending.len)
			continue;
		if (now_mono_ms() - e->last_send >= PING_MS) {
			sbuf_adds(&e->pending, ": ping\n\n");
			continue;
		}
		nap();
	}
}

int stream_events(struct srv *s, struct MHD_Connection *con, const struct who *w)
{
	struct sse *e = xcalloc(1, sizeof(*e));
	struct tc_err err = TC_ERR_INIT;
	e->s = s;
	sbuf_init(&e->pending, 0);
	long after;
	const char *last = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Last-Event-ID");
	if (!arg_long(con, "after", 0, 1L << 62, -1, &after) ||
	    (last && !parse_long(last, 0, 1L << 62, &after))) {
		sse_free(e);
		return reply_err(con, 400, "after must be an event id");
	}
	if (store_open(s->home, &e->st, &err) ||
	    (after < 0 && store_events_last(e->st, &e->after, &err))) {
		int ret = reply_err(con, 500, "%s", err.msg);
		tc_err_release(&err);
		sse_free(e);
		return ret;
	}
	if (after >= 0)
		e->after = after;
	e->user = xstrdup(w->user);
	e->admin = w->admin;
	/* a first comment tells the client the stream is open */
	sbuf_adds(&e->pending, ": events\n\n");
	e->last_send = now_mono_ms();
	return start_stream(con, e, events_cb);
}
