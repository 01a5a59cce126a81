/*
 * diskfull.c -- a full disk (supervisor_int.h, docs/reliability.md), a
 * hook of the supervisor:
 *
 *   - the job's records the file system refused wait in the sink
 *     (hub/sink.h note 5); they are tried again once a second and the
 *     supervisor does not end before they are written;
 *   - a rank's log, or the job's output disk (its run folder and
 *     checkpoint folder), full: on_disk_full: stop stops the job with the
 *     root cause "the file system at PATH is full"; wait stops the worker
 *     groups (SIGSTOP) and continues them (SIGCONT) once space returns.
 *     The log bytes a full disk refused are kept and written first;
 *   - a supervisor killed while it waits leaves the job's end in the run
 *     folder's outcome.json, whose space it reserved when the job began;
 *     the reconcile that would mark the job lost records that end instead
 *     (backend.c).
 */
#include "launch/supervisor_int.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "jobs/jobs.h"
#include "jobs/runpath.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* How often what waits for space is tried again, and the output disk looked at. */
#define DISK_TICK_MS 1000
/* Log bytes kept while the disk is full; beyond, lines are counted and dropped. */
#define HELD_MAX (16u << 20)
/* Space back: this much free, beyond the kept bytes (a few lines do not fill it again). */
#define ROOM_MIN (256u << 10)
/* outcome.json's reserved size: the end and its root cause (cut to fit). */
#define OUTCOME_BYTES 8192

struct sup_disk {
	bool said;       /* "waiting to record" said */
	int64_t next;    /* now_mono_ms() of the next tick's work */
	char *full_at;   /* the folder found full, or NULL */
	bool paused;     /* on_disk_full: wait: the worker groups are stopped */
	struct sbuf *held; /* per worker: log bytes not written yet */
	size_t held_bytes;
	long long dropped; /* bytes beyond HELD_MAX */
	int outcome_fd;    /* outcome.json, its space reserved, or -1 */
	bool outcome_written;
};

static struct sup_disk *disk_of(struct sup *sp)
{
	if (!sp->disk) {
		sp->disk = xcalloc(1, sizeof(*sp->disk));
		sp->disk->outcome_fd = -1;
		sp->disk->held = xcalloc((size_t)sp->n, sizeof(*sp->disk->held));
		for (int i = 0; i < sp->n; i++)
			sbuf_init(&sp->disk->held[i], 0);
	}
	return sp->disk;
}

static void note(struct sup *sp, const char *text)
{
	struct tc_err e = TC_ERR_INIT;
	/* on a full disk it is kept with the other records, and written when space returns */
	if (sink_note(sp->sink, sp->job_id, JOB_NOTE_DISK_FULL, text, &e))
		sup_say(sp, "warning: %s", e.msg);
	tc_err_release(&e);
}

/* ---- the records ---- */

/* Said once per job: on stderr, in the supervisor log, and as the job's event. */
static void say_waiting(struct sup *sp, const char *why)
{
	struct sup_disk *d = disk_of(sp);
	if (d->said)
		return;
	d->said = true;
	sup_event(sp, "the file system at %s is full: waiting to record job %s (its records are"
		  " kept until then; free space there) (%s)", sp->o->home, sp->job_id, why);
	struct sbuf t = SBUF_INIT;
	sbuf_addf(&t, "the file system at %s is full: the supervisor waited to record the job",
		  sp->o->home);
	note(sp, t.buf);
	sbuf_release(&t);
}

/* ---- outcome.json: the end, when the supervisor may be killed before it records it ---- */

static char *outcome_path(const struct sup *sp)
{
	struct sbuf sb = SBUF_INIT;
	run_path(&sb, sp->run_dir, NULL, RUN_OUTCOME, 0);
	return sbuf_detach(&sb);
}

