/*
 * transform.c -- merge and split sharded safetensors checkpoints between
 * parallel strategies (the job of MindFormers' transform_ckpt), see ckpt.h
 * for the strategy file.
 *
 * Notes on the design:
 *  (1) Sources are mapped read-only.  Destinations are written with
 *      pwritev(2) straight from the source mappings into the page cache (one
 *      copy per byte): each run of a destination part is an iovec pointing
 *      into its source part, up to IOV_MAX runs or 64 MiB per call, so a
 *      split along an inner dimension (runs of a row each) costs no copy
 *      in this process either.  Only runs too short for an iovec to pay
 *      (under 256 bytes) are gathered in a buffer first.  Writing through a
 *      shared mapping instead costs a page fault per 4 KiB page, which is
 *      several times slower on virtual machines.
 *  (2) Memory does not grow with the model: the buffer is fixed, and when
 *      the last task of a tensor is done its source pages are dropped from
 *      this process (MADV_DONTNEED).
 *  (3) A destination tensor is a slice along one dimension of the full
 *      tensor, which is the concatenation of the source parts along another.
 *      With k the larger of the two dimensions, everything after k is one
 *      contiguous block per index of k: the copy loops over the indices
 *      before k and copies runs along k, cut where a source part ends.
 *  (4) Tasks are (tensor, destination rank) pairs taken by threads from an
 *      atomic counter; every task writes its own byte range.
 */
#include "ckpt/ckpt.h"
#include "core/strvec.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

struct rule {
	char *pattern;
	int dim;   /* -1: whole */
	int parts;
};

struct strategy {
	int world;
	struct rule *r;
	size_t nr;
};

static void strategy_free(struct strategy *s)
{
	for (size_t i = 0; i < s->nr; i++)
		free(s->r[i].pattern);
	free(s->r);
}

static int strategy_load(const char *path, struct strategy *s, struct tc_err *err)
{
	json_error_t je;
	memset(s, 0, sizeof(*s));
	json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return tc_error(err, TC_EINPUT, "%s:%d: %s", path, je.line, je.text);
	int rc = 0;
	json_t *w = json_object_get(root, "world"), *t = json_object_get(root, "tensors");
	if (!json_is_integer(w) || json_integer_value(w) < 1 || json_integer_value(w) > 65536) {
		rc = tc_error(err, TC_EINPUT, "%s: \"world\" must be a number of ranks (1..65536)", path);
		goto out;
	}
	s->world = (int)json_integer_value(w);
	if (t && !json_is_object(t)) {
		rc = tc_error(err, TC_EINPUT, "%s: \"tensors\" must map patterns to splits", path);
		goto out;
	}
	s->r = xcalloc(json_object_size(t) + 1, sizeof(*s->r));
	const char *pat;
	json_t *v;
	json_object_foreach(t, pat, v) {
		struct rule *r = &s->r[s->nr];
		r->dim = -1;
		r->parts = 1;
		if (json_is_string(v) && !strcmp(json_string_value(v), "none")) {
			/* whole */
		} else if (json_is_object(v) && json_is_integer(json_object_get(v, "dim"))) {
			json_t *p = json_object_get(v, "parts");
			r->dim = (int)json_integer_value(json_object_get(v, "dim"));
			r->parts = p ? (int)json_integer_value(p) : s->world;
			if (r->dim < 0 || r->dim >= ST_MAX_DIMS || r->parts < 1 || r->parts > s->world ||
			    s->world % r->parts) {
				rc = tc_error(err, TC_EINPUT,
					      "%s: '%s': dim must be 0..%d and parts must divide world (%d)",
					      path, pat, ST_MAX_DIMS - 1, s->world);
				goto out;
			}
			if (r->parts == 1)
				r->dim = -1;
		} else {
			rc = tc_error(err, TC_EINPUT, "%s: '%s': give \"none\" or {\"dim\": D, \"parts\": P}",
				      path, pat);
			goto out;
		}
		r->pattern = xstrdup(pat);
		s->nr++;
	}
out:
	json_decref(root);
	if (rc)
		strategy_free(s);
	return rc;
}

