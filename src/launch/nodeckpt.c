/*
 * nodeckpt.c -- the checkpoints on one node's own disk (nodeckpt_int.h).
 * A thread scans the node's checkpoint folder every second, as the
 * driver's jobio does on its host, and records each newly complete
 * checkpoint, with its checksum and the node's index, through the sink
 * (the hub's table checkpoint_nodes).  At the end of the attempt it says
 * which of them are still whole there: the driver resumes from the newest
 * step every node that writes checkpoints has (multinode.c).  With
 * checkpoint.keep it rotates this disk's copies as the driver rotates its
 * own (rotate), never the step a restart would resume from.
 */
#include "launch/nodeckpt_int.h"
#include "ckpt/ckpt.h"
#include "core/sbuf.h"
#include "core/strvec.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "hub/hub.h"

#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define NODE_CKPT_TICK_MS 1000
#define NODE_CKPT_FINAL_TRIES 5

struct node_rec {
	char *name;
	char *files;     /* ckpt_files_json: the sizes it had when recorded */
	long long step;
	uint64_t bytes;  /* when recorded */
	uint64_t ino;    /* its files' inode numbers, summed: a new save is new files */
	bool gone;       /* no longer in the folder, or found damaged */
};

struct node_ckpts {
	struct sink *k; /* borrowed; thread-safe */
	char *job, *dir;
	int node;
	int keep; /* checkpoint.keep for this disk; 0: keep all */
	void (*say)(void *, const char *);
	void *say_arg;
	struct node_rec *v;
	size_t nr, alloc;
	pthread_mutex_t mu;  /* v and the scans */
	pthread_mutex_t wmu; /* the thread's wake-up */
	pthread_cond_t wake;
	bool stop, thread_on;
	/*
	 * Rotate again on the next tick: the hub did not answer, or a copy
	 * was kept only because it is the newest step every node has, and the
	 * other nodes' records may yet catch up with this one's
	 */
	bool rotate_pending;
	bool hub_failure_said; /* once for a run of failed tries, not every tick */
	pthread_t thread;
};

static void tell(struct node_ckpts *w, const char *fmt, ...) TC_PRINTF(2, 3);

static void tell(struct node_ckpts *w, const char *fmt, ...)
{
	struct sbuf sb = SBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	sbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	if (w->say)
		w->say(w->say_arg, sb.buf);
	sbuf_release(&sb);
}

static struct node_rec *find(struct node_ckpts *w, const char *name)
{
	for (size_t i = 0; i < w->nr; i++)
		if (!strcmp(w->v[i].name, name))
			return &w->v[i];
	return NULL;
}

static void set_state(struct node_ckpts *w, struct node_rec *r, const char *state)
{
	struct tc_err err = TC_ERR_INIT;
	r->gone = true;
	if (sink_ckpt_node_state(w->k, w->job, w->node, r->name, state, &err))
		tell(w, "warning: checkpoints: %s", err.msg);
	tc_err_release(&err);
}

/* The sum of c's files' inode numbers (0 when one cannot be read). */
static uint64_t inodes(const char *dir, const struct ckpt *c)
{
	uint64_t sum = 0;
	struct sbuf p = SBUF_INIT;
	for (size_t i = 0; i < c->nfiles; i++) {
		struct stat sb;
		sbuf_reset(&p);
		sbuf_addf(&p, "%s/%s", dir, c->files[i].path);
		if (stat(p.buf, &sb) < 0) {
			sum = 0;
			break;
		}
		sum += (uint64_t)sb.st_ino;
	}
	sbuf_release(&p);
	return sum;
}

static int rec_step_cmp(const void *a, const void *b)
{
	const struct node_rec *x = *(const struct node_rec *const *)a;
	const struct node_rec *y = *(const struct node_rec *const *)b;
	if (x->step != y->step)
		return x->step < y->step ? -1 : 1;
	return strcmp(x->name, y->name);
}

int node_ckpts_common(const char *job, int self, const long long *steps, size_t n,
		      long long *common, struct tc_err *err)
{
	json_t *st = NULL;
	*common = -1;
	if (hub_job_status_json(job, 5, &st, err))
		return err->code;
	json_t *rows = json_object_get(st, "node_ckpts");
	if (!json_is_array(rows)) {
		json_decref(st);
		return tc_error(err, TC_EBACKEND, "the hub does not list the nodes' checkpoints");
	}
	/* the other nodes that write checkpoints, and their complete steps */
	for (size_t i = n; i-- > 0 && *common < 0;) {
		bool everywhere = true;
		for (size_t a = 0; a < json_array_size(rows) && everywhere; a++) {
			json_int_t other = json_integer_value(json_array_get(json_array_get(rows, a), 0));
			if (other == self)
				continue;
			bool has = false;
			for (size_t b = 0; b < json_array_size(rows) && !has; b++) {
				json_t *r = json_array_get(rows, b);
				has = json_integer_value(json_array_get(r, 0)) == other &&
				      json_integer_value(json_array_get(r, 1)) == steps[i];
			}
			everywhere = has;
		}
		if (everywhere)
			*common = steps[i];
	}
	json_decref(st);
	return 0;
}

