/*
 * sync.c -- make one location hold what another holds.
 *
 * Both listings arrive in key order, so the two are merged like sorted
 * files: a key only in the source is copied, a key in both is copied when
 * it differs (see storage.h), a key only in the destination is deleted with
 * --delete.  Copies and deletes run on the pool, whose queue is bounded:
 * memory stays flat however many keys there are.
 *
 * Source keys are somebody else's data: one that a local destination cannot
 * hold safely (storage_key_problem: "a/../../x", "/etc/x", "a//b") is never
 * handed to the copy code; it is counted as refused and fails the sync at
 * the end.  local.c refuses such keys again, and walks to every folder it
 * writes without following links.
 */
#include "core/util.h"
#include "core/xalloc.h"
#include "storage/storage_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

struct syncer {
	const struct sync_opts *o;
	struct storage *src, *dst;
	struct pool *pool;
	pthread_mutex_t mu;
	struct sync_stats st;
	uint64_t queued_bytes;
	atomic_llong moving;      /* bytes of copies in flight (xfer_submit) */
	char *first_err;
	char *first_refused;      /* the first refused key */
	const char *refused_why;
	/* progress */
	pthread_t prog;
	pthread_cond_t prog_cv;
	bool prog_stop, prog_on;
	double t0;
};

/* One whole line to the caller's say (storage.h: sync_opts.say); < 0: not written. */
static int say_line(struct syncer *s, bool progress, const struct sbuf *line)
{
	return s->o->say ? s->o->say(s->o->say_arg, progress, line->buf, line->len) : 0;
}

static void record_failure(struct syncer *s, const char *msg)
{
	pthread_mutex_lock(&s->mu);
	s->st.failed++;
	if (!s->first_err)
		s->first_err = xstrdup(msg ? msg : "a transfer did not complete");
	pthread_mutex_unlock(&s->mu);
}

static void on_copied(void *arg, const char *key, uint64_t bytes, int rc, const char *msg)
{
	struct syncer *s = arg;
	if (rc) {
		record_failure(s, msg);
		return;
	}
	pthread_mutex_lock(&s->mu);
	s->st.copied++;
	s->st.bytes += bytes;
	pthread_mutex_unlock(&s->mu);
	if (s->o->verbose) {
		/* one whole line per write, so parallel lines never interleave */
		struct sbuf line = SBUF_INIT;
		sbuf_addf(&line, "copied %s\n", key);
		if (say_line(s, false, &line) < 0)
			record_failure(s, "cannot write to standard output");
		sbuf_release(&line);
	}
}

struct del_task {
	struct syncer *s;
	char *key;
};

static void delete_task(void *arg)
{
	struct del_task *d = arg;
	struct tc_err err = TC_ERR_INIT;
	if (storage_delete(d->s->dst, d->key, &err)) {
		record_failure(d->s, err.msg);
	} else {
		pthread_mutex_lock(&d->s->mu);
		d->s->st.deleted++;
		pthread_mutex_unlock(&d->s->mu);
		if (d->s->o->verbose) {
			struct sbuf line = SBUF_INIT;
			sbuf_addf(&line, "deleted %s\n", d->key);
			if (say_line(d->s, false, &line) < 0)
				errno = 0;
			sbuf_release(&line);
		}
	}
	tc_err_release(&err);
	free(d->key);
	free(d);
}

/*
 * S3 to S3, sizes equal: the same content?  Equal ETags say so, and two
 * plain-MD5 ETags that differ say not.  A multipart ETag depends on the part
 * size (rclone uses 5 MiB, aws-cli 8 MiB, trainctl 16), so then each side's
 * metadata is asked (HEAD), as rclone does: the copy records the ETag of
 * its source (trainctl), or both record the content's MD5 (rclone's
 * md5chksum, trainctl's when it knew it).  Without either, they differ: a
 * copy too many, never a change missed.
 */
static bool same_objects(struct syncer *s, const struct storage_obj *a, const struct storage_obj *b)
{
	if (!a->etag || !b->etag)
		return false;
	if (!strcasecmp(a->etag, b->etag))
		return true;
	if (storage_etag_is_md5(a->etag) && storage_etag_is_md5(b->etag))
		return false;
	struct storage_obj sa, sb;
	struct tc_err e1 = TC_ERR_INIT, e2 = TC_ERR_INIT;
	bool same = false;
	if (storage_stat(s->dst, b->key, &sb, &e2) == 0) {
		if (sb.src_etag && !strcasecmp(sb.src_etag, a->etag)) {
			same = true;
		} else if (sb.md5) {
			const char *ma = storage_etag_is_md5(a->etag) ? a->etag : NULL;
			if (!ma && storage_stat(s->src, a->key, &sa, &e1) == 0) {
				same = sa.md5 && !strcasecmp(sa.md5, sb.md5);
				storage_obj_release(&sa);
			} else if (ma) {
				same = !strcasecmp(ma, sb.md5);
			}
		}
	}
	storage_obj_release(&sb);
	tc_err_release(&e1);
	tc_err_release(&e2);
	return same;
}

