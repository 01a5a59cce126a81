/*
 * xfer.c -- one object copy split into parts that run on the pool.
 *
 * The destination write is begun by the submitter (for S3 above the
 * threshold: CreateMultipartUpload), each part is a pool task, and the task
 * that finishes the last part commits (CompleteMultipartUpload, or rename
 * into place) or, when any part failed, aborts: so a failed copy leaves
 * nothing visible, and no thread ever waits on another.
 *
 * Part data paths (src -> dst):
 *   local -> local  copy_file_range, the whole file in one task (below)
 *   s3    -> local  ranged GET written with pwrite at the offset
 *   local -> s3     PUT / UploadPart read with pread
 *   s3    -> s3     ranged GET into memory, then PUT / UploadPart
 *
 * A local -> local copy is one part whatever its size: buffered writes to
 * one file take its inode's lock, so parallel parts wait on each other (on
 * ext4 a third of their CPU went to spinning on that lock, and a 512 MiB
 * copy took 0.2-0.3 s of system time instead of 0.16-0.18), and a file
 * system that clones (XFS, btrfs) shares the whole range in one call.
 *
 * Progress: the bytes of a copy are counted as they move (read for an
 * upload, written for a download), into the submitter's `moving` counter;
 * a retry that starts a part over takes its bytes back, and the copy's
 * whole count is taken back when it ends, when done() reports its size.
 */
#include "core/util.h"
#include "core/xalloc.h"
#include "storage/storage_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct xfer {
	struct storage *src, *dst;
	char *src_key, *dst_key;
	uint64_t size, part_size;
	uint64_t step; /* local -> local: the one part is copied (and counted) this much at a time */
	int64_t mtime_ns;
	char *md5, *src_etag; /* struct wmeta's, owned */
	int nparts;
	struct wtx *tx;
	atomic_int left;
	atomic_bool failed;
	pthread_mutex_t mu;
	int rc;
	char *msg;
	xfer_done_fn done;
	void *arg;
	atomic_llong *moving; /* the submitter's bytes in flight, or NULL */
	atomic_llong counted; /* what this copy added to *moving */
};

struct part {
	struct xfer *x;
	int idx;
};

static bool is_local(const struct storage *st)
{
	return st->ops == &storage_local_ops;
}

/* ---- progress ---- */

static void count(struct xfer *x, long long delta)
{
	if (!x->moving || !delta)
		return;
	atomic_fetch_add(&x->counted, delta);
	atomic_fetch_add(x->moving, delta);
}

/* A reader that counts what it hands out, and takes it back on a rewind. */
struct counting_reader {
	struct reader base;
	struct reader *in;
	struct xfer *x;
	uint64_t pos;
};

static ssize_t cr_read(struct reader *r, void *buf, size_t n)
{
	struct counting_reader *c = (struct counting_reader *)r;
	ssize_t k = c->in->read(c->in, buf, n);
	if (k > 0) {
		c->pos += (uint64_t)k;
		count(c->x, k);
	}
	return k;
}

static int cr_rewind(struct reader *r)
{
	struct counting_reader *c = (struct counting_reader *)r;
	count(c->x, -(long long)c->pos);
	c->pos = 0;
	return c->in->rewind(c->in);
}

/*
 * A sink that counts: its position after a write is *done + len (the
 * reader's count before this piece), so a retry that resumes or starts
 * over is counted right.
 */
struct counting_sink {
	sink_fn fn;
	void *arg;
	const uint64_t *done;
	uint64_t last;
	struct xfer *x;
};

static int cs_write(void *arg, const void *data, size_t len)
{
	struct counting_sink *c = arg;
	int rc = c->fn(c->arg, data, len);
	if (rc == 0) {
		uint64_t now = *c->done + len;
		count(c->x, (long long)now - (long long)c->last);
		c->last = now;
	}
	return rc;
}

/* ---- readers ---- */

struct file_reader {
	struct reader base;
	int fd;
	uint64_t off, len, pos;
};

static ssize_t fr_read(struct reader *r, void *buf, size_t n)
{
	struct file_reader *f = (struct file_reader *)r;
	if (f->pos >= f->len)
		return 0;
	if (n > f->len - f->pos)
		n = (size_t)(f->len - f->pos);
	for (;;) {
		ssize_t k = pread(f->fd, buf, n, (off_t)(f->off + f->pos));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1; /* the file shrank: a short upload would be wrong */
		f->pos += (uint64_t)k;
		return k;
	}
}

