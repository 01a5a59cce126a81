/*
 * jobio.c -- inputs staged in, checkpoints recorded and rotated, outputs
 * uploaded; see jobio_int.h.  The storage and checkpoint logic lives in
 * src/storage and src/ckpt; this file only decides when to call it.
 */
#include "ckpt/ckpt.h"
#include "core/sbuf.h"
#include "core/strvec.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "launch/jobio_int.h"
#include "launch/launch.h"
#include "launch/nodeckpt_int.h"
#include "jobs/runpath.h"
#include "storage/storage.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TICK_MS 1000

#define JOBIO_FINAL_ROTATE_TRIES 5

struct jobio {
	struct jobio_ctx c;
	/* c.sink when remote; a direct one's thread has its own (own_sink) */
	struct sink *sink;
	bool own_sink;
	bool remote;       /* c.sink is a hub's: no database; rows kept in mem */
	struct store_ckpt *mem; /* remote: the rows this process recorded */
	size_t nmem, amem;
	bool restricted;        /* jobio_restrict: resume only among allowed */
	struct strvec allowed;
	char *upload_url;  /* {job_id} expanded, or NULL */
	char *ckpt_url;    /* where an outside checkpoint folder goes, or NULL */
	char *resume_copy; /* a remote resume: PATH, downloaded */
	pthread_mutex_t mu;  /* scanning and recording */
	pthread_mutex_t wmu; /* the thread's wake-up */
	pthread_cond_t wake;
	bool stop, thread_on;
	bool finished; /* the final scan and upload are done (finish) */
	/* rotate again: the hub did not answer, or the others lag (c.node_disks) */
	bool rotate_pending;
	bool hub_failure_said; /* once for a run of failed tries, not every scan */
	pthread_t thread;
	struct strvec recorded; /* names of checkpoints already in the store */
	long long newest_step, uploaded_step;
	double next_upload;
	int uploads;
};

static void tell(struct jobio *io, const char *fmt, ...) TC_PRINTF(2, 3);

static void tell(struct jobio *io, const char *fmt, ...)
{
	struct sbuf sb = SBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	sbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	if (io->c.say)
		io->c.say(io->c.say_arg, sb.buf);
	sbuf_release(&sb);
}

static char *expand_job(const char *tmpl, const char *job_id)
{
	struct sbuf sb = SBUF_INIT;
	for (const char *p = tmpl; *p;) {
		if (!strncmp(p, "{job_id}", 8)) {
			sbuf_adds(&sb, job_id);
			p += 8;
		} else {
			sbuf_addch(&sb, *p++);
		}
	}
	return sbuf_detach(&sb);
}

static char *join_url(const char *base, const char *leaf)
{
	struct sbuf sb = SBUF_INIT;
	sbuf_adds(&sb, base);
	if (sb.len && sb.buf[sb.len - 1] != '/')
		sbuf_addch(&sb, '/');
	sbuf_addf(&sb, "%s/", leaf);
	return sbuf_detach(&sb);
}

/* ---- checkpoints ---- */

static int choose(struct sink *sk, struct jobio *io, const char *job_id,
		  const struct store_ckpt *rows, size_t n, struct sbuf *report);

static void ckpt_copy(struct store_ckpt *d, const struct store_ckpt *s)
{
	*d = *s;
	d->name = xstrdup(s->name);
	d->dir = xstrdup(s->dir);
	d->checksum = s->checksum ? xstrdup(s->checksum) : NULL;
	d->files_json = s->files_json ? xstrdup(s->files_json) : NULL;
	d->state = xstrdup(s->state);
}

/* A remote sink's record, kept here too: the hub's database is not ours to read. */
static void mem_put(struct jobio *io, const struct store_ckpt *c)
{
	for (size_t i = 0; i < io->nmem; i++)
		if (!strcmp(io->mem[i].name, c->name)) {
			free(io->mem[i].name);
			free(io->mem[i].dir);
			free(io->mem[i].checksum);
			free(io->mem[i].files_json);
			free(io->mem[i].state);
			ckpt_copy(&io->mem[i], c);
			return;
		}
	XGROW(io->mem, io->nmem + 1, io->amem);
	ckpt_copy(&io->mem[io->nmem++], c);
}

