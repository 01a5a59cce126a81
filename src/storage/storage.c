/*
 * storage.c -- opening a location, dispatch to the scheme's ops, and the
 * small shared helpers (MD5, part sizes).  The retry policy is core/http.h.
 */
#include "core/enc.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "storage/s3_int.h"
#include "storage/storage_int.h"

#include <errno.h>
#include "core/lazylib.h"
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

bool storage_is_remote(const char *url)
{
	return !strncmp(url, "s3://", 5) || !strncmp(url, "obs://", 6);
}

char *storage_location_problem(const char *url)
{
	static const struct {
		const char *scheme, *what;
	} schemes[] = { { "s3", "an S3" }, { "obs", "an OBS" } };
	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
		const char *sc = schemes[i].scheme;
		size_t n = strlen(sc);
		if (strncasecmp(url, sc, n) != 0 || url[n] != ':' || !strncmp(url + n, "://", 3))
			continue;
		/* "s3:/b/x", "s3:b/x": say which address was meant */
		const char *rest = url + n + 1;
		while (*rest == '/')
			rest++;
		struct sbuf sb = SBUF_INIT;
		sbuf_addf(&sb, "'%s': %s address needs two slashes (%s://%s); for a local path, write ./%s",
			  url, schemes[i].what, sc, rest, url);
		return sbuf_detach(&sb);
	}
	return NULL;
}

int storage_open(const char *url, struct storage **out, struct tc_err *err)
{
	if (!url || !*url)
		return tc_error(err, TC_EINPUT, "empty storage location");
	char *why = storage_location_problem(url);
	if (why) {
		tc_error(err, TC_EINPUT, "%s", why);
		free(why);
		return TC_EINPUT;
	}
	const char *colon = strstr(url, "://");
	if (colon && !storage_is_remote(url) && strncmp(url, "file://", 7) != 0)
		return tc_error(err, TC_EINPUT, "'%s': unknown scheme (use s3://, obs://, file:// or a path)",
				url);
	struct storage *st = xcalloc(1, sizeof(*st));
	st->url = xstrdup(url);
	st->ops = storage_is_remote(url) ? &storage_s3_ops : &storage_local_ops;
	int rc = st->ops->open(st, err);
	if (rc) {
		free(st->url);
		free(st->root);
		free(st->bucket);
		free(st);
		return rc;
	}
	*out = st;
	return 0;
}

void storage_close(struct storage *st)
{
	if (!st)
		return;
	st->ops->close(st);
	free(st->url);
	free(st->root);
	free(st->bucket);
	free(st);
}

const char *storage_url(const struct storage *st)
{
	return st->url;
}

int storage_iter_start(struct storage *st, struct storage_iter **out, struct tc_err *err)
{
	return st->ops->iter_start(st, out, err);
}

int storage_iter_next(struct storage_iter *it, struct storage_obj *obj, struct tc_err *err)
{
	memset(obj, 0, sizeof(*obj)); /* a listing fills no md5 nor src_etag */
	return it->next(it, obj, err);
}

void storage_iter_free(struct storage_iter *it)
{
	if (it)
		it->free(it);
}

int storage_stat(struct storage *st, const char *key, struct storage_obj *obj, struct tc_err *err)
{
	memset(obj, 0, sizeof(*obj));
	return st->ops->stat(st, key, obj, err);
}

bool storage_etag_is_md5(const char *etag)
{
	if (!etag || strlen(etag) != 32)
		return false;
	for (; *etag; etag++)
		if (!((*etag >= '0' && *etag <= '9') || (*etag >= 'a' && *etag <= 'f')))
			return false;
	return true;
}

void storage_obj_release(struct storage_obj *obj)
{
	free(obj->etag_buf);
	free(obj->md5);
	free(obj->src_etag);
	obj->etag_buf = obj->md5 = obj->src_etag = NULL;
	obj->etag = NULL;
}

/* Every scheme whose ops keep per-thread state. */
static const struct storage_ops *const schemes[] = { &storage_local_ops, &storage_s3_ops };

void storage_thread_exit(void)
{
	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
		if (schemes[i]->thread_exit)
			schemes[i]->thread_exit();
}