static const struct rule *strategy_for(const struct strategy *s, const char *name)
{
	static const struct rule whole = { NULL, -1, 1 };
	for (size_t i = 0; i < s->nr; i++)
		if (fnmatch(s->r[i].pattern, name, 0) == 0)
			return &s->r[i];
	return &whole;
}

/* ---- the source side ---- */

struct src_rank {
	struct st_file **f;
	size_t nf;
};

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int load_rank(const char *dir, int rank, struct src_rank *sr, struct tc_err *err)
{
	struct sbuf p = SBUF_INIT;
	sbuf_addf(&p, "%s/rank_%d", dir, rank);
	DIR *d = opendir(p.buf);
	if (!d) {
		int rc = tc_error_errno(err, TC_EINPUT, "cannot read '%s' (the strategy has %s)", p.buf,
					"more ranks than the folder");
		sbuf_release(&p);
		return rc;
	}
	struct dirent *e;
	struct strvec names = STRVEC_INIT;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (e->d_name[0] != '.' && l > 12 && !strcmp(e->d_name + l - 12, ".safetensors"))
			strvec_push(&names, e->d_name);
	}
	closedir(d);
	qsort(names.v, names.nr, sizeof(char *), cmp_str);
	int rc = 0;
	sr->f = xcalloc(names.nr + 1, sizeof(*sr->f));
	size_t base = p.len;
	for (size_t i = 0; i < names.nr && !rc; i++) {
		sbuf_setlen(&p, base);
		sbuf_addf(&p, "/%s", names.v[i]);
		rc = st_open(p.buf, &sr->f[sr->nf], err);
		if (!rc)
			sr->nf++;
	}
	if (!rc && !sr->nf) {
		sbuf_setlen(&p, base);
		rc = tc_error(err, TC_EINPUT, "'%s' holds no .safetensors file", p.buf);
	}
	strvec_clear(&names);
	sbuf_release(&p);
	return rc;
}

static const struct st_tensor *rank_find(const struct src_rank *sr, const char *name,
					 const struct st_file **file)
{
	for (size_t i = 0; i < sr->nf; i++) {
		const struct st_tensor *t = st_find(sr->f[i], name);
		if (t) {
			*file = sr->f[i];
			return t;
		}
	}
	return NULL;
}

/* One tensor: its full shape and where each source part is. */
struct job_tensor {
	const char *name;
	enum st_dtype dtype;
	int ndim;
	uint64_t full[ST_MAX_DIMS];
	int sdim, sparts;            /* source split */
	const unsigned char **part;  /* sparts pointers to part data */
	int ddim, dparts;            /* destination split */
	uint64_t *dst_off;           /* per destination rank: offset in its data section */
	uint64_t dst_bytes;          /* per destination rank */
	atomic_int tasks_left;       /* destination ranks still to write */
};

#define GATHER (1u << 20)    /* the buffer of short runs */
#define SHORT 256            /* runs shorter than this are gathered */
#define OUT_IOV 1024         /* IOV_MAX on Linux */
#define OUT_BYTES (64u << 20) /* bytes per pwritev */

/* Destination bytes in increasing offset order, written with pwritev. */
struct out {
	int fd;
	uint64_t pos;      /* file offset of the first pending byte */
	struct iovec iov[OUT_IOV];
	int niov;
	uint64_t pending;  /* bytes the iovecs hold */
	unsigned char *buf; /* short runs, gathered (GATHER bytes) */
	size_t len;
	int err;           /* errno of the first failed write */
	atomic_ullong *written; /* the plan's count of bytes written, for progress */
};

static void out_flush(struct out *o)
{
	struct iovec *v = o->iov;
	int n = o->niov;
	uint64_t done = 0;
	while (n > 0 && !o->err) {
		ssize_t w = pwritev(o->fd, v, n, (off_t)(o->pos + done));
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			o->err = w < 0 ? errno : EIO;
			break;
		}
		done += (uint64_t)w;
		/* a short write: go on after the bytes written */
		while (n > 0 && (size_t)w >= v->iov_len) {
			w -= (ssize_t)v->iov_len;
			v++;
			n--;
		}
		if (n > 0) {
			v->iov_base = (unsigned char *)v->iov_base + w;
			v->iov_len -= (size_t)w;
		}
	}
	atomic_fetch_add_explicit(o->written, done, memory_order_relaxed);
	o->pos += o->pending;
	o->pending = 0;
	o->niov = 0;
	o->len = 0;
}