void jobio_known(struct jobio *io, const struct store_ckpt *c)
{
	if (!io || !io->remote)
		return;
	pthread_mutex_lock(&io->mu);
	mem_put(io, c);
	pthread_mutex_unlock(&io->mu);
}

static int ckpt_step_cmp(const void *a, const void *b)
{
	const struct store_ckpt *x = a, *y = b;
	if (x->step != y->step)
		return x->step < y->step ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* The job's complete checkpoints, oldest step first (store_ckpt_list's order). */
static int ckpt_rows(struct jobio *io, struct store_ckpt **rows, size_t *n, struct tc_err *err)
{
	if (!io->remote) /* a read: the hub's own database, through the sink's connection */
		return store_ckpt_list(sink_store(io->sink), io->c.job_id, false, rows, n, err);
	*rows = xcalloc(io->nmem ? io->nmem : 1, sizeof(**rows));
	*n = 0;
	for (size_t i = 0; i < io->nmem; i++)
		if (!strcmp(io->mem[i].state, "complete"))
			ckpt_copy(&(*rows)[(*n)++], &io->mem[i]);
	qsort(*rows, *n, sizeof(**rows), ckpt_step_cmp);
	return 0;
}

static int ckpt_put(struct jobio *io, const struct store_ckpt *c, struct tc_err *err)
{
	int rc = sink_ckpt_put(io->sink, io->c.job_id, c, err);
	if (!rc && io->remote)
		mem_put(io, c);
	return rc;
}

static int ckpt_state(struct sink *k, struct jobio *io, const char *job, const char *name,
		      const char *state, struct tc_err *err)
{
	int rc = sink_ckpt_state(k, job, name, state, err);
	for (size_t i = 0; !rc && io && io->remote && i < io->nmem; i++)
		if (!strcmp(io->mem[i].name, name)) {
			free(io->mem[i].state);
			io->mem[i].state = xstrdup(state);
		}
	return rc;
}

/*
 * The newest of rows[0..n) every other node has complete (nodeckpt.c), into
 * *common (-1: none); nonzero: the hub did not say, and nothing is removed
 * now (the next scan tries again).
 */
static int common_step(struct jobio *io, const struct store_ckpt *rows, size_t n,
		       long long *common)
{
	struct tc_err err = TC_ERR_INIT;
	long long *steps = xcalloc(n ? n : 1, sizeof(*steps));
	for (size_t i = 0; i < n; i++)
		steps[i] = rows[i].step;
	int rc = node_ckpts_common(io->c.job_id, 0, steps, n, common, &err);
	free(steps);
	if (rc) {
		if (!io->hub_failure_said)
			tell(io, "checkpoint.keep: the hub did not say which steps the other nodes "
				 "have (%s): nothing removed until it does", err.msg);
		io->hub_failure_said = true;
		io->rotate_pending = true;
	} else {
		io->hub_failure_said = false;
	}
	tc_err_release(&err);
	return rc;
}

