/*
 * storage.h -- object storage behind one interface: local folders (plain
 * paths and file://), S3 (s3://) and Huawei OBS (obs://, an S3-compatible
 * service with its own endpoint), plus sync between any two of them.
 *
 * A location is a URL naming a root: "s3://bucket/prefix/", "obs://b/p",
 * "file:///data", "./data".  Keys are paths relative to that root, '/'
 * separated, never starting with '/'.  A local folder refuses any key that
 * could name a place outside it (storage_key_problem); sync skips such keys
 * of a listing and reports them (sync_opts.on_refused, sync_stats.refused).  Each scheme is an ops struct
 * (storage_int.h); callers see only struct storage.
 *
 * Invariants:
 *  (1) No partial object is ever visible: local writes go to a hidden
 *      temporary name ('.tc-part-*') and are renamed into place; S3 uploads
 *      above the multipart threshold are completed only when every part is
 *      in, and aborted otherwise.
 *  (2) Listings are streamed in byte order of the key (S3's order) and hold
 *      at most one page (S3) or one directory per level (local) in memory.
 *  (3) Transient failures (HTTP 5xx, 429, timeouts, refused or dropped
 *      connections, short bodies) are retried with exponential backoff.
 *  (4) Credentials never appear in messages, logs or output.
 *
 * Credentials and endpoints (s3:// and obs://), first found wins:
 *   AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
 *   AWS_ENDPOINT_URL (obs://: OBS_ENDPOINT_URL), AWS_REGION; then the file
 *   $TRAINCTL_STORAGE_CONFIG or $TRAINCTL_HOME/storage.conf, INI sections
 *   [s3] and [obs] with access_key_id, secret_access_key, session_token,
 *   endpoint, region, addressing (path | virtual).
 *
 * Everything returns 0 or a negative TC_E* with err filled: TC_ESTORAGE for
 * storage failures, TC_EINPUT for a bad URL or a missing credential,
 * TC_ENOTFOUND for a missing object.
 */
#ifndef TC_STORAGE_H
#define TC_STORAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/err.h"

struct storage;

#define NS_PER_SEC 1000000000LL

struct storage_obj {
	const char *key;  /* relative to the root; valid during the callback/next call */
	uint64_t size;
	/* nanoseconds since the epoch, 0 when unknown (S3: LastModified); an
	 * integer because a copy gets its source's time exactly, which a
	 * double of seconds (~240 ns apart today) cannot hold */
	int64_t mtime_ns;
	const char *etag; /* S3 ETag without quotes, or NULL (local) */
	char *etag_buf;   /* storage_stat: the heap copy etag points to (see storage_obj_release) */
	/*
	 * storage_stat of an object only (a listing leaves both NULL):
	 * md5, the content's MD5 as 32 hex digits when the object says it (a
	 * plain ETag, or the x-amz-meta-md5chksum that rclone and trainctl
	 * write on multipart uploads); src_etag, the ETag of the object a
	 * trainctl S3-to-S3 copy made it from (x-amz-meta-trainctl-src-etag).
	 * Both heap strings, freed by storage_obj_release.
	 */
	char *md5;
	char *src_etag;
};

/*
 * Why key cannot be a path under a local folder -- it is empty, absolute, or
 * has an empty, '.' or '..' segment -- or NULL when it can.
 */
const char *storage_key_problem(const char *key);

/* Is url an object-storage URL (s3:// or obs://), as opposed to a local path? */
bool storage_is_remote(const char *url);

/*
 * Why url is no location -- it looks like an s3:// or obs:// address with a
 * slash missing ("s3:/bucket/x", "obs:bucket"), which would otherwise be a
 * local folder named "s3:" -- with the address it probably means; or NULL
 * when it is one.  A heap string; storage_open refuses such a url with it.
 */
char *storage_location_problem(const char *url);

/* Open a location (no network traffic yet). */
int storage_open(const char *url, struct storage **out, struct tc_err *err);
/*
 * Before a job is recorded: can url (an s3:// or obs:// one; a local path
 * passes) be written from here?  Missing credentials are TC_EINPUT (as
 * storage_open says them).  An endpoint no connection reaches within 2 s
 * is only a warning, appended to warning: the job's node may reach what
 * this machine cannot, an endpoint may come up during a long job, and a
 * final upload that fails fails the job anyway.
 */
