/*
 * storage_int.h -- private to src/storage: the ops struct each scheme
 * fills, the part-transfer machinery and the small thread pool.
 */
#ifndef TC_STORAGE_INT_H
#define TC_STORAGE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "core/sbuf.h"
#include "storage/storage.h"

/*
 * Seconds since the epoch as nanoseconds.  int64_t nanoseconds reach only
 * about 292 years either side of 1970: a time beyond that (a listing's
 * year 1013, a file touched to year 3000) is unknown, 0, never an overflow.
 */
static inline int64_t secs_to_ns(int64_t sec)
{
	const int64_t lim = INT64_MAX / NS_PER_SEC - 1;
	return sec > lim || sec < -lim ? 0 : sec * NS_PER_SEC;
}

/* A file time as nanoseconds since the epoch, and back (tv_nsec in [0, 1e9)). */
static inline int64_t timespec_to_ns(struct timespec t)
{
	int64_t ns = secs_to_ns((int64_t)t.tv_sec);
	return ns ? ns + t.tv_nsec : 0;
}

static inline struct timespec ns_to_timespec(int64_t ns)
{
	int64_t sec = ns / NS_PER_SEC, rem = ns % NS_PER_SEC;
	if (rem < 0) {
		rem += NS_PER_SEC;
		sec--;
	}
	return (struct timespec){ .tv_sec = (time_t)sec, .tv_nsec = (long)rem };
}

/* Push bytes somewhere (a file at an offset, a buffer); 0 or -1 with errno. */
typedef int (*sink_fn)(void *arg, const void *data, size_t len);

/* Pull bytes for an upload: >0 bytes, 0 at the end, -1 on error. */
struct reader {
	ssize_t (*read)(struct reader *r, void *buf, size_t n);
	int (*rewind)(struct reader *r); /* back to the start of the part */
};

/* An object being written; opaque per scheme. */
struct wtx;

/* What a new object or file is given besides its bytes. */
struct wmeta {
	int64_t mtime_ns;     /* the source's time, 0: unknown */
	const char *md5;      /* the content's MD5 (hex) known before the upload, or NULL */
	const char *src_etag; /* S3 to S3: the source's ETag, or NULL */
};

struct storage_ops {
	const char *name;
	int (*open)(struct storage *st, struct tc_err *err);
	void (*close)(struct storage *st);
	/* Release what the scheme keeps for the calling thread (NULL: nothing). */
	void (*thread_exit)(void);
	int (*iter_start)(struct storage *st, struct storage_iter **out, struct tc_err *err);
	int (*stat)(struct storage *st, const char *key, struct storage_obj *obj, struct tc_err *err);
	int (*del)(struct storage *st, const char *key, struct tc_err *err);
	/*
	 * Read [off, off+len) of key into sink; *done counts the bytes already
	 * delivered (a retry resumes there).  S3 checks a whole-object read
	 * against a plain-MD5 ETag.
	 */
	int (*read)(struct storage *st, const char *key, uint64_t off, uint64_t len,
		    sink_fn sink, void *arg, uint64_t *done, struct tc_err *err);
	/* Start writing key of size bytes in nparts parts; a local file gets
	 * meta's mtime_ns (nanoseconds, 0: now), an object keeps all of meta
	 * as metadata. */
	int (*wbegin)(struct storage *st, const char *key, uint64_t size,
		      const struct wmeta *meta, int nparts, struct wtx **out, struct tc_err *err);
	/* Write part (0-based) from a reader, or (local) from a source file. */
	int (*wpart)(struct wtx *tx, int part, uint64_t off, uint64_t len, struct reader *rd,
		     struct tc_err *err);
	int (*wcommit)(struct wtx *tx, struct tc_err *err);
	void (*wabort)(struct wtx *tx);
};

struct storage {
	const struct storage_ops *ops;
	char *url;   /* as given (never with credentials) */
	char *root;  /* local: absolute folder or file path; s3: key prefix ("" or ending in '/') */
	char *bucket;/* s3 */
	bool single; /* the URL names one file/object, not a folder */
	bool no_links; /* local source: never through a symbolic link (sync_opts.no_links) */
	void *priv;  /* the scheme's state */
};

struct storage_iter {
	struct storage *st;
	int (*next)(struct storage_iter *it, struct storage_obj *obj, struct tc_err *err);
	void (*free)(struct storage_iter *it);
};

extern const struct storage_ops storage_local_ops;
extern const struct storage_ops storage_s3_ops;