/* Append n bytes at p to the pending write: a new iovec, or the last one grown. */
static void out_iov(struct out *o, const unsigned char *p, uint64_t n)
{
	struct iovec *last = o->niov ? &o->iov[o->niov - 1] : NULL;
	if (last && (const unsigned char *)last->iov_base + last->iov_len == p) {
		last->iov_len += n;
	} else {
		if (o->niov == OUT_IOV)
			out_flush(o);
		o->iov[o->niov++] = (struct iovec){ (void *)p, n };
	}
	o->pending += n;
	if (o->pending >= OUT_BYTES)
		out_flush(o);
}

static void out_put(struct out *o, const unsigned char *src, uint64_t n)
{
	while (n >= OUT_BYTES) {
		/* one iovec is at most OUT_BYTES: its length fits any size_t, its write one call */
		out_iov(o, src, OUT_BYTES);
		src += OUT_BYTES;
		n -= OUT_BYTES;
	}
	if (!n)
		return;
	if (n >= SHORT) {
		out_iov(o, src, n);
		return;
	}
	if (o->len + n > GATHER)
		out_flush(o);
	unsigned char *d = o->buf + o->len;
	memcpy(d, src, n);
	o->len += n;
	out_iov(o, d, n);
}

struct plan {
	struct job_tensor *t;
	size_t nt;
	int dworld;
	int *dfd;              /* per destination rank */
	int err;               /* errno of the first failed write */
	pthread_mutex_t mu;
	uint64_t *dsize, *ddata;
	atomic_size_t next;
	uint64_t bytes;
	atomic_ullong written;  /* tensor bytes written so far (progress) */
	uint64_t total;         /* tensor bytes to write */
	pthread_cond_t idle_cv; /* signalled (under mu) as each worker ends */
	int running;            /* workers still going */
};

static int cmp_jt(const void *a, const void *b)
{
	return strcmp(((const struct job_tensor *)a)->name, ((const struct job_tensor *)b)->name);
}

/* ---- copying ---- */

/* Write destination part dpart of t to out, in order. */
static void copy_part(const struct job_tensor *t, int dpart, struct out *out)
{
	size_t es = st_dtype_size(t->dtype);
	int a = t->ddim, b = t->sdim;
	/* destination range along a */
	uint64_t a0 = 0, a1 = 0;
	if (a >= 0) {
		uint64_t len = t->full[a] / (uint64_t)t->dparts;
		a0 = (uint64_t)dpart * len;
		a1 = a0 + len;
	}
	int k = a > b ? a : b;
	if (k < 0) {
		out_put(out, t->part[0], t->dst_bytes);
		return;
	}
	/* block: bytes per index of dim k */
	uint64_t block = es;
	for (int d = k + 1; d < t->ndim; d++)
		block *= t->full[d];
	/* the shape of a source part */
	uint64_t sshape[ST_MAX_DIMS];
	for (int d = 0; d < t->ndim; d++)
		sshape[d] = t->full[d];
	if (b >= 0)
		sshape[b] = t->full[b] / (uint64_t)t->sparts;
	uint64_t idx[ST_MAX_DIMS] = { 0 };
	if (a >= 0 && a < k)
		idx[a] = a0;
	uint64_t krange0 = a == k ? a0 : 0, krange1 = a == k ? a1 : t->full[k];
	for (;;) {
		/* the source part for this outer index, and offsets of the run's start */
		int part = 0;
		uint64_t sidx_b = 0;
		if (b >= 0 && b < k) {
			part = (int)(idx[b] / sshape[b]);
			sidx_b = idx[b] % sshape[b];
		}
		uint64_t k0 = krange0;
		while (k0 < krange1) {
			uint64_t k1 = krange1;
			int p = part;
			uint64_t sk0 = k0;
			if (b == k) {
				p = (int)(k0 / sshape[k]);
				sk0 = k0 % sshape[k];
				uint64_t end = (uint64_t)(p + 1) * sshape[k];
				if (end < k1)
					k1 = end;
			}
			/* row-major offset (in units of block) of [idx..., k] in the part;
			 * the destination offset only grows, so out needs no position */
			uint64_t soff = 0;
			for (int d = 0; d < k; d++)
				soff = soff * sshape[d] + (d == b ? sidx_b : idx[d]);
			soff = soff * sshape[k] + sk0;
			out_put(out, t->part[p] + soff * block, (k1 - k0) * block);
			k0 = k1;
		}
		/* next outer index (dims 0..k-1; dim a limited to [a0, a1)) */
		int d = k - 1;
		for (; d >= 0; d--) {
			uint64_t lo = d == a ? a0 : 0, hi = d == a ? a1 : t->full[d];
			if (++idx[d] < hi)
				break;
			idx[d] = lo;
		}
		if (d < 0)
			break;
	}
}