static int fr_rewind(struct reader *r)
{
	((struct file_reader *)r)->pos = 0;
	return 0;
}

struct mem_reader {
	struct reader base;
	const char *data;
	size_t len, pos;
};

static ssize_t mr_read(struct reader *r, void *buf, size_t n)
{
	struct mem_reader *m = (struct mem_reader *)r;
	if (n > m->len - m->pos)
		n = m->len - m->pos;
	memcpy(buf, m->data + m->pos, n);
	m->pos += n;
	return (ssize_t)n;
}

static int mr_rewind(struct reader *r)
{
	((struct mem_reader *)r)->pos = 0;
	return 0;
}

struct mem_sink {
	struct sbuf *buf;
	const uint64_t *done;
};

static int mem_sink_write(void *arg, const void *data, size_t len)
{
	struct mem_sink *m = arg;
	if (m->buf->len > *m->done)
		sbuf_setlen(m->buf, (size_t)*m->done); /* a retry starts over */
	sbuf_add(m->buf, data, len);
	return 0;
}

/* ---- parts ---- */

static int copy_part(struct xfer *x, int idx, struct tc_err *err)
{
	uint64_t off = (uint64_t)idx * x->part_size;
	uint64_t len = x->size - off < x->part_size ? x->size - off : x->part_size;
	int rc = 0;
	if (is_local(x->dst)) {
		if (is_local(x->src)) {
			int fd;
			if ((rc = local_open_for_read(x->src, x->src_key, &fd, err)))
				return rc;
			/* in steps, so that a large file's progress moves (copy_file_range says nothing) */
			for (uint64_t at = 0; at < len && !rc;) {
				uint64_t n = len - at < x->step ? len - at : x->step;
				rc = local_wpart_from_fd(x->tx, fd, off + at, n, err);
				if (!rc)
					count(x, (long long)n);
				at += n;
			}
			close(fd);
			return rc;
		}
		uint64_t done = 0;
		struct counting_sink cs = { NULL, NULL, &done, 0, x };
		local_wtx_sink(x->tx, off, &done, &cs.fn, &cs.arg);
		rc = x->src->ops->read(x->src, x->src_key, off, len, cs_write, &cs, &done, err);
		if (!rc)
			return local_wtx_sink_end(x->tx, cs.arg, err);
		struct tc_err later = TC_ERR_INIT; /* the read's error is the one to report */
		(void)local_wtx_sink_end(x->tx, cs.arg, &later);
		tc_err_release(&later);
		return rc;
	}
	if (is_local(x->src)) {
		struct file_reader fr = { { fr_read, fr_rewind }, -1, off, len, 0 };
		struct counting_reader cr = { { cr_read, cr_rewind }, &fr.base, x, 0 };
		if ((rc = local_open_for_read(x->src, x->src_key, &fr.fd, err)))
			return rc;
		rc = x->dst->ops->wpart(x->tx, idx, off, len, &cr.base, err);
		close(fr.fd);
		return rc;
	}
	/* s3 -> s3: the download is half the work, the upload the other half */
	struct sbuf data = SBUF_INIT;
	uint64_t done = 0;
	struct mem_sink ms = { &data, &done };
	rc = x->src->ops->read(x->src, x->src_key, off, len, mem_sink_write, &ms, &done, err);
	if (!rc) {
		struct mem_reader mr = { { mr_read, mr_rewind }, data.buf, data.len, 0 };
		struct counting_reader cr = { { cr_read, cr_rewind }, &mr.base, x, 0 };
		rc = x->dst->ops->wpart(x->tx, idx, off, len, &cr.base, err);
	}
	sbuf_release(&data);
	return rc;
}

/*
 * The whole copy once more, in this thread: a new upload, every part, the
 * commit.  For a commit that failed for good: some servers (s3rver among
 * them) lose a multipart upload when its completion is cut off mid-request,
 * and then only a fresh upload can succeed.
 */
static int redo_whole(struct xfer *x, struct tc_err *err)
{
	x->tx = NULL;
	count(x, -atomic_load(&x->counted)); /* every byte moves again */
	struct wmeta meta = { x->mtime_ns, x->md5, x->src_etag };
	int rc = x->dst->ops->wbegin(x->dst, x->dst_key, x->size, &meta, x->nparts, &x->tx, err);
	if (rc)
		return rc;
	for (int i = 0; i < x->nparts && !rc; i++)
		rc = copy_part(x, i, err);
	if (rc) {
		x->dst->ops->wabort(x->tx);
		return rc;
	}
	return x->dst->ops->wcommit(x->tx, err);
}