/*
 * The step the resume rule would pick as far as the hub knows (multinode.c:
 * the newest step every node that writes checkpoints has whole), of ours
 * whole (live[0..n), oldest first).  -1: none in common; false: the hub did
 * not answer, and nothing may be removed on a guess.
 */
static bool common_step(struct node_ckpts *w, struct node_rec **live, size_t n, long long *step)
{
	struct tc_err err = TC_ERR_INIT;
	long long *steps = xcalloc(n ? n : 1, sizeof(*steps));
	for (size_t i = 0; i < n; i++)
		steps[i] = live[i]->step;
	int rc = node_ckpts_common(w->job, w->node, steps, n, step, &err);
	free(steps);
	if (rc) {
		if (!w->hub_failure_said)
			tell(w, "node %d: checkpoint.keep: the hub did not say which steps the other "
				"nodes have (%s): nothing removed until it does", w->node, err.msg);
		w->hub_failure_said = true;
		tc_err_release(&err);
		return false;
	}
	w->hub_failure_said = false;
	return true;
}

/*
 * checkpoint.keep on this disk, the driver's rule (jobio.c): the newest
 * keep complete checkpoints stay; so does the one a restart would resume
 * from, the newest step every node has whole, even when it is older.  A
 * save in progress is never complete, so never listed here.  Caller holds
 * w->mu.
 */
static void rotate(struct node_ckpts *w)
{
	struct node_rec **live = xcalloc(w->nr ? w->nr : 1, sizeof(*live));
	size_t n = 0;
	for (size_t i = 0; i < w->nr; i++)
		if (!w->v[i].gone)
			live[n++] = &w->v[i];
	long long common = -1;
	qsort(live, n, sizeof(*live), rec_step_cmp);
	w->rotate_pending = false;
	if (w->keep <= 0 || n <= (size_t)w->keep) {
		free(live);
		return;
	}
	if (!common_step(w, live, n, &common)) {
		/* no new save may come to trigger it again: the next tick does */
		w->rotate_pending = true;
		free(live);
		return;
	}
	for (size_t i = 0; i + (size_t)w->keep < n; i++) {
		struct node_rec *r = live[i];
		if (r->step == common) {
			/* the others may not have recorded their newer saves yet */
			w->rotate_pending = true;
			continue;
		}
		struct ckpt c = { 0 };
		struct tc_err err = TC_ERR_INIT;
		if (ckpt_files_from_json(r->files, &c, &err) || ckpt_remove(w->dir, &c, &err)) {
			tell(w, "warning: node %d: checkpoint.keep: %s", w->node, err.msg);
		} else {
			set_state(w, r, "removed");
			tell(w, "node %d: checkpoint %s (step %lld) removed from this node's disk: "
				"keeping the newest %d%s", w->node, r->name, r->step, w->keep,
			     common >= 0 && common < live[n - (size_t)w->keep]->step
				     ? " and the newest step every node has" : "");
		}
		ckpt_release(&c);
		tc_err_release(&err);
	}
	free(live);
}

/*
 * Record what became complete; mark what left the folder.  A recorded
 * checkpoint whose files changed size in place (same inodes: truncated,
 * overwritten half) is damaged; one saved again (new files, as an atomic
 * save makes them) is recorded again.  Caller holds w->mu.
 */
static void scan(struct node_ckpts *w, bool all_stable)
{
	struct ckpt_set set;
	struct tc_err err = TC_ERR_INIT;
	bool added = false;
	if (ckpt_scan(w->dir, 0, all_stable, &set, &err)) {
		tc_err_release(&err); /* no folder yet: nothing saved */
		return;
	}
	for (size_t i = 0; i < set.nr; i++) {
		struct ckpt *c = &set.v[i];
		struct node_rec *known = find(w, c->name);
		if (!c->complete)
			continue;
		uint64_t ino = inodes(w->dir, c);
		if (known && ino == known->ino) {
			if (!known->gone && c->bytes != known->bytes) {
				tell(w, "node %d: checkpoint %s (step %lld) changed on this node's disk "
					"after it was complete: damaged", w->node, known->name, known->step);
				set_state(w, known, "damaged");
			}
			continue;
		}
		if (ckpt_checksum(w->dir, c, &err)) {
			tc_err_release(&err); /* replaced while we read: the next scan sees the truth */
			continue;
		}
		char *files = ckpt_files_json(c);
		struct store_ckpt row = {
			.name = c->name, .dir = w->dir, .step = c->step, .epoch = c->epoch,
			.layout = (int)c->layout, .nfiles = (long long)c->nfiles,
			.bytes = (long long)c->bytes, .checksum = c->checksum, .files_json = files,
			.created = now_wall(), .state = "complete",
		};
		if (sink_ckpt_node_put(w->k, w->job, w->node, &row, &err)) {
			tell(w, "warning: checkpoints: %s", err.msg);
			tc_err_release(&err);
			free(files);
			continue;
		}
		tell(w, "node %d: checkpoint %s complete on this node's disk: step %lld, crc32c %s",
		     w->node, c->name, c->step, c->checksum);
		added = true;
		if (known) { /* saved again under the same name */
			free(known->files);
			known->files = files;
			known->step = c->step;
			known->bytes = c->bytes;
			known->ino = ino;
			known->gone = false;
		} else {
			XGROW(w->v, w->nr + 1, w->alloc);
			w->v[w->nr++] = (struct node_rec){ xstrdup(c->name), files, c->step, c->bytes,
							   ino, false };
		}
	}
	for (size_t i = 0; i < w->nr; i++) {
		bool there = false;
		for (size_t k = 0; k < set.nr && !there; k++)
			there = !strcmp(set.v[k].name, w->v[i].name);
		if (!there && !w->v[i].gone)
			set_state(w, &w->v[i], "removed");
	}
	ckpt_set_release(&set);
	if (added || w->rotate_pending)
		rotate(w);
}