static void drop_pages(const void *p, uint64_t len)
{
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)(pg - 1);
	uintptr_t e = ((uintptr_t)p + len + (uintptr_t)pg - 1) & ~(uintptr_t)(pg - 1);
	/* only advice: pages already gone or shared with the cache stay correct */
	if (madvise((void *)a, e - a, MADV_DONTNEED) < 0)
		errno = 0;
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

static void populate(const void *p, uint64_t len)
{
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)(pg - 1);
	uintptr_t e = ((uintptr_t)p + len + (uintptr_t)pg - 1) & ~(uintptr_t)(pg - 1);
	/* only advice: older kernels fault the pages in one by one instead */
	if (madvise((void *)a, e - a, MADV_POPULATE_READ) < 0)
		errno = 0;
}

static void *worker(void *arg)
{
	struct plan *pl = arg;
	size_t ntasks = pl->nt * (size_t)pl->dworld;
	struct out o = { .fd = -1, .written = &pl->written };
	o.buf = xmalloc(GATHER);
	for (;;) {
		size_t task = atomic_fetch_add(&pl->next, 1);
		if (task >= ntasks)
			break;
		/* tensor-major: the source pages of a tensor are read by its ranks together */
		const struct job_tensor *t = &pl->t[task / (size_t)pl->dworld];
		int r = (int)(task % (size_t)pl->dworld);
		/* rank r holds part r * parts / world (ckpt.h) */
		int dpart = t->ddim >= 0 ? (int)((long long)r * t->dparts / pl->dworld) : 0;
		o.fd = pl->dfd[r];
		o.pos = pl->ddata[r] + t->dst_off[r];
		o.len = 0;
		o.niov = 0;
		o.pending = 0;
		if (t->dst_bytes) {
			/* map the source pages in one go: a fault per page costs more than the copy */
			uint64_t pb = t->dst_bytes * (uint64_t)(t->ddim >= 0 ? t->dparts : 1) / (uint64_t)t->sparts;
			for (int p = 0; p < t->sparts; p++)
				populate(t->part[p], pb);
			copy_part(t, dpart, &o);
		}
		out_flush(&o);
		if (atomic_fetch_sub(&((struct job_tensor *)t)->tasks_left, 1) == 1) {
			uint64_t part_bytes = t->dst_bytes;
			if (t->ddim >= 0)
				part_bytes *= (uint64_t)t->dparts; /* the full tensor ... */
			part_bytes /= (uint64_t)t->sparts;        /* ... over the source parts */
			for (int p = 0; p < t->sparts && part_bytes; p++)
				drop_pages(t->part[p], part_bytes);
		}
		if (o.err) {
			pthread_mutex_lock(&pl->mu);
			if (!pl->err)
				pl->err = o.err;
			pthread_mutex_unlock(&pl->mu);
			break;
		}
	}
	free(o.buf);
	pthread_mutex_lock(&pl->mu);
	pl->running--;
	pthread_cond_signal(&pl->idle_cv);
	pthread_mutex_unlock(&pl->mu);
	return NULL;
}

/* ---- the whole transform ---- */