static bool differs(struct syncer *s, const struct storage_obj *a, const struct storage_obj *b)
{
	if (a->size != b->size)
		return true;
	bool sl = s->src->ops == &storage_local_ops, dl = s->dst->ops == &storage_local_ops;
	/* a local copy was given its source's time to the nanosecond */
	if (dl)
		return a->mtime_ns != b->mtime_ns;
	if (sl) /* the object is older than the file's whole second */
		return (int64_t)ns_to_timespec(a->mtime_ns).tv_sec * NS_PER_SEC > b->mtime_ns;
	return !same_objects(s, a, b);
}

static void say_action(struct syncer *s, const char *what, const char *key)
{
	if (s->o->on_action)
		s->o->on_action(s->o->arg, what, key);
	if (s->o->dry_run) {
		struct sbuf line = SBUF_INIT;
		sbuf_addf(&line, "would %s %s\n", what, key);
		if (say_line(s, false, &line) < 0)
			errno = 0; /* as printf's: a closed stdout is not the sync's failure */
		sbuf_release(&line);
	}
}

static void do_copy(struct syncer *s, const struct storage_obj *obj, const char *dst_key)
{
	say_action(s, "copy", dst_key);
	if (s->o->dry_run) {
		s->st.copied++;
		s->st.bytes += obj->size;
		return;
	}
	pthread_mutex_lock(&s->mu);
	s->queued_bytes += obj->size;
	pthread_mutex_unlock(&s->mu);
	xfer_submit(s->pool, s->src, obj, s->dst, dst_key, &s->moving, on_copied, s);
}

static void do_delete(struct syncer *s, const char *key)
{
	say_action(s, "delete", key);
	if (s->o->dry_run) {
		s->st.deleted++;
		return;
	}
	struct del_task *d = xmalloc(sizeof(*d));
	d->s = s;
	d->key = xstrdup(key);
	pool_submit(s->pool, delete_task, d);
}

static void print_progress(struct syncer *s, bool final)
{
	pthread_mutex_lock(&s->mu);
	struct sync_stats st = s->st;
	uint64_t queued = s->queued_bytes;
	pthread_mutex_unlock(&s->mu);
	/* the copies done, and the bytes of those still going (a large object moves for minutes) */
	long long moving = final ? 0 : atomic_load(&s->moving);
	double moved = (double)st.bytes + (moving > 0 ? (double)moving : 0);
	if (moved > (double)queued)
		moved = (double)queued;
	double dt = now_wall() - s->t0;
	struct sbuf line = SBUF_INIT;
	sbuf_addf(&line, "\r%llu listed, %llu copied, %llu skipped, %llu deleted",
		  (unsigned long long)st.listed, (unsigned long long)st.copied,
		  (unsigned long long)st.skipped, (unsigned long long)st.deleted);
	if (st.failed)
		sbuf_addf(&line, ", %llu failed", (unsigned long long)st.failed);
	if (st.refused)
		sbuf_addf(&line, ", %llu refused", (unsigned long long)st.refused);
	sbuf_adds(&line, ", ");
	format_bytes(&line, moved);
	sbuf_adds(&line, " of ");
	format_bytes(&line, (double)queued);
	sbuf_adds(&line, ", ");
	format_bytes(&line, dt > 0 ? moved / dt : 0);
	sbuf_adds(&line, "/s\033[K");
	if (final)
		sbuf_addch(&line, '\n');
	if (say_line(s, true, &line) < 0)
		errno = 0; /* a closed terminal must not fail the sync */
	sbuf_release(&line);
}

static void *progress_thread(void *arg)
{
	struct syncer *s = arg;
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_lock(&m);
	for (;;) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 500000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_mutex_lock(&s->mu);
		bool stop = s->prog_stop;
		pthread_mutex_unlock(&s->mu);
		if (stop)
			break;
		pthread_cond_timedwait(&s->prog_cv, &m, &ts);
		pthread_mutex_lock(&s->mu);
		stop = s->prog_stop;
		pthread_mutex_unlock(&s->mu);
		if (stop)
			break;
		print_progress(s, false);
	}
	pthread_mutex_unlock(&m);
	pthread_mutex_destroy(&m);
	return NULL;
}