static void rotate(struct jobio *io)
{
	int keep = io->c.s->ckpt_keep;
	io->rotate_pending = false;
	if (keep <= 0)
		return;
	struct store_ckpt *rows = NULL;
	size_t n = 0;
	struct tc_err err = TC_ERR_INIT;
	if (ckpt_rows(io, &rows, &n, &err)) {
		tell(io, "warning: checkpoints: %s", err.msg);
		goto out;
	}
	long long common = -1;
	if (n > (size_t)keep && io->c.node_disks && common_step(io, rows, n, &common))
		goto out;
	for (size_t i = 0; i + (size_t)keep < n; i++) {
		if (rows[i].step == common) {
			io->rotate_pending = true; /* the others may not have recorded their newer saves */
			continue;
		}
		struct ckpt c = { 0 };
		c.layout = (enum ckpt_layout)rows[i].layout;
		c.name = xstrdup(rows[i].name);
		if (ckpt_files_from_json(rows[i].files_json, &c, &err) ||
		    ckpt_remove(rows[i].dir, &c, &err) ||
		    ckpt_state(io->sink, io, io->c.job_id, rows[i].name, "removed", &err))
			tell(io, "warning: checkpoint.keep: %s", err.msg);
		else
			tell(io, "checkpoint %s (step %lld) removed: keeping the newest %d%s",
			     rows[i].name, rows[i].step, keep,
			     common >= 0 && common < rows[n - (size_t)keep].step
				     ? " and the newest step every node has" : "");
		tc_err_release(&err);
		/* node 0's own record of this disk (nodeckpt.c), when its attempt has ended */
		if (io->c.node_disks &&
		    sink_ckpt_node_state(io->sink, io->c.job_id, 0, rows[i].name, "removed", &err))
			tell(io, "warning: checkpoint.keep: %s", err.msg);
		ckpt_release(&c);
	}
out:
	tc_err_release(&err);
	store_ckpt_free(rows, n);
}

/* Record every newly complete checkpoint; caller holds io->mu. */
static void scan_record(struct jobio *io, bool all_stable)
{
	struct ckpt_set set;
	struct tc_err err = TC_ERR_INIT;
	if (ckpt_scan(io->c.ckpt_dir, io->c.world, all_stable, &set, &err)) {
		tell(io, "warning: checkpoints: %s", err.msg);
		tc_err_release(&err);
		return;
	}
	bool added = false;
	for (size_t i = 0; i < set.nr; i++) {
		struct ckpt *c = &set.v[i];
		if (!c->complete)
			continue;
		bool known = false;
		for (size_t k = 0; k < io->recorded.nr && !known; k++)
			known = !strcmp(io->recorded.v[k], c->name);
		if (known)
			continue;
		if (ckpt_checksum(io->c.ckpt_dir, c, &err)) {
			/* rotated or replaced while we read: the next scan sees the truth */
			tc_err_release(&err);
			continue;
		}
		char *files = ckpt_files_json(c);
		struct store_ckpt row = {
			.name = c->name, .dir = (char *)io->c.ckpt_dir, .step = c->step,
			.epoch = c->epoch, .layout = (int)c->layout, .nfiles = (long long)c->nfiles,
			.bytes = (long long)c->bytes, .checksum = c->checksum, .files_json = files,
			.created = now_wall(), .state = "complete",
		};
		if (ckpt_put(io, &row, &err)) {
			tell(io, "warning: checkpoints: %s", err.msg);
			tc_err_release(&err);
		} else {
			strvec_push(&io->recorded, c->name);
			tell(io, "checkpoint %s complete: step %lld, %zu file%s, %llu bytes, crc32c %s",
			     c->name, c->step, c->nfiles, c->nfiles == 1 ? "" : "s",
			     (unsigned long long)c->bytes, c->checksum);
			if (c->step > io->newest_step)
				io->newest_step = c->step;
			added = true;
		}
		free(files);
	}
	ckpt_set_release(&set);
	if (added || io->rotate_pending)
		rotate(io);
}

/* ---- uploads ---- */

/* One upload; a failure is said, and its message put in failed when given. */
static int upload(struct jobio *io, const char *why, struct sbuf *failed)
{
	struct sync_opts o = { .jobs = 8 };
	struct sync_stats stats;
	struct tc_err err = TC_ERR_INIT;
	int rc = storage_sync(io->c.output_dir, io->upload_url, &o, &stats, &err);
	if (!rc && io->ckpt_url)
		rc = storage_sync(io->c.ckpt_dir, io->ckpt_url, &o, &stats, &err);
	if (rc && failed)
		sbuf_addf(failed, "upload to %s failed: %s", io->upload_url, err.msg);
	if (rc)
		tell(io, "%s%s upload to %s failed: %s", failed ? "" : "warning: ", why, io->upload_url,
		     err.msg);
	else if (stats.copied || strcmp(why, "periodic") != 0)
		tell(io, "%s upload to %s: %llu copied, %llu unchanged, %.1f MB", why, io->upload_url,
		     (unsigned long long)stats.copied, (unsigned long long)stats.skipped,
		     stats.bytes / 1e6);
	tc_err_release(&err);
	io->uploads++;
	return rc;
}