static char *dst_header(const struct plan *pl, int r, const char *metadata)
{
	json_t *h = json_object();
	if (metadata) {
		json_t *m = json_loads(metadata, 0, NULL);
		if (m)
			json_object_set_new(h, "__metadata__", m);
	}
	for (size_t i = 0; i < pl->nt; i++) {
		const struct job_tensor *t = &pl->t[i];
		json_t *shape = json_array();
		for (int d = 0; d < t->ndim; d++) {
			uint64_t v = t->full[d];
			if (d == t->ddim)
				v /= (uint64_t)t->dparts;
			json_array_append_new(shape, json_integer((json_int_t)v));
		}
		json_object_set_new(h, t->name,
				    json_pack("{s:s, s:o, s:[I,I]}", "dtype", st_dtype_name(t->dtype), "shape",
					      shape, "data_offsets", (json_int_t)t->dst_off[r],
					      (json_int_t)(t->dst_off[r] + t->dst_bytes)));
	}
	char *s = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(h);
	if (!s)
		xdie_oom(0);
	return s;
}

/* pl->t: every tensor name of every source rank, once, sorted */
static void collect_names(struct plan *pl, const struct src_rank *sr, int sworld)
{
	size_t cap = 0;
	for (int r = 0; r < sworld; r++)
		for (size_t i = 0; i < sr[r].nf; i++)
			cap += sr[r].f[i]->nt;
	pl->t = xcalloc(cap + 1, sizeof(*pl->t));
	for (int r = 0; r < sworld; r++)
		for (size_t fi = 0; fi < sr[r].nf; fi++)
			for (size_t ti = 0; ti < sr[r].f[fi]->nt; ti++) {
				const char *name = sr[r].f[fi]->t[ti].name;
				bool seen = false;
				for (size_t k = 0; k < pl->nt && !seen; k++)
					seen = !strcmp(pl->t[k].name, name);
				if (!seen)
					pl->t[pl->nt++].name = name;
			}
	qsort(pl->t, pl->nt, sizeof(*pl->t), cmp_jt);
}

/*
 * Source part p of t, found in the first rank holding it: part 0 sets the
 * dtype and the full shape, every other part must agree with it.
 */
static int locate_part(struct job_tensor *t, int p, const struct src_rank *sr, int sworld,
		       const struct transform_opts *o, struct tc_err *err)
{
	int rank = p * sworld / t->sparts;
	const struct st_file *f = NULL;
	const struct st_tensor *x = rank_find(&sr[rank], t->name, &f);
	if (!x)
		return tc_error(err, TC_EINPUT, "%s/rank_%d: tensor '%s' is missing (part %d of %d)",
				o->src_dir, rank, t->name, p, t->sparts);
	if (p == 0) {
		t->dtype = x->dtype;
		t->ndim = x->ndim;
		memcpy(t->full, x->shape, sizeof(t->full));
		if (t->sdim >= t->ndim)
			return tc_error(err, TC_EINPUT, "%s: tensor '%s' has %d dimensions, no dim %d",
					o->src_strategy, t->name, t->ndim, t->sdim);
		if (t->sdim >= 0)
			t->full[t->sdim] *= (uint64_t)t->sparts;
	} else {
		bool same = x->dtype == t->dtype && x->ndim == t->ndim;
		for (int d = 0; same && d < t->ndim; d++)
			same = x->shape[d] == (d == t->sdim ? t->full[d] / (uint64_t)t->sparts : t->full[d]);
		if (!same)
			return tc_error(err, TC_EINPUT,
					"%s/rank_%d: tensor '%s': part %d differs in dtype or shape from part 0",
					o->src_dir, rank, t->name, p);
	}
	t->part[p] = f->map + f->data_off + x->begin;
	return 0;
}