/* Split "s3://b/dir/name" into "s3://b/dir/" and "name". */
static void split_last(const char *url, char **parent, char **name)
{
	const char *sl = strrchr(url, '/');
	const char *scheme_end = strstr(url, "://");
	if (!sl || (scheme_end && sl < scheme_end + 3)) {
		*parent = xstrdup(".");
		*name = xstrdup(url);
		return;
	}
	*parent = xstrndup(url, (size_t)(sl - url + 1));
	*name = xstrdup(sl + 1);
}

/* One file as the source: copy it when the target differs. */
static int sync_single(struct syncer *s, const char *dst_url, struct tc_err *err)
{
	struct storage_iter *it = NULL;
	struct storage_obj obj;
	int rc = storage_iter_start(s->src, &it, err);
	if (rc)
		return rc;
	rc = storage_iter_next(it, &obj, err);
	if (rc < 0)
		goto out;
	rc = 0;
	char *key = xstrdup(obj.key);
	obj.key = key;
	size_t dl = strlen(dst_url);
	bool into_dir = dst_url[dl - 1] == '/' ||
			(!storage_is_remote(dst_url) && is_dir(!strncmp(dst_url, "file://", 7) ? dst_url + 7
											: dst_url));
	char *name = NULL, *parent = NULL;
	if (into_dir) {
		rc = storage_open(dst_url, &s->dst, err);
		name = xstrdup(key);
	} else {
		split_last(dst_url, &parent, &name);
		rc = storage_open(parent, &s->dst, err);
	}
	if (!rc) {
		s->st.listed = 1;
		struct storage_obj d;
		struct tc_err e2 = TC_ERR_INIT;
		int src2 = storage_stat(s->dst, name, &d, &e2);
		if (src2 && src2 != TC_ENOTFOUND) {
			rc = tc_error(err, src2, "%s", e2.msg);
		} else if (src2 == TC_ENOTFOUND || differs(s, &obj, &d)) {
			do_copy(s, &obj, name);
		} else {
			s->st.skipped++;
		}
		storage_obj_release(&d);
		tc_err_release(&e2);
	}
	free(name);
	free(parent);
	free(key);
out:
	storage_iter_free(it);
	return rc;
}

/* Skip (and count) a source key the destination cannot hold safely. */
static bool refuse(struct syncer *s, const char *key)
{
	if (s->dst->ops != &storage_local_ops)
		return false; /* a key is only a name in a bucket */
	const char *why = storage_key_problem(key);
	if (!why)
		return false;
	pthread_mutex_lock(&s->mu);
	s->st.listed++;
	s->st.refused++;
	if (!s->first_refused) {
		s->first_refused = xstrdup(key);
		s->refused_why = why;
	}
	pthread_mutex_unlock(&s->mu);
	if (s->o->on_refused)
		s->o->on_refused(s->o->arg, key, why);
	return true;
}

static int sync_merge(struct syncer *s, struct tc_err *err)
{
	struct storage_iter *is = NULL, *id = NULL;
	struct storage_obj a, b;
	int rc, ha, hb;
	if ((rc = storage_iter_start(s->src, &is, err)) || (rc = storage_iter_start(s->dst, &id, err)))
		goto out;
	ha = storage_iter_next(is, &a, err);
	hb = ha < 0 ? 0 : storage_iter_next(id, &b, err);
	while (ha > 0 || hb > 0) {
		if (ha < 0 || hb < 0) {
			rc = ha < 0 ? ha : hb;
			goto out;
		}
		if (ha > 0 && refuse(s, a.key)) {
			ha = storage_iter_next(is, &a, err);
			continue;
		}
		int c = ha <= 0 ? 1 : hb <= 0 ? -1 : strcmp(a.key, b.key);
		if (c < 0) {
			pthread_mutex_lock(&s->mu);
			s->st.listed++;
			pthread_mutex_unlock(&s->mu);
			do_copy(s, &a, a.key);
			ha = storage_iter_next(is, &a, err);
		} else if (c > 0) {
			if (s->o->delete_extra)
				do_delete(s, b.key);
			hb = storage_iter_next(id, &b, err);
		} else {
			pthread_mutex_lock(&s->mu);
			s->st.listed++;
			pthread_mutex_unlock(&s->mu);
			if (differs(s, &a, &b))
				do_copy(s, &a, a.key);
			else {
				pthread_mutex_lock(&s->mu);
				s->st.skipped++;
				pthread_mutex_unlock(&s->mu);
			}
			ha = storage_iter_next(is, &a, err);
			hb = ha < 0 ? 0 : storage_iter_next(id, &b, err);
		}
	}
	rc = ha < 0 ? ha : hb < 0 ? hb : 0;
out:
	storage_iter_free(is);
	storage_iter_free(id);
	return rc;
}