static bool upload_due(struct jobio *io)
{
	const struct spec *s = io->c.s;
	if (!io->upload_url)
		return false;
	if (s->upload_every_seconds && now_wall() >= io->next_upload)
		return true;
	return s->upload_every_steps && io->newest_step >= 0 &&
	       io->newest_step >= io->uploaded_step + s->upload_every_steps;
}

static void *thread_main(void *arg)
{
	struct jobio *io = arg;
	for (;;) {
		pthread_mutex_lock(&io->wmu);
		if (!io->stop) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += TICK_MS / 1000;
			pthread_cond_timedwait(&io->wake, &io->wmu, &ts);
		}
		bool stop = io->stop;
		pthread_mutex_unlock(&io->wmu);
		if (stop)
			break;
		pthread_mutex_lock(&io->mu);
		scan_record(io, false);
		bool due = upload_due(io);
		long long step = io->newest_step;
		pthread_mutex_unlock(&io->mu);
		if (due) {
			upload(io, "periodic", NULL);
			io->uploaded_step = step;
			io->next_upload = now_wall() + io->c.s->upload_every_seconds;
		}
	}
	return NULL;
}

/* ---- inputs ---- */

static int stage_inputs(struct jobio *io, struct tc_err *err)
{
	const struct spec *s = io->c.s;
	if (!s->ninputs)
		return 0;
	int rc = sink_mark(io->c.sink, io->c.job_id, JOB_STARTING, "staging inputs", err);
	if (rc)
		return rc;
	for (size_t i = 0; i < s->ninputs; i++) {
		const struct spec_input *in = &s->inputs[i];
		char *to = in->to[0] == '/' ? xstrdup(in->to) : join_url(io->c.data_dir, in->to);
		tell(io, "staging input %s -> %s", in->from, to);
		struct sync_opts o = { .jobs = 16 };
		struct sync_stats stats = { 0 };
		rc = storage_sync(in->from, to, &o, &stats, err);
		if (!rc && !stats.listed)
			rc = tc_error(err, TC_ESTORAGE, "nothing found at %s", in->from);
		if (rc) {
			/* the location once: storage errors name it themselves */
			size_t fl = strlen(in->from);
			while (fl > 1 && in->from[fl - 1] == '/')
				fl--;
			char *from = xstrndup(in->from, fl);
			if (err->msg && strstr(err->msg, from))
				tc_error_prefix(err, "staging inputs failed (no worker started)");
			else
				tc_error_prefix(err, "staging inputs failed (no worker started): %s",
						in->from);
			free(from);
			if (err->code != TC_ESTORAGE)
				err->code = rc = TC_ESTORAGE;
			rc = TC_ESTORAGE;
		} else {
			tell(io, "staged %s: %llu file%s, %.1f MB in %.1f s", in->from,
			     (unsigned long long)stats.listed, plural_s((long long)stats.listed),
			     stats.bytes / 1e6, stats.seconds);
		}
		free(to);
		if (rc)
			return rc;
	}
	return 0;
}

int jobio_begin(const struct jobio_ctx *c, struct jobio **out, struct tc_err *err)
{
	struct jobio *io = xcalloc(1, sizeof(*io));
	io->c = *c;
	io->recorded = (struct strvec)STRVEC_INIT;
	io->allowed = (struct strvec)STRVEC_INIT;
	io->newest_step = -1;
	io->uploaded_step = -1;
	if (!sink_store(c->sink)) {
		io->remote = true;
		io->sink = c->sink;
	}
	pthread_mutex_init(&io->mu, NULL);
	pthread_mutex_init(&io->wmu, NULL);
	pthread_cond_init(&io->wake, NULL);
	*out = io;
	int rc = stage_inputs(io, err);
	if (rc)
		return rc;
	if (c->s->upload_to) {
		io->upload_url = expand_job(c->s->upload_to, c->job_id);
		size_t ol = strlen(c->output_dir);
		if (strncmp(c->ckpt_dir, c->output_dir, ol) != 0 || c->ckpt_dir[ol] != '/')
			io->ckpt_url = join_url(io->upload_url, "checkpoints");
		io->next_upload = now_wall() + c->s->upload_every_seconds;
	}
	return 0;
}