/* One tensor of the plan: its source parts, and its split and size at the destination. */
static int plan_tensor(struct job_tensor *t, const struct strategy *ss, const struct strategy *ds,
		       const struct src_rank *sr, const struct transform_opts *o, struct tc_err *err)
{
	const struct rule *sru = strategy_for(ss, t->name), *dru = strategy_for(ds, t->name);
	t->sdim = sru->dim;
	t->sparts = sru->parts;
	t->ddim = dru->dim;
	t->dparts = dru->parts;
	t->part = xcalloc((size_t)t->sparts, sizeof(*t->part));
	for (int p = 0; p < t->sparts; p++) {
		int rc = locate_part(t, p, sr, ss->world, o, err);
		if (rc)
			return rc;
	}
	if (t->ddim >= t->ndim || (t->ddim >= 0 && t->full[t->ddim] % (uint64_t)t->dparts))
		return tc_error(err, TC_EINPUT,
				"%s: tensor '%s' (dimension %d of size %llu) cannot be split in %d parts",
				o->dst_strategy, t->name, t->ddim,
				(unsigned long long)(t->ddim >= 0 && t->ddim < t->ndim ? t->full[t->ddim] : 0),
				t->dparts);
	t->dst_bytes = st_dtype_size(t->dtype);
	for (int d = 0; d < t->ndim; d++)
		t->dst_bytes *= d == t->ddim ? t->full[d] / (uint64_t)t->dparts : t->full[d];
	t->dst_off = xcalloc((size_t)ds->world, sizeof(uint64_t));
	atomic_store(&t->tasks_left, ds->world);
	return 0;
}

/* Lay out destination rank r's file and write its header; the data follows from the workers. */
static int create_rank_file(struct plan *pl, int r, const char *metadata, const char *dst_dir,
			    struct tc_err *err)
{
	uint64_t off = 0;
	for (size_t i = 0; i < pl->nt; i++) {
		pl->t[i].dst_off[r] = off;
		off += pl->t[i].dst_bytes;
	}
	char *h = dst_header(pl, r, metadata);
	size_t hl = strlen(h), padded = (hl + 7) & ~(size_t)7;
	pl->ddata[r] = 8 + padded;
	pl->dsize[r] = 8 + padded + off;
	struct sbuf p = SBUF_INIT;
	sbuf_addf(&p, "%s/rank_%d", dst_dir, r);
	int rc = mkdir_p(p.buf, err);
	sbuf_adds(&p, "/model.safetensors");
	if (!rc) {
		pl->dfd[r] = open(p.buf, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (pl->dfd[r] < 0)
			rc = tc_error_errno(err, TC_ESTORAGE, "cannot create '%s'", p.buf);
	}
	if (!rc) {
		struct sbuf head = SBUF_INIT;
		for (int i = 0; i < 8; i++)
			sbuf_addch(&head, (char)(unsigned char)((uint64_t)padded >> (8 * i)));
		sbuf_add(&head, h, hl);
		while (head.len < 8 + padded)
			sbuf_addch(&head, ' ');
		if (pwrite(pl->dfd[r], head.buf, head.len, 0) != (ssize_t)head.len)
			rc = tc_error_errno(err, TC_ESTORAGE, "cannot write '%s'", p.buf);
		sbuf_release(&head);
		/*
		 * The blocks up front, in as few extents as the file system can:
		 * writes then fill allocated blocks instead of reserving them one
		 * page at a time.  Only advice: a file system without fallocate
		 * allocates as the data comes (the size is set at the end).
		 */
		if (!rc && fallocate(pl->dfd[r], 0, 0, (off_t)pl->dsize[r]) < 0)
			errno = 0;
	}
	sbuf_release(&p);
	free(h);
	return rc;
}

/*
 * Copy every (tensor, destination rank) task on nth threads (this one when
 * none starts), reporting progress from this thread while they run.
 */
static void run_workers(struct plan *pl, int nth, const struct transform_opts *o)
{
	pthread_t *th = xcalloc((size_t)nth, sizeof(*th));
	int started = 0;
	pthread_mutex_lock(&pl->mu);
	pl->running = nth;
	pthread_mutex_unlock(&pl->mu);
	for (int i = 0; i < nth; i++)
		if (pthread_create(&th[i], NULL, worker, pl) == 0)
			started++;
	pthread_mutex_lock(&pl->mu);
	pl->running -= nth - started;
	pthread_mutex_unlock(&pl->mu);
	if (!started) {
		pl->running = 1;
		worker(pl);
	}
	if (o->progress) {
		pthread_mutex_lock(&pl->mu);
		while (pl->running > 0) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 500000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			if (pthread_cond_timedwait(&pl->idle_cv, &pl->mu, &ts) != 0 && pl->running > 0) {
				pthread_mutex_unlock(&pl->mu);
				o->progress(o->progress_arg, atomic_load(&pl->written), pl->total);
				pthread_mutex_lock(&pl->mu);
			}
		}
		pthread_mutex_unlock(&pl->mu);
	}
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	free(th);
	if (o->progress)
		o->progress(o->progress_arg, atomic_load(&pl->written), pl->total);
}