static void *thread_main(void *arg)
{
	struct node_ckpts *w = arg;
	for (;;) {
		pthread_mutex_lock(&w->wmu);
		if (!w->stop) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += NODE_CKPT_TICK_MS / 1000;
			pthread_cond_timedwait(&w->wake, &w->wmu, &ts);
		}
		bool stop = w->stop;
		pthread_mutex_unlock(&w->wmu);
		if (stop)
			break;
		pthread_mutex_lock(&w->mu);
		scan(w, false);
		pthread_mutex_unlock(&w->mu);
	}
	return NULL;
}

struct node_ckpts *node_ckpts_start(struct sink *k, const char *job, int node, const char *dir,
				    int keep, void (*say)(void *, const char *), void *say_arg)
{
	struct node_ckpts *w = xcalloc(1, sizeof(*w));
	w->k = k;
	w->keep = keep;
	w->job = xstrdup(job);
	w->dir = xstrdup(dir);
	w->node = node;
	w->say = say;
	w->say_arg = say_arg;
	pthread_mutex_init(&w->mu, NULL);
	pthread_mutex_init(&w->wmu, NULL);
	pthread_cond_init(&w->wake, NULL);
	w->thread_on = pthread_create(&w->thread, NULL, thread_main, w) == 0;
	if (!w->thread_on)
		tell(w, "warning: node %d: cannot watch its checkpoints while it runs; "
			"they are recorded at the end of the attempt", node);
	return w;
}

/* Are c's files still there with the sizes recorded (a truncated or half-deleted copy is not)? */
static bool still_whole(const char *dir, const struct node_rec *r)
{
	struct ckpt c = { 0 };
	struct tc_err err = TC_ERR_INIT;
	bool ok = ckpt_files_from_json(r->files, &c, &err) == 0;
	struct sbuf p = SBUF_INIT;
	for (size_t i = 0; ok && i < c.nfiles; i++) {
		struct stat sb;
		sbuf_reset(&p);
		sbuf_addf(&p, "%s/%s", dir, c.files[i].path);
		ok = stat(p.buf, &sb) == 0 && (uint64_t)sb.st_size == c.files[i].size;
	}
	sbuf_release(&p);
	ckpt_release(&c);
	tc_err_release(&err);
	return ok;
}

void node_ckpts_stop(struct node_ckpts *w, struct strvec *whole, bool *wrote)
{
	if (wrote)
		*wrote = false;
	if (!w)
		return;
	if (w->thread_on) {
		pthread_mutex_lock(&w->wmu);
		w->stop = true;
		pthread_cond_signal(&w->wake);
		pthread_mutex_unlock(&w->wmu);
		pthread_join(w->thread, NULL);
	}
	pthread_mutex_lock(&w->mu);
	scan(w, true); /* every worker is gone: what is there is final */
	/*
	 * The last save's rotation waits on the hub, or on the other nodes'
	 * records of their last saves: a few more tries
	 */
	for (int i = 0; i < NODE_CKPT_FINAL_TRIES && w->rotate_pending; i++) {
		struct timespec ts = { NODE_CKPT_TICK_MS / 1000, 0 };
		nanosleep(&ts, NULL);
		rotate(w);
	}
	for (size_t i = 0; i < w->nr; i++) {
		struct node_rec *r = &w->v[i];
		if (!r->gone && !still_whole(w->dir, r)) {
			tell(w, "node %d: checkpoint %s (step %lld) is no longer whole on this node's disk",
			     w->node, r->name, r->step);
			set_state(w, r, "damaged");
		}
		if (!r->gone && whole)
			strvec_push(whole, r->name);
	}
	if (wrote)
		*wrote = w->nr > 0;
	pthread_mutex_unlock(&w->mu);
	for (size_t i = 0; i < w->nr; i++) {
		free(w->v[i].name);
		free(w->v[i].files);
	}
	free(w->v);
	pthread_mutex_destroy(&w->mu);
	pthread_mutex_destroy(&w->wmu);
	pthread_cond_destroy(&w->wake);
	free(w->job);
	free(w->dir);
	free(w);
}