/* local.c: for the transfer code */
int local_open_for_read(struct storage *st, const char *key, int *fd, struct tc_err *err);
/* local.c: the wtx of a local destination, to write from another local file fast */
int local_wpart_from_fd(struct wtx *tx, int src_fd, uint64_t off, uint64_t len,
			struct tc_err *err);
/*
 * A sink writing into the wtx at off + *done, where *done is the count the
 * reader keeps (so a retry that starts over rewrites the same bytes).  It
 * gathers data for fewer writes: local_wtx_sink_end writes the rest and
 * frees *arg (its error is the write's, when the read went well).
 */
int local_wtx_sink(struct wtx *tx, uint64_t off, const uint64_t *done, sink_fn *fn, void **arg);
int local_wtx_sink_end(struct wtx *tx, void *arg, struct tc_err *err);
bool local_is_tmp_name(const char *name);
/* the absolute path of key, for messages and reads (writes use openat) */
char *local_path(struct storage *st, const char *key);

/*
 * Release what every scheme keeps for the calling thread (S3: its curl
 * handle): the pool's thread exit callback, and once more at the end of a
 * sync for the caller's own thread.
 */
void storage_thread_exit(void);

/* sync.c: storage_sync between locations already open (src a folder, not
 * one file); the caller keeps and closes both.  For the unit tests, which
 * feed it listings no real server gives. */
int sync_locations(struct storage *src, struct storage *dst, const struct sync_opts *o,
		   struct sync_stats *stats, struct tc_err *err);

/* ---- thread pool (pool.c) ---- */
struct pool;
typedef void (*task_fn)(void *arg);
/*
 * Start threads working through a queue of at most queue_max tasks.  Each
 * thread calls thread_init (when not NULL) before its first task and
 * thread_exit (when not NULL) after its last.
 */
struct pool *pool_new(int threads, int queue_max, void (*thread_init)(void),
		      void (*thread_exit)(void));
/* Blocks while the queue is full. */
void pool_submit(struct pool *p, task_fn fn, void *arg);
/* Wait until every submitted task has finished. */
void pool_wait(struct pool *p);
void pool_free(struct pool *p);

/* ---- transfers (xfer.c) ---- */

/* Outcome of one object copy, reported once from a pool thread. */
typedef void (*xfer_done_fn)(void *arg, const char *key, uint64_t bytes, int rc,
			     const char *msg);

/*
 * Copy src_key of src to dst_key of dst using the pool, in parts when large.
 * The begin step runs in the caller; done() is called exactly once, from
 * the caller (on a failed start) or a pool thread.  moving (may be NULL)
 * counts the copy's bytes as they move, for a progress line: they are
 * taken off again right after done(), which reports the whole size.
 */
void xfer_submit(struct pool *p, struct storage *src, const struct storage_obj *obj,
		 struct storage *dst, const char *dst_key, atomic_llong *moving, xfer_done_fn done,
		 void *arg);

/* ---- small helpers ---- */
/* Is an ETag (without quotes) a plain MD5 of the content, 32 lowercase hex
 * digits?  A multipart upload's is "HEX-PARTS", and says nothing of it. */
bool storage_etag_is_md5(const char *etag);
/* MD5 of data as 32 lowercase hex chars: libcrypto's, or (md5_new_lanes,
 * for the bodies of parallel transfers) md5x.c's shared lanes where the
 * CPU has them. */
struct md5;
struct md5 *md5_new(void);
struct md5 *md5_new_lanes(void);
void md5_update(struct md5 *m, const void *data, size_t len);
void md5_final_hex(struct md5 *m, char out[33]); /* frees m */
void md5_free(struct md5 *m);

/* ---- MD5 of parallel streams (md5x.c) ---- */
/* Whether md5x_* hash streams side by side (AVX2 on x86-64); without,
 * md5x_new must not be called. */
bool md5x_lanes(void);
/* One stream: its bytes wait in 128 KiB chunks that a thread in
 * md5x_update or md5x_final hashes with other streams' in lanes; final
 * and free wait for them (free: a stream given up). Each stream is used
 * by one thread at a time; streams of different threads are independent. */
struct md5x;
struct md5x *md5x_new(void);
void md5x_update(struct md5x *x, const void *data, size_t len);
void md5x_final(struct md5x *x, unsigned char out[16]); /* frees x */
void md5x_free(struct md5x *x);
/* Tests: each lane kernel the CPU can run against the one-stream code:
 * how many ran (0 without lanes), -1 when one disagrees. */
int md5x_kernels_check(void);
/* 64-byte blocks into an MD5 state, one stream, in this thread. */
void md5x_blocks1(uint32_t st[4], const unsigned char *p, size_t nblocks);

#endif