/* A direct sink's thread: a sink over a connection of its own (sink_direct_open). */
static int open_sink(struct jobio *io, struct tc_err *err)
{
	if (io->sink)
		return 0;
	int rc = sink_direct_open(io->c.home, &io->sink, err);
	if (!rc)
		io->own_sink = true;
	return rc;
}

int jobio_start(struct jobio *io, struct tc_err *err)
{
	int rc;
	if (io->thread_on)
		return 0;
	if ((rc = open_sink(io, err)))
		return rc;
	if (pthread_create(&io->thread, NULL, thread_main, io) != 0)
		return tc_error_errno(err, TC_ESYS, "cannot start the checkpoint and upload thread");
	io->thread_on = true;
	return 0;
}

/* A remote resume: PATH comes down into the run folder first. */
static char *fetch_remote(struct jobio *io, const char *url, struct tc_err *err)
{
	struct sbuf dst = SBUF_INIT;
	size_t n = strlen(url);
	const char *base = url + n;
	while (base > url && base[-1] == '/')
		base--;
	const char *leaf = base;
	while (leaf > url && leaf[-1] != '/')
		leaf--;
	sbuf_addf(&dst, "%s/resume/", io->c.run_dir);
	sbuf_add(&dst, leaf, (size_t)(base - leaf));
	struct sync_opts o = { .jobs = 16 };
	struct sync_stats stats;
	tell(io, "downloading the checkpoint to resume from: %s", url);
	/* a URL ending in '/' is a folder; otherwise it names one object */
	int rc = url[n - 1] == '/' ? storage_sync(url, dst.buf, &o, &stats, err) : 0;
	if (url[n - 1] != '/') {
		struct storage *src = NULL, *d = NULL;
		char *parent = xstrndup(url, (size_t)(leaf - url));
		char *name = xstrndup(leaf, (size_t)(base - leaf));
		struct sbuf ddir = SBUF_INIT;
		sbuf_addf(&ddir, "%s/resume", io->c.run_dir);
		rc = storage_open(parent, &src, err);
		if (!rc)
			rc = storage_open(ddir.buf, &d, err);
		if (!rc)
			rc = storage_copy(src, name, d, name, 16, err);
		storage_close(src);
		storage_close(d);
		free(parent);
		free(name);
		sbuf_release(&ddir);
	} else if (!rc && !stats.listed) {
		rc = tc_error(err, TC_ESTORAGE, "nothing found at %s", url);
	}
	if (rc) {
		tc_error_prefix(err, "checkpoint.resume");
		sbuf_release(&dst);
		return NULL;
	}
	return sbuf_detach(&dst);
}

void jobio_restrict(struct jobio *io, const struct strvec *names)
{
	if (!io)
		return;
	pthread_mutex_lock(&io->mu);
	strvec_clear(&io->allowed);
	io->restricted = names != NULL;
	for (size_t i = 0; names && i < names->nr; i++)
		strvec_push(&io->allowed, names->v[i]);
	pthread_mutex_unlock(&io->mu);
}