static void syncer_init(struct syncer *s, const struct sync_opts *o)
{
	memset(s, 0, sizeof(*s));
	atomic_init(&s->moving, 0);
	s->o = o;
	s->t0 = now_wall();
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->prog_cv, NULL);
}

/* The pool and the progress line, once the source is open. */
static void syncer_start(struct syncer *s, const struct sync_opts *o)
{
	int jobs = o->jobs > 0 ? o->jobs : 8;
	if (!o->dry_run)
		s->pool = pool_new(jobs, jobs * 4, NULL, storage_thread_exit);
	if (o->progress && !o->dry_run && pthread_create(&s->prog, NULL, progress_thread, s) == 0)
		s->prog_on = true;
}

/* Wait for the pool, stop the progress line, word what went wrong. */
static int syncer_finish(struct syncer *s, int rc, struct sync_stats *stats, struct tc_err *err)
{
	if (s->pool) {
		pool_wait(s->pool);
		pool_free(s->pool);
	}
	if (s->prog_on) {
		pthread_mutex_lock(&s->mu);
		s->prog_stop = true;
		pthread_mutex_unlock(&s->mu);
		pthread_cond_signal(&s->prog_cv);
		pthread_join(s->prog, NULL);
		print_progress(s, true);
	}
	s->st.seconds = now_wall() - s->t0;
	if (!rc && s->st.failed)
		rc = tc_error(err, TC_ESTORAGE, "sync: %llu of %llu copies or deletes failed; first: %s%s",
			      (unsigned long long)s->st.failed,
			      (unsigned long long)(s->st.failed + s->st.copied + s->st.deleted),
			      s->first_err, s->st.refused ? "; unsafe keys were refused too" : "");
	else if (!rc && s->st.refused)
		rc = tc_error(err, TC_ESTORAGE,
			      "sync: refused %llu key%s that could write outside %s, first '%s': %s",
			      (unsigned long long)s->st.refused, s->st.refused == 1 ? "" : "s",
			      storage_url(s->dst), s->first_refused, s->refused_why);
	if (stats)
		*stats = s->st;
	free(s->first_err);
	free(s->first_refused);
	pthread_cond_destroy(&s->prog_cv);
	pthread_mutex_destroy(&s->mu);
	return rc;
}

int sync_locations(struct storage *src, struct storage *dst, const struct sync_opts *o,
		   struct sync_stats *stats, struct tc_err *err)
{
	struct syncer s;
	syncer_init(&s, o);
	s.src = src;
	s.dst = dst;
	syncer_start(&s, o);
	int rc = sync_merge(&s, err);
	rc = syncer_finish(&s, rc, stats, err);
	storage_thread_exit();
	return rc;
}

int storage_sync(const char *src, const char *dst, const struct sync_opts *o,
		 struct sync_stats *stats, struct tc_err *err)
{
	if (stats)
		memset(stats, 0, sizeof(*stats));
	/* both addresses first: a mistyped destination must not wait for the source */
	for (int i = 0; i < 2; i++) {
		char *why = storage_location_problem(i ? dst : src);
		if (why) {
			tc_error(err, TC_EINPUT, "%s", why);
			free(why);
			return TC_EINPUT;
		}
	}
	struct syncer s;
	syncer_init(&s, o);
	int rc = storage_open(src, &s.src, err);
	if (rc)
		goto out;
	s.src->no_links = o->no_links;
	syncer_start(&s, o);
	if (s.src->single) {
		rc = sync_single(&s, dst, err);
	} else if (s.src->ops == &storage_local_ops && !is_dir(s.src->root)) {
		/* a source that is not there is an error, not an empty folder */
		rc = tc_error(err, TC_ENOTFOUND, "'%s' does not exist", src);
	} else if (!(rc = storage_open(dst, &s.dst, err))) {
		rc = sync_merge(&s, err);
	}
out:
	rc = syncer_finish(&s, rc, stats, err);
	storage_close(s.src);
	storage_close(s.dst);
	storage_thread_exit();
	return rc;
}