static void xfer_finish(struct xfer *x)
{
	if (atomic_load(&x->failed)) {
		x->dst->ops->wabort(x->tx);
	} else {
		struct tc_err err = TC_ERR_INIT;
		int rc = x->dst->ops->wcommit(x->tx, &err);
		for (int again = 0; rc == TC_ESTORAGE && again < 2; again++) {
			tc_err_release(&err);
			rc = redo_whole(x, &err);
		}
		if (rc) {
			x->rc = rc;
			x->msg = xstrdup(err.msg ? err.msg : "commit failed");
		}
		tc_err_release(&err);
	}
	x->done(x->arg, x->dst_key, x->size, x->rc, x->msg);
	/* after done(): a progress line may count these bytes twice for a moment, never lose them */
	if (x->moving)
		atomic_fetch_sub(x->moving, atomic_load(&x->counted));
	pthread_mutex_destroy(&x->mu);
	free(x->msg);
	free(x->md5);
	free(x->src_etag);
	free(x->src_key);
	free(x->dst_key);
	free(x);
}

static void part_task(void *arg)
{
	struct part *p = arg;
	struct xfer *x = p->x;
	if (!atomic_load(&x->failed)) {
		struct tc_err err = TC_ERR_INIT;
		int rc = copy_part(x, p->idx, &err);
		if (rc) {
			pthread_mutex_lock(&x->mu);
			if (!x->rc) {
				x->rc = rc;
				x->msg = xstrdup(err.msg ? err.msg : "copy failed");
			}
			atomic_store(&x->failed, true);
			pthread_mutex_unlock(&x->mu);
		}
		tc_err_release(&err);
	}
	free(p);
	if (atomic_fetch_sub(&x->left, 1) == 1)
		xfer_finish(x);
}

void xfer_submit(struct pool *pl, struct storage *src, const struct storage_obj *obj,
		 struct storage *dst, const char *dst_key, atomic_llong *moving, xfer_done_fn done,
		 void *arg)
{
	struct xfer *x = xcalloc(1, sizeof(*x));
	x->moving = moving;
	atomic_init(&x->counted, 0);
	x->src = src;
	x->dst = dst;
	x->src_key = xstrdup(obj->key);
	x->dst_key = xstrdup(dst_key);
	x->size = obj->size;
	x->done = done;
	x->arg = arg;
	pthread_mutex_init(&x->mu, NULL);
	uint64_t threshold = storage_multipart_threshold();
	const char *e = getenv("TRAINCTL_PART_SIZE");
	long v;
	uint64_t min_part = e && parse_long(e, 1, 1L << 32, &v) ? (uint64_t)v : (16u << 20);
	if (!is_local(dst) && min_part < (5u << 20))
		min_part = 5u << 20; /* S3's smallest part */
	if (x->size > threshold) {
		x->part_size = storage_part_size(x->size, min_part);
		x->nparts = (int)((x->size + x->part_size - 1) / x->part_size);
	} else {
		x->part_size = x->size ? x->size : 1;
		x->nparts = 1;
	}
	x->step = x->part_size;
	if (is_local(src) && is_local(dst)) {
		x->part_size = x->size ? x->size : 1;
		x->nparts = 1;
	}
	x->mtime_ns = obj->mtime_ns;
	if (!is_local(src) && obj->etag) {
		/* what lets the next S3-to-S3 sync know the copy whatever its parts (sync.c) */
		x->src_etag = xstrdup(obj->etag);
		if (obj->md5 || storage_etag_is_md5(obj->etag))
			x->md5 = xstrdup(obj->md5 ? obj->md5 : obj->etag);
	}
	struct tc_err err = TC_ERR_INIT;
	struct wmeta meta = { x->mtime_ns, x->md5, x->src_etag };
	int rc = dst->ops->wbegin(dst, dst_key, x->size, &meta, x->nparts, &x->tx, &err);
	if (rc) {
		done(arg, dst_key, x->size, rc, err.msg ? err.msg : "cannot start the copy");
		tc_err_release(&err);
		free(x->md5);
		free(x->src_etag);
		pthread_mutex_destroy(&x->mu);
		free(x->src_key);
		free(x->dst_key);
		free(x);
		return;
	}
	int nparts = x->nparts; /* x is freed by whichever task finishes last */
	atomic_store(&x->left, nparts);
	for (int i = 0; i < nparts; i++) {
		struct part *p = xmalloc(sizeof(*p));
		p->x = x;
		p->idx = i;
		pool_submit(pl, part_task, p);
	}
}