char *jobio_resume(struct jobio *io, bool first, struct tc_err *err)
{
	const struct spec *s = io->c.s;
	if (s->resume == RESUME_NEVER)
		return NULL;
	if (first) {
		if (s->resume != RESUME_PATH)
			return NULL;
		if (storage_is_remote(s->resume_path)) {
			free(io->resume_copy);
			io->resume_copy = fetch_remote(io, s->resume_path, err);
			return io->resume_copy ? xstrdup(io->resume_copy) : NULL;
		}
		return xstrdup(s->resume_path);
	}
	/* before the first workers (a requeued job): the thread's connection is not open yet */
	if (open_sink(io, err))
		return NULL;
	pthread_mutex_lock(&io->mu);
	scan_record(io, true); /* every worker is gone: what is there is final */
	struct store_ckpt *rows = NULL;
	size_t n = 0;
	char *path = NULL;
	struct tc_err e2 = TC_ERR_INIT;
	if (ckpt_rows(io, &rows, &n, &e2)) {
		tell(io, "warning: checkpoints: %s", e2.msg);
		n = 0;
	}
	if (io->restricted) {
		/* every node must have it: the others are left out of the choice */
		size_t k = 0;
		for (size_t i = 0; i < n; i++) {
			bool ok = false;
			for (size_t a = 0; a < io->allowed.nr && !ok; a++)
				ok = !strcmp(io->allowed.v[a], rows[i].name);
			if (ok) {
				struct store_ckpt t = rows[k];
				rows[k++] = rows[i];
				rows[i] = t;
			} else {
				tell(io, "checkpoint %s (step %lld) is not on every node: not resumed from",
				     rows[i].name, rows[i].step);
			}
		}
		for (size_t i = k; i < n; i++) { /* their strings; the array goes below */
			free(rows[i].name);
			free(rows[i].dir);
			free(rows[i].checksum);
			free(rows[i].files_json);
			free(rows[i].state);
		}
		n = k;
	}
	struct sbuf report = SBUF_INIT;
	int idx = choose(io->sink, io, io->c.job_id, rows, n, &report);
	for (char *line = report.buf, *nl; *line; line = nl + 1) {
		nl = strchr(line, '\n');
		if (!nl)
			break;
		*nl = '\0';
		if (io->c.event) /* news even under run -q: which checkpoint a restart takes */
			io->c.event(io->c.say_arg, line);
		else
			tell(io, "%s", line);
	}
	if (idx >= 0) {
		struct sbuf p = SBUF_INIT;
		sbuf_addf(&p, "%s/%s", rows[idx].dir, rows[idx].name);
		path = sbuf_detach(&p);
	} else if (s->resume == RESUME_PATH) {
		path = xstrdup(io->resume_copy ? io->resume_copy : s->resume_path);
	}
	sbuf_release(&report);
	store_ckpt_free(rows, n);
	tc_err_release(&e2);
	pthread_mutex_unlock(&io->mu);
	return path;
}

/* Stop the thread, record what is left and upload once more (once). */
static int finish(struct jobio *io, struct sbuf *failed)
{
	if (!io->thread_on || io->finished)
		return 0;
	io->finished = true;
	pthread_mutex_lock(&io->wmu);
	io->stop = true;
	pthread_cond_signal(&io->wake);
	pthread_mutex_unlock(&io->wmu);
	pthread_join(io->thread, NULL);
	pthread_mutex_lock(&io->mu);
	scan_record(io, true);
	/* the other nodes' records of their last saves may come a moment later */
	for (int i = 0; i < JOBIO_FINAL_ROTATE_TRIES && io->rotate_pending; i++) {
		struct timespec ts = { 1, 0 };
		nanosleep(&ts, NULL);
		rotate(io);
	}
	pthread_mutex_unlock(&io->mu);
	return io->upload_url ? upload(io, "final", failed) : 0;
}

int jobio_final_upload(struct jobio *io, struct sbuf *failed)
{
	return io ? finish(io, failed) : 0;
}

void jobio_end(struct jobio *io)
{
	if (!io)
		return;
	finish(io, NULL);
	if (io->own_sink)
		sink_close(io->sink);
	store_ckpt_free(io->mem, io->nmem);
	strvec_clear(&io->allowed);
	strvec_clear(&io->recorded);
	free(io->upload_url);
	free(io->ckpt_url);
	free(io->resume_copy);
	pthread_mutex_destroy(&io->mu);
	pthread_mutex_destroy(&io->wmu);
	pthread_cond_destroy(&io->wake);
	free(io);
}