void sup_disk_reserve(struct sup *sp)
{
	struct sup_disk *d = disk_of(sp);
	char *path = outcome_path(sp);
	int fd = open_regular_nofollow(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	/* blocks of its own now: a full disk later cannot refuse the end's bytes */
	int e = fd < 0 ? errno : posix_fallocate(fd, 0, OUTCOME_BYTES);
	if (e) {
		sup_log(sp, "warning: cannot reserve %s: %s (a supervisor killed on a full disk leaves"
			" its job lost)", path, strerror(e));
		if (fd >= 0) {
			close(fd);
			unlink(path);
		}
	} else {
		d->outcome_fd = fd;
	}
	free(path);
}

/* The kept end into the reserved outcome.json, once. */
static void write_outcome(struct sup *sp)
{
	struct sup_disk *d = sp->disk;
	enum job_state end;
	int code;
	const char *cause = NULL;
	if (!d || d->outcome_fd < 0 || d->outcome_written ||
	    !sink_kept_end(sp->sink, &end, &code, &cause))
		return;
	struct sbuf sb = SBUF_INIT;
	size_t keep = cause ? strlen(cause) : 0;
	for (;;) { /* the root cause is cut until the object fits (JSON may escape it longer) */
		json_t *o = json_pack("{s:s, s:s, s:i, s:s%}", "job", sp->job_id, "state",
				      job_state_name(end), "exit_code", code, "root_cause",
				      cause ? cause : "", keep);
		char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
		json_decref(o);
		sbuf_reset(&sb);
		if (text)
			sbuf_adds(&sb, text);
		free(text);
		if (sb.len < OUTCOME_BYTES || !keep)
			break;
		keep = keep > 512 ? keep - 512 : 0;
	}
	if (!sb.len || sb.len >= OUTCOME_BYTES) {
		sbuf_release(&sb);
		return;
	}
	while (sb.len < OUTCOME_BYTES) /* over the reserved bytes: nothing of before remains */
		sbuf_addch(&sb, sb.len == OUTCOME_BYTES - 1 ? '\n' : ' ');
	if (pwrite(d->outcome_fd, sb.buf, sb.len, 0) != (ssize_t)sb.len ||
	    fdatasync(d->outcome_fd) < 0)
		sup_say(sp, "warning: cannot write the job's end to its run folder's outcome.json: %s",
			strerror(errno));
	else
		d->outcome_written = true;
	sbuf_release(&sb);
}

/* Recorded in the database: the reserve is not needed any more. */
static void drop_outcome(struct sup *sp)
{
	struct sup_disk *d = sp->disk;
	if (!d || d->outcome_fd < 0)
		return;
	close(d->outcome_fd);
	d->outcome_fd = -1;
	char *path = outcome_path(sp);
	if (unlink(path) < 0 && errno != ENOENT)
		sup_say(sp, "warning: cannot remove %s: %s", path, strerror(errno));
	free(path);
}

/* Try what waits; true when nothing waits any more. */
static bool try_records(struct sup *sp)
{
	struct tc_err e = TC_ERR_INIT;
	int rc = sink_flush(sp->sink, &e);
	bool done = !sink_kept(sp->sink);
	if (rc && !done)
		say_waiting(sp, e.msg);
	else if (rc)
		sup_say(sp, "warning: a record kept while the disk was full: %s", e.msg);
	tc_err_release(&e);
	return done;
}

void sup_disk_wait_records(struct sup *sp)
{
	bool waited = false;
	while (!try_records(sp)) {
		waited = true;
		write_outcome(sp); /* should a kill end the wait */
		/* only a kill ends the wait: a signal the user sends is said and waited past */
		struct pollfd p = { .fd = sp->sigfd, .events = POLLIN };
		int r = poll(&p, sp->sigfd >= 0 ? 1 : 0, DISK_TICK_MS);
		if (r <= 0)
			continue;
		struct signalfd_siginfo si;
		while (read(sp->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
			if (si.ssi_signo != SIGCHLD)
				sup_event(sp, "%s: still waiting to record job %s (SIGKILL ends the wait;"
					  " its end is then read from its run folder's outcome.json)",
					  strsignal((int)si.ssi_signo), sp->job_id);
	}
	if (waited)
		sup_event(sp, "space is back at %s: job %s recorded", sp->o->home, sp->job_id);
	drop_outcome(sp);
}

/* ---- on_disk_full: ---- */

static bool refused(int e)
{
	return e == ENOSPC || e == EDQUOT;
}

/* No block left for us on the file system holding path. */
static bool fs_full(const char *path)
{
	struct statvfs fs;
	return path && statvfs(path, &fs) == 0 && fs.f_bavail == 0;
}

static bool fs_room(const char *path, size_t need)
{
	struct statvfs fs;
	return path && statvfs(path, &fs) == 0 &&
	       (unsigned long long)fs.f_bavail * fs.f_frsize >= (unsigned long long)need + ROOM_MIN;
}

/* The disk at path (a rank's log when rank >= 0) is full: what on_disk_full says. */
static void disk_full(struct sup *sp, const char *path, int rank)
{
	struct sup_disk *d = disk_of(sp);
	if (d->full_at)
		return;
	d->full_at = xstrdup(path);
	struct sbuf what = SBUF_INIT, t = SBUF_INIT;
	if (rank >= 0)
		sbuf_addf(&what, "rank %d's log", rank);
	else
		sbuf_adds(&what, "the job's output");
	if (sp->stopping) { /* it stops anyway: its last lines wait for space */
		sbuf_addf(&t, "the file system at %s is full (%s)", path, what.buf);
		sup_event(sp, "%s", t.buf);
	} else if (sp->s->disk_full_wait) {
		sup_signal_groups(sp, SIGSTOP);
		d->paused = true;
		sbuf_addf(&t, "the file system at %s is full (%s): the workers are paused until space"
			  " returns (on_disk_full: wait)", path, what.buf);
		sup_event(sp, "%s", t.buf);
	} else {
		sp->failed = true;
		sp->fail_rank = rank >= 0 ? rank : sp->w[0].rank;
		sp->fail_status = 0;
		sbuf_reset(&sp->fail_why);
		sbuf_addf(&sp->fail_why, "the file system at %s is full (%s): free space there"
			  " (on_disk_full: wait pauses the job instead)", path, what.buf);
		sbuf_addf(&t, "%s; stopping the workers", sp->fail_why.buf);
		sup_event(sp, "%s", t.buf);
		sup_begin_stop(sp); /* gracefully: a job that checkpoints on SIGTERM does */
	}
	note(sp, t.buf);
	sbuf_release(&what);
	sbuf_release(&t);
}

static void hold(struct sup_disk *d, int i, const char *data, size_t len)
{
	if (d->held_bytes + len > HELD_MAX) {
		d->dropped += (long long)len;
		return;
	}
	sbuf_add(&d->held[i], data, len);
	d->held_bytes += len;
}

/* Write the kept log bytes; false when the disk still refuses them. */
static bool write_held(struct sup *sp)
{
	struct sup_disk *d = sp->disk;
	for (int i = 0; d && i < sp->n; i++) {
		struct sbuf *h = &d->held[i];
		if (!h->len || sp->w[i].log.fd < 0)
			continue;
		if (logcap_write(&sp->w[i].log, h->buf, h->len) < 0)
			return false; /* nothing of it written: kept whole */
		d->held_bytes -= h->len;
		sbuf_reset(h);
	}
	return true;
}

void sup_log_write(struct sup *sp, struct worker *w, const char *data, size_t len)
{
	int i = (int)(w - sp->w);
	struct sup_disk *d = sp->disk;
	if (d && (d->full_at || d->held[i].len)) { /* behind what waits, in order */
		hold(d, i, data, len);
		return;
	}
	if (logcap_write(&w->log, data, len) == 0)
		return;
	if (refused(errno)) { /* nothing of it written (logcap.h): kept whole, in order */
		hold(disk_of(sp), i, data, len);
		disk_full(sp, sp->log_dir, w->rank);
		return;
	}
	sup_say(sp, "warning: cannot write rank %d log: %s", w->rank, strerror(errno));
}

/* Space back where it was full: the kept lines written, paused workers continued. */
static void space_back(struct sup *sp)
{
	struct sup_disk *d = sp->disk;
	if (!fs_room(d->full_at, d->held_bytes) || !write_held(sp))
		return;
	struct sbuf t = SBUF_INIT;
	sbuf_addf(&t, "space is back at %s", d->full_at);
	if (d->paused) {
		sup_signal_groups(sp, SIGCONT);
		d->paused = false;
		sbuf_adds(&t, ": the workers go on");
	}
	sup_event(sp, "%s", t.buf);
	note(sp, t.buf);
	sbuf_release(&t);
	free(d->full_at);
	d->full_at = NULL;
}

static bool workers_run(const struct sup *sp)
{
	for (int i = 0; sp->w && i < sp->n; i++)
		if (!sp->w[i].reaped)
			return true;
	return false;
}

int sup_disk_tick(struct sup *sp, int64_t now)
{
	struct sup_disk *d = disk_of(sp);
	if (now >= d->next) {
		d->next = now + DISK_TICK_MS;
		if (sink_kept(sp->sink))
			try_records(sp);
		if (d->paused && sp->stopping) { /* a stop must reach them */
			sup_signal_groups(sp, SIGCONT);
			d->paused = false;
		}
		if (d->full_at)
			space_back(sp);
		else if (workers_run(sp) && fs_full(sp->run_dir))
			disk_full(sp, sp->run_dir, -1);
		else if (workers_run(sp) && fs_full(sp->ckpt_dir))
			disk_full(sp, sp->ckpt_dir, -1);
	}
	return d->next > now ? (int)(d->next - now) : 0;
}

bool sup_disk_paused(const struct sup *sp)
{
	return sp->disk && sp->disk->paused;
}

void sup_disk_attempt_end(struct sup *sp)
{
	struct sup_disk *d = sp->disk;
	if (!d)
		return;
	if (d->paused) {
		sup_signal_groups(sp, SIGCONT);
		d->paused = false;
	}
	if (d->held_bytes && !write_held(sp))
		d->dropped += (long long)d->held_bytes;
	if (d->dropped)
		sup_say(sp, "warning: %lld byte%s of the ranks' output could not be written to their"
			" logs: the file system at %s is full", d->dropped, plural_s(d->dropped),
			sp->log_dir);
	for (int i = 0; i < sp->n; i++)
		sbuf_reset(&d->held[i]);
	d->held_bytes = 0;
	d->dropped = 0;
	free(d->full_at);
	d->full_at = NULL;
}

void sup_disk_end(struct sup *sp)
{
	struct sup_disk *d = sp->disk;
	if (!d)
		return;
	drop_outcome(sp); /* every record is written, or the job never got to its end */
	for (int i = 0; i < sp->n; i++)
		sbuf_release(&d->held[i]);
	free(d->held);
	free(d->full_at);
	free(d);
	sp->disk = NULL;
}