/* Close the destination files (reporting a failed close when all else went well) and free the plan. */
static int plan_release(struct plan *pl, int rc, struct tc_err *err)
{
	for (int r = 0; pl->dfd && r < pl->dworld; r++)
		if (pl->dfd[r] >= 0 && close(pl->dfd[r]) < 0 && !rc)
			rc = tc_error_errno(err, TC_ESTORAGE, "cannot write rank %d", r);
	for (size_t i = 0; i < pl->nt; i++) {
		free(pl->t[i].part);
		free(pl->t[i].dst_off);
	}
	free(pl->t);
	if (pl->dfd) {
		pthread_cond_destroy(&pl->idle_cv);
		pthread_mutex_destroy(&pl->mu);
	}
	free(pl->dsize);
	free(pl->ddata);
	free(pl->dfd);
	return rc;
}

int ckpt_transform(const struct transform_opts *o, struct transform_stats *stats,
		   struct tc_err *err)
{
	struct strategy ss = { 0 }, ds = { 0 };
	struct src_rank *sr = NULL;
	struct plan pl = { 0 };
	int rc;
	double t0 = now_wall();
	memset(stats, 0, sizeof(*stats));
	if ((rc = strategy_load(o->src_strategy, &ss, err)) || (rc = strategy_load(o->dst_strategy, &ds, err)))
		goto out;
	sr = xcalloc((size_t)ss.world, sizeof(*sr));
	for (int r = 0; r < ss.world; r++)
		if ((rc = load_rank(o->src_dir, r, &sr[r], err)))
			goto out;
	collect_names(&pl, sr, ss.world);
	pl.dworld = ds.world;
	for (size_t i = 0; i < pl.nt; i++)
		if ((rc = plan_tensor(&pl.t[i], &ss, &ds, sr, o, err)))
			goto out;
	pthread_mutex_init(&pl.mu, NULL);
	pthread_cond_init(&pl.idle_cv, NULL);
	atomic_init(&pl.written, 0);
	pl.dsize = xcalloc((size_t)ds.world, sizeof(uint64_t));
	pl.ddata = xcalloc((size_t)ds.world, sizeof(uint64_t));
	pl.dfd = xcalloc((size_t)ds.world, sizeof(int));
	for (int r = 0; r < ds.world; r++)
		pl.dfd[r] = -1;
	for (int r = 0; r < ds.world; r++)
		if ((rc = create_rank_file(&pl, r, sr[0].f[0]->metadata_json, o->dst_dir, err)))
			goto out;
	for (int r = 0; r < ds.world; r++)
		pl.total += pl.dsize[r] - pl.ddata[r];
	run_workers(&pl, o->threads > 0 ? o->threads : 2, o);
	if (pl.err) {
		errno = pl.err;
		rc = tc_error_errno(err, TC_ESTORAGE, "cannot write into '%s'", o->dst_dir);
	}
	for (int r = 0; r < ds.world; r++) {
		/* the size, where fallocate did not set it (a sparse file would be slower to fill) */
		if (!rc && ftruncate(pl.dfd[r], (off_t)pl.dsize[r]) < 0)
			rc = tc_error_errno(err, TC_ESTORAGE, "cannot size rank %d's file", r);
		stats->bytes_written += pl.dsize[r];
	}
	stats->tensors = pl.nt;
out:
	rc = plan_release(&pl, rc, err);
	for (int r = 0; sr && r < ss.world; r++) {
		for (size_t i = 0; i < sr[r].nf; i++)
			st_close(sr[r].f[i]);
		free(sr[r].f);
	}
	free(sr);
	strategy_free(&ss);
	strategy_free(&ds);
	stats->seconds = now_wall() - t0;
	return rc;
}