/* ---- the resume choice, shared with `run --resume JOB` ---- */

int launch_choose_checkpoint(struct store *st, const char *job_id, const struct store_ckpt *rows,
			     size_t n, struct sbuf *report)
{
	struct sink *k = sink_direct(st);
	int idx = choose(k, NULL, job_id, rows, n, report);
	sink_close(k);
	return idx;
}

static int choose(struct sink *sk, struct jobio *io, const char *job_id,
		  const struct store_ckpt *rows, size_t n, struct sbuf *report)
{
	if (!n)
		return -1;
	struct ckpt *recs = xcalloc(n, sizeof(*recs));
	size_t ok = 0;
	size_t *map = xcalloc(n, sizeof(*map));
	for (size_t i = 0; i < n; i++) {
		struct tc_err err = TC_ERR_INIT;
		struct ckpt *c = &recs[ok];
		if (ckpt_files_from_json(rows[i].files_json, c, &err)) {
			tc_err_release(&err);
			continue;
		}
		c->name = xstrdup(rows[i].name);
		c->step = rows[i].step;
		c->epoch = rows[i].epoch;
		c->layout = (enum ckpt_layout)rows[i].layout;
		map[ok++] = i;
	}
	/* one folder per job: meta.json of the folder the newest row lives in */
	struct ckpt_set set;
	struct tc_err err = TC_ERR_INIT;
	const char *dir = rows[n - 1].dir;
	bool have_set = ckpt_scan(dir, 0, true, &set, &err) == 0;
	tc_err_release(&err);
	int idx = ckpt_choose(dir, recs, ok, have_set ? &set : NULL, report);
	/* what failed verification is marked, so `ckpt list` shows it */
	for (size_t k = (idx < 0 ? 0 : (size_t)idx + 1); k < ok; k++) {
		if (recs[k].layout == CKPT_MINDFORMERS && have_set && set.have_meta &&
		    (recs[k].epoch > set.meta_epoch ||
		     (recs[k].epoch == set.meta_epoch && recs[k].step > set.meta_step)))
			continue;
		if (ckpt_state(sk, io, job_id, recs[k].name, "damaged", &err))
			tc_err_release(&err);
	}
	int result = idx >= 0 ? (int)map[idx] : -1;
	if (result >= 0)
		sbuf_addf(report, "resuming from %s (step %lld)\n", rows[result].name, rows[result].step);
	if (have_set)
		ckpt_set_release(&set);
	for (size_t i = 0; i < ok; i++)
		ckpt_release(&recs[i]);
	free(recs);
	free(map);
	return result;
}

int launch_resume_point(const char *home, const char *job_ref, char **path, char **spec_path,
			struct sbuf *report, struct tc_err *err)
{
	struct store *st = NULL;
	struct job_row job = { 0 };
	struct store_ckpt *rows = NULL;
	size_t n = 0;
	*path = NULL;
	*spec_path = NULL;
	int rc = store_open(home, &st, err);
	if (rc)
		return rc;
	if ((rc = store_job_get(st, job_ref, &job, err)))
		goto out;
	if ((rc = store_ckpt_list(st, job.id, false, &rows, &n, err)))
		goto out;
	int idx = launch_choose_checkpoint(st, job.id, rows, n, report);
	if (idx < 0) {
		rc = tc_error(err, TC_ENOTFOUND, "job %s has no complete, undamaged checkpoint to resume from",
			      job.id);
		goto out;
	}
	struct sbuf p = SBUF_INIT;
	sbuf_addf(&p, "%s/%s", rows[idx].dir, rows[idx].name);
	*path = sbuf_detach(&p);
	struct sbuf sp = SBUF_INIT;
	run_path(&sp, job.run_dir, NULL, RUN_SPEC, 0);
	*spec_path = sbuf_detach(&sp);
out:
	store_ckpt_free(rows, n);
	job_row_release(&job);
	store_close(st);
	return rc;
}