int storage_delete(struct storage *st, const char *key, struct tc_err *err)
{
	return st->ops->del(st, key, err);
}

/* ---- copy one object ---- */

struct copy_result {
	int rc;
	char *msg;
};

static void copy_done(void *arg, const char *key, uint64_t bytes, int rc, const char *msg)
{
	(void)key;
	(void)bytes;
	struct copy_result *r = arg;
	r->rc = rc;
	r->msg = msg ? xstrdup(msg) : NULL;
}

int storage_copy(struct storage *src, const char *src_key, struct storage *dst,
		 const char *dst_key, int jobs, struct tc_err *err)
{
	struct storage_obj obj;
	int rc = storage_stat(src, src_key, &obj, err);
	if (rc)
		return rc;
	struct copy_result res = { 0, NULL };
	struct pool *p = pool_new(jobs > 0 ? jobs : 8, 64, NULL, storage_thread_exit);
	xfer_submit(p, src, &obj, dst, dst_key, NULL, copy_done, &res);
	pool_wait(p);
	pool_free(p);
	storage_obj_release(&obj);
	if (res.rc)
		tc_error(err, res.rc, "%s", res.msg ? res.msg : "copy failed");
	free(res.msg);
	return res.rc;
}

/* ---- tuning ---- */

static uint64_t env_size(const char *name, uint64_t def)
{
	const char *e = getenv(name);
	long v;
	if (e && parse_long(e, 1, 1L << 40, &v))
		return (uint64_t)v;
	return def;
}

uint64_t storage_multipart_threshold(void)
{
	return env_size("TRAINCTL_MULTIPART_THRESHOLD", 64u << 20);
}

uint64_t storage_part_size(uint64_t size, uint64_t min_part)
{
	uint64_t p = min_part;
	const uint64_t max_parts = 10000;
	if ((size + p - 1) / p > max_parts)
		p = (size + max_parts - 1) / max_parts;
	/* whole MiB keep the parts aligned for the page cache and the server */
	p = (p + (1u << 20) - 1) & ~(uint64_t)((1u << 20) - 1);
	return p;
}

/* ---- MD5 (ETags) ---- */

/* libcrypto's one stream (md5_new), or md5x.c's lanes (md5_new_lanes). */
struct md5 {
	EVP_MD_CTX *ctx;
	struct md5x *x;
};

struct md5 *md5_new(void)
{
	struct md5 *m = xcalloc(1, sizeof(*m));
	m->ctx = EVP_MD_CTX_new();
	if (!m->ctx || EVP_DigestInit_ex(m->ctx, EVP_md5(), NULL) != 1)
		xdie_oom(sizeof(*m));
	return m;
}

struct md5 *md5_new_lanes(void)
{
	if (!md5x_lanes())
		return md5_new(); /* libcrypto's one stream beats plain C */
	struct md5 *m = xcalloc(1, sizeof(*m));
	m->x = md5x_new();
	return m;
}

void md5_update(struct md5 *m, const void *data, size_t len)
{
	if (m->x)
		md5x_update(m->x, data, len);
	else if (EVP_DigestUpdate(m->ctx, data, len) != 1)
		abort(); /* cannot fail for a software digest */
}

void md5_final_hex(struct md5 *m, char out[33])
{
	unsigned char d[EVP_MAX_MD_SIZE];
	if (m->x) {
		md5x_final(m->x, d);
		m->x = NULL;
	} else {
		unsigned int n = 0;
		if (EVP_DigestFinal_ex(m->ctx, d, &n) != 1 || n != 16)
			abort();
	}
	hex_encode(out, d, 16);
	md5_free(m);
}

void md5_free(struct md5 *m)
{
	if (!m)
		return;
	md5x_free(m->x);
	EVP_MD_CTX_free(m->ctx);
	free(m);
}

int storage_check_location(const char *url, struct sbuf *warning, struct tc_err *err)
{
	if (!storage_is_remote(url))
		return 0; /* a local folder is made when the first upload comes */
	struct storage *st = NULL;
	int rc = storage_open(url, &st, err);
	if (rc)
		return rc;
	s3_probe(st, warning);
	storage_close(st);
	return 0;
}