struct sbuf;
int storage_check_location(const char *url, struct sbuf *warning, struct tc_err *err);
void storage_close(struct storage *st);
/* The location as given, credentials never included. */
const char *storage_url(const struct storage *st);

/* ---- listing: a pull iterator in key order ---- */
struct storage_iter;
int storage_iter_start(struct storage *st, struct storage_iter **out, struct tc_err *err);
/* 1 with *obj filled, 0 at the end, or a negative TC_E*. */
int storage_iter_next(struct storage_iter *it, struct storage_obj *obj, struct tc_err *err);
void storage_iter_free(struct storage_iter *it);

/*
 * Metadata of one key: TC_ENOTFOUND when absent.  obj->key points into key;
 * obj->etag is the caller's until storage_obj_release(), which is safe to
 * call whatever storage_stat returned.
 */
int storage_stat(struct storage *st, const char *key, struct storage_obj *obj,
		 struct tc_err *err);
void storage_obj_release(struct storage_obj *obj);
int storage_delete(struct storage *st, const char *key, struct tc_err *err);

/*
 * Copy one object between any two locations, in parallel parts when large.
 * A local destination gets the source's mtime.
 */
int storage_copy(struct storage *src, const char *src_key, struct storage *dst,
		 const char *dst_key, int jobs, struct tc_err *err);

/* ---- sync (sync.c) ---- */

struct sync_opts {
	int jobs;         /* parallel transfers; 0 = 8 */
	bool delete_extra;/* remove what the destination has and the source lacks */
	bool dry_run;     /* say what would happen, change nothing */
	bool progress;    /* say a progress line (the CLI's stderr, a terminal) */
	bool verbose;     /* say one line per action */
	/* a local source's symbolic links are skipped and its files opened
	 * with O_NOFOLLOW: a root supervisor uploading a user's output/ */
	bool no_links;
	/* called from the sync thread before each copy; may be NULL */
	void (*on_action)(void *arg, const char *what, const char *key);
	/* called from the sync thread for each refused key (why: see
	 * storage_key_problem); may be NULL */
	void (*on_refused)(void *arg, const char *key, const char *why);
	void *arg;
	/*
	 * Where what dry_run, verbose and progress say goes, one whole line per
	 * call from the sync's threads (the CLI writes progress to stderr, the
	 * rest to stdout); a progress line starts with '\r' and has no newline
	 * until the last.  < 0: it could not be written, and a verbose copy's
	 * line then counts as a failure.  NULL: nothing is said.
	 */
	int (*say)(void *arg, bool progress, const char *line, size_t len);
	void *say_arg;
};

struct sync_stats {
	uint64_t listed, copied, skipped, deleted, failed;
	uint64_t refused; /* source keys a local destination cannot hold safely */
	uint64_t bytes;
	double seconds;
};

/*
 * Make dst hold what src holds.  What differs: the size, or else
 *   local -> local: the mtime;  local -> s3: the object is older than the file;
 *   s3 -> local: the file's mtime is not the object's LastModified;
 *   s3 -> s3: the ETag.
 * Copies run in parallel; a failure of one object is counted and reported
 * at the end (TC_ESTORAGE naming the first failure) after the others ran.
 * A source key that a local destination cannot hold safely (see
 * storage_key_problem) is never written: it is skipped, counted in
 * stats->refused, passed to o->on_refused, and the sync then fails with
 * TC_ESTORAGE naming the first such key, after everything else was copied.
 * src may be a single object or file (then dst is the target name or folder).
 */
int storage_sync(const char *src, const char *dst, const struct sync_opts *o,
		 struct sync_stats *stats, struct tc_err *err);

/* ---- tuning (tests and benchmarks) ---- */

/* Sizes above this are copied in parts (default 64 MiB; env TRAINCTL_MULTIPART_THRESHOLD). */
uint64_t storage_multipart_threshold(void);
/* Part size for an object of `size` bytes: >= min_part, and at most 10,000 parts. */
uint64_t storage_part_size(uint64_t size, uint64_t min_part);

#endif
