/*
 * s3.c -- the s3:// and obs:// schemes through libcurl, signed with AWS
 * Signature V4 by libcurl itself (CURLOPT_AWS_SIGV4).
 *
 * Notes on the design:
 *  (1) One easy handle per thread (thread-local, reset per request), so
 *      connections are reused and no handle is shared between threads.
 *  (2) libcurl before 8.x signs the query string as given, so every query
 *      here is built already canonical: names sorted, values encoded, and
 *      "name=" for a name without a value.
 *  (3) Every request goes through s3_do(), which retries transient failures
 *      (5xx, 429, timeouts, refused or dropped connections, short bodies,
 *      an ETag that does not match the MD5 of what was sent) with backoff.
 *      A download resumes where the failed try stopped.
 *  (4) Error texts carry the URL, the HTTP status and S3's <Code> and
 *      <Message>, never a header: no credential can leak into one.
 *  (5) The settings (s3_ini.c) and the XML answers (s3_xml.c) are read by
 *      functions of bytes without libcurl (s3_int.h); this file holds
 *      what talks to the network.
 */
#include "core/enc.h"
#include "core/http.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "storage/s3_int.h"
#include "storage/storage_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* ---- opening ---- */

static int s3_open(struct storage *st, struct tc_err *err)
{
	if (http_init(err))
		return err->code;
	bool obs = !strncmp(st->url, "obs://", 6);
	const char *rest = st->url + (obs ? 6 : 5);
	const char *slash = strchr(rest, '/');
	size_t blen = slash ? (size_t)(slash - rest) : strlen(rest);
	if (!blen)
		return tc_error(err, TC_EINPUT, "'%s': no bucket name", st->url);
	st->bucket = xstrndup(rest, blen);
	for (const char *c = st->bucket; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '.' ||
		      *c == '_' || (*c >= 'A' && *c <= 'Z')))
			return tc_error(err, TC_EINPUT, "'%s': '%s' is not a bucket name", st->url,
					st->bucket);
	struct sbuf root = SBUF_INIT;
	if (slash) {
		const char *p = slash;
		while (*p == '/')
			p++;
		sbuf_adds(&root, p);
		if (root.len && root.buf[root.len - 1] != '/')
			sbuf_addch(&root, '/');
	}
	st->root = sbuf_detach(&root);
	struct s3 *s = NULL;
	int rc = s3_config_load(st->url, obs, &s, err);
	if (!rc)
		st->priv = s;
	return rc;
}

static void s3_thread_exit(void);

static void s3_close(struct storage *st)
{
	s3_config_free(st->priv);
	st->priv = NULL;
	s3_thread_exit();
}

/* ---- URLs ---- */

/* endpoint + bucket + root + key (encoded) + "?" query (already canonical) */
static void build_url(struct storage *st, const char *key, bool rooted, const char *query,
		      struct sbuf *out)
{
	struct s3 *s = st->priv;
	sbuf_reset(out);
	if (s->virtual_host) {
		const char *host = strstr(s->endpoint, "://") + 3;
		sbuf_add(out, s->endpoint, (size_t)(host - s->endpoint));
		sbuf_addf(out, "%s.%s/", st->bucket, host);
	} else {
		sbuf_addf(out, "%s/%s/", s->endpoint, st->bucket);
	}
	if (key) {
		if (rooted)
			url_encode(out, st->root, true);
		url_encode(out, key, true);
	}
	if (query && *query)
		sbuf_addf(out, "?%s", query);
}

/* What the user calls the object, for messages. */
static void obj_name(struct storage *st, const char *key, struct sbuf *out)
{
	const char *scheme = !strncmp(st->url, "obs://", 6) ? "obs" : "s3";
	sbuf_addf(out, "%s://%s/%s%s", scheme, st->bucket, st->root, key ? key : "");
}

/* ---- one request, retried ---- */

struct s3req {
	const char *method;      /* GET PUT POST DELETE HEAD */
	const char *op;          /* what it does, for messages: "list", "upload part 3" */
	const char *key;         /* NULL: the bucket itself */
	bool rooted;             /* key is relative to st->root */
	const char *query;       /* canonical */
	struct curl_slist *hdrs; /* extra headers (signed by libcurl) */
	/* request body: a reader (len bytes) or a memory buffer */
	struct reader *rd;
	uint64_t rd_len;
	const char *body;
	size_t body_len;
	/* response body of a 2xx: to a sink, or collected */
	sink_fn sink;
	void *sink_arg;
	uint64_t range_off, range_len; /* GET: range_len 0 = whole object */
	uint64_t *done;                /* bytes already delivered to the sink */
	/* filled */
	long status;
	struct sbuf resp;              /* body of errors and of collected responses */
	char etag[80];
	char meta_md5[33];             /* x-amz-meta-md5chksum as hex, or "" */
	char src_etag[80];             /* x-amz-meta-trainctl-src-etag, or "" */
	uint64_t content_length;
	bool have_length;
	uint64_t total;                /* whole object size from Content-Range */
	bool have_total;
	bool headers_done;             /* the blank line that ends the headers came */
	int64_t last_modified_ns;
	/* per try */
	struct md5 *md5;
	bool sink_failed;
};

static _Thread_local CURL *tl_curl;

/* The pool's thread exit callback (storage_thread_exit), and s3_close for the caller's. */
static void s3_thread_exit(void)
{
	if (tl_curl) {
		curl_easy_cleanup(tl_curl);
		tl_curl = NULL;
	}
}

static CURL *handle(void)
{
	if (!tl_curl) {
		tl_curl = curl_easy_init();
		if (!tl_curl)
			xdie_oom(0);
	} else {
		curl_easy_reset(tl_curl);
	}
	return tl_curl;
}

/* An HTTP date (whole seconds) as nanoseconds since the epoch, 0 if it is none. */
static int64_t parse_http_date(const char *v)
{
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	const char *end = strptime(v, "%a, %d %b %Y %H:%M:%S", &tm);
	return end ? secs_to_ns((int64_t)timegm(&tm)) : 0;
}

static size_t on_header(char *buf, size_t size, size_t n, void *arg)
{
	struct s3req *rq = arg;
	size_t len = size * n;
	/* curl 7.88 reports success for an answer cut off inside its headers,
	 * reading a body of unknown length to the close: only this line tells */
	if (len >= 5 && !strncmp(buf, "HTTP/", 5))
		rq->headers_done = false;
	else if ((len == 2 && buf[0] == '\r' && buf[1] == '\n') || (len == 1 && buf[0] == '\n'))
		rq->headers_done = true;
	const char *colon = memchr(buf, ':', len);
	if (!colon)
		return len;
	size_t kl = (size_t)(colon - buf);
	const char *v = colon + 1;
	const char *end = buf + len;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
		end--;
	size_t vl = (size_t)(end - v);
	if (kl == 4 && !strncasecmp(buf, "ETag", 4)) {
		if (vl >= 2 && v[0] == '"' && v[vl - 1] == '"') {
			v++;
			vl -= 2;
		}
		if (vl < sizeof(rq->etag)) {
			memcpy(rq->etag, v, vl);
			rq->etag[vl] = '\0';
		}
	} else if (kl == 14 && !strncasecmp(buf, "Content-Length", 14)) {
		char tmp[32];
		if (vl < sizeof(tmp)) {
			memcpy(tmp, v, vl);
			tmp[vl] = '\0';
			long long x;
			char *e;
			x = strtoll(tmp, &e, 10);
			if (e != tmp && !*e && x >= 0) {
				rq->content_length = (uint64_t)x;
				rq->have_length = true;
			}
		}
	} else if (kl == 13 && !strncasecmp(buf, "Content-Range", 13)) {
		const char *sl = memchr(v, '/', vl);
		if (sl && sl + 1 < end && sl[1] != '*') {
			rq->total = strtoull(sl + 1, NULL, 10);
			rq->have_total = true;
		}
	} else if (kl == 20 && !strncasecmp(buf, "x-amz-meta-md5chksum", 20)) {
		/* rclone's: the whole content's MD5, base64 */
		struct sbuf bin = SBUF_INIT;
		if (b64_decode(&bin, v, vl) && bin.len == 16)
			hex_encode(rq->meta_md5, bin.buf, 16);
		sbuf_release(&bin);
	} else if (kl == 28 && !strncasecmp(buf, "x-amz-meta-trainctl-src-etag", 28)) {
		if (vl < sizeof(rq->src_etag)) {
			memcpy(rq->src_etag, v, vl);
			rq->src_etag[vl] = '\0';
		}
	} else if (kl == 13 && !strncasecmp(buf, "Last-Modified", 13)) {
		char tmp[64];
		if (vl < sizeof(tmp)) {
			memcpy(tmp, v, vl);
			tmp[vl] = '\0';
			rq->last_modified_ns = parse_http_date(tmp);
		}
	}
	return len;
}

static size_t on_body(char *buf, size_t size, size_t n, void *arg)
{
	struct s3req *rq = arg;
	size_t len = size * n;
	long code = 0;
	curl_easy_getinfo(tl_curl, CURLINFO_RESPONSE_CODE, &code);
	if (code >= 200 && code < 300 && rq->sink) {
		if (rq->md5)
			md5_update(rq->md5, buf, len);
		if (rq->sink(rq->sink_arg, buf, len) < 0) {
			rq->sink_failed = true;
			return 0; /* makes curl stop with CURLE_WRITE_ERROR */
		}
		if (rq->done)
			*rq->done += len;
		return len;
	}
	if (rq->resp.len < (4u << 20))
		sbuf_add(&rq->resp, buf, len);
	return len;
}

static size_t on_read(char *buf, size_t size, size_t n, void *arg)
{
	struct s3req *rq = arg;
	if (rq->body) {
		size_t left = rq->body_len - (size_t)rq->range_off; /* reused as a position */
		size_t k = left < size * n ? left : size * n;
		memcpy(buf, rq->body + rq->range_off, k);
		rq->range_off += k;
		return k;
	}
	ssize_t r = rq->rd->read(rq->rd, buf, size * n);
	if (r < 0)
		return CURL_READFUNC_ABORT;
	if (rq->md5)
		md5_update(rq->md5, buf, (size_t)r);
	return (size_t)r;
}

/* libcurl rewinds the body when it must send it again (a dead reused connection) */
static int on_seek(void *arg, curl_off_t off, int origin)
{
	struct s3req *rq = arg;
	if (off != 0 || origin != SEEK_SET)
		return CURL_SEEKFUNC_CANTSEEK;
	if (rq->body) {
		rq->range_off = 0;
		return CURL_SEEKFUNC_OK;
	}
	if (rq->rd->rewind(rq->rd) < 0)
		return CURL_SEEKFUNC_FAIL;
	if (rq->md5) {
		md5_free(rq->md5);
		rq->md5 = md5_new_lanes();
	}
	return CURL_SEEKFUNC_OK;
}

/* 100 ms doubling to 5 s, with jitter so parallel retries spread */
static const struct http_backoff s3_backoff = { 100, 5000, true };

static int max_attempts(void)
{
	const char *e = getenv("TRAINCTL_S3_RETRIES");
	long v;
	return e && parse_long(e, 1, 1L << 30, &v) ? (int)v : 8;
}


/* Describe a failed response: "HTTP 403 AccessDenied: message". */
static void describe_http(struct s3req *rq, struct sbuf *out)
{
	char *code, *msg;
	sbuf_addf(out, "HTTP %ld", rq->status);
	if (s3_xml_parse_error(rq->resp.buf, rq->resp.len, &code, &msg)) {
		if (code)
			sbuf_addf(out, " %s", code);
		if (msg && *msg)
			sbuf_addf(out, ": %s", msg);
	}
	free(code);
	free(msg);
}

/* A GET into a sink asks for a byte range: a part, or the rest after a failed try. */
static bool is_ranged(const struct s3req *rq)
{
	return !strcmp(rq->method, "GET") && rq->sink && (rq->range_len || (rq->done && *rq->done));
}

/* The caller's headers plus the session token, the payload hash and the range. */
static struct curl_slist *request_headers(const struct s3 *s, const struct s3req *rq, bool ranged)
{
	struct curl_slist *hdrs = NULL;
	struct sbuf h = SBUF_INIT;
	for (struct curl_slist *x = rq->hdrs; x; x = x->next)
		hdrs = curl_slist_append(hdrs, x->data);
	if (s->token) {
		sbuf_addf(&h, "x-amz-security-token: %s", s->token);
		hdrs = curl_slist_append(hdrs, h.buf);
	}
	/*
	 * No "Expect:" here to keep libcurl from sending "Expect: 100-continue":
	 * libcurl before 8.3.0 signs such an empty entry although it sends no
	 * header, and a server that checks SigV4 (AWS, Ceph, MinIO, OBS)
	 * answers 403 SignatureDoesNotMatch to every request (curl #11664).
	 * The 100-continue it sends for a body over 1 MiB is not signed, and
	 * costs one round trip per large part (docs/storage.md).
	 */
	/* S3 wants the payload hash header; libcurl signs the value given */
	hdrs = curl_slist_append(hdrs, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
	if (ranged) {
		uint64_t d = rq->done ? *rq->done : 0;
		sbuf_reset(&h);
		if (rq->range_len)
			sbuf_addf(&h, "Range: bytes=%llu-%llu", (unsigned long long)(rq->range_off + d),
				  (unsigned long long)(rq->range_off + rq->range_len - 1));
		else
			sbuf_addf(&h, "Range: bytes=%llu-", (unsigned long long)d);
		hdrs = curl_slist_append(hdrs, h.buf);
	}
	sbuf_release(&h);
	if (!hdrs)
		xdie_oom(0);
	return hdrs;
}

/*
 * Forget what the last try filled, and start an MD5 where the data can be
 * checked against the ETag: an upload, or a GET that starts at 0 (it may
 * turn out to be the whole object).
 */
static void try_reset(const struct s3 *s, struct s3req *rq, bool *check_get, bool *check_put)
{
	sbuf_reset(&rq->resp);
	rq->status = 0;
	rq->etag[0] = '\0';
	rq->meta_md5[0] = rq->src_etag[0] = '\0';
	rq->have_length = false;
	rq->have_total = false;
	rq->headers_done = false;
	rq->sink_failed = false;
	md5_free(rq->md5);
	rq->md5 = NULL;
	*check_get = !strcmp(rq->method, "GET") && rq->sink && rq->done && *rq->done == 0 &&
		     !rq->range_off;
	*check_put = rq->rd != NULL && s->verify_etag;
	if (*check_get || *check_put)
		rq->md5 = md5_new_lanes();
}

static bool set_options(CURL *h, const struct s3 *s, struct s3req *rq, const char *url,
			struct curl_slist *hdrs)
{
	long timeout = 60;
	const char *te = getenv("TRAINCTL_S3_TIMEOUT");
	long tv;
	if (te && parse_long(te, 1, 86400, &tv))
		timeout = tv;
	bool ok = curl_easy_setopt(h, CURLOPT_URL, url) == CURLE_OK &&
		  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
		  curl_easy_setopt(h, CURLOPT_AWS_SIGV4, s->sigv4) == CURLE_OK &&
		  curl_easy_setopt(h, CURLOPT_USERNAME, s->access) == CURLE_OK &&
		  curl_easy_setopt(h, CURLOPT_PASSWORD, s->secret) == CURLE_OK &&
		  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs) == CURLE_OK &&
		  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header) == CURLE_OK &&
		  curl_easy_setopt(h, CURLOPT_HEADERDATA, rq) == CURLE_OK &&
		  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body) == CURLE_OK &&
		  curl_easy_setopt(h, CURLOPT_WRITEDATA, rq) == CURLE_OK &&
		  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L) == CURLE_OK &&
		  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L) == CURLE_OK &&
		  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, timeout) == CURLE_OK;
	/*
	 * Bodies are read from the socket 512 KiB at a time rather than 16 KiB:
	 * an eighth of the reads and polls per object.
	 */
	if (ok && !strcmp(rq->method, "GET"))
		ok = curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 512L * 1024) == CURLE_OK;
	if (ok && !strcmp(rq->method, "HEAD"))
		ok = curl_easy_setopt(h, CURLOPT_NOBODY, 1L) == CURLE_OK;
	else if (ok && !strcmp(rq->method, "PUT"))
		ok = curl_easy_setopt(h, CURLOPT_UPLOAD, 1L) == CURLE_OK &&
		     curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read) == CURLE_OK &&
		     curl_easy_setopt(h, CURLOPT_READDATA, rq) == CURLE_OK &&
		     curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, on_seek) == CURLE_OK &&
		     curl_easy_setopt(h, CURLOPT_SEEKDATA, rq) == CURLE_OK &&
		     curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE,
				      (curl_off_t)(rq->rd ? rq->rd_len : rq->body_len)) == CURLE_OK;
	else if (ok && !strcmp(rq->method, "POST"))
		ok = curl_easy_setopt(h, CURLOPT_POST, 1L) == CURLE_OK &&
		     curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->body ? rq->body : "") == CURLE_OK &&
		     curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
				      (curl_off_t)(rq->body ? rq->body_len : 0)) == CURLE_OK;
	else if (ok && !strcmp(rq->method, "DELETE"))
		ok = curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "DELETE") == CURLE_OK;
	return ok;
}

/*
 * A 2xx answer: is it what was asked for?  Headers cut off before their
 * end, a range answered in full, data that does not match its plain-MD5
 * ETag, or an <Error> inside a POST's 200 fill why (and *retry where another
 * try may do better).
 */
static void check_answer(struct s3req *rq, bool ranged, bool check_get, bool check_put,
			 uint64_t start_done, struct sbuf *why, bool *retry)
{
	if (!rq->headers_done) {
		/* nothing reached the sink: curl was still reading headers */
		sbuf_addf(why, "the answer (HTTP %ld) was cut off in its headers", rq->status);
		*retry = true;
	} else if (ranged && rq->status != 206) {
		sbuf_addf(why, "the server ignored the byte range (HTTP %ld)", rq->status);
		*retry = false;
	} else if (rq->md5 && rq->etag[0] && storage_etag_is_md5(rq->etag) &&
		   (check_put || (rq->done && *rq->done == (rq->status == 206
								? (rq->have_total ? rq->total : 0)
								: rq->content_length)))) {
		char hex[33];
		md5_final_hex(rq->md5, hex);
		rq->md5 = NULL;
		if (strcmp(hex, rq->etag) != 0) {
			sbuf_addf(why, "the data does not match its ETag (MD5 %s, ETag %s)", hex,
				  rq->etag);
			*retry = true;
			if (check_get && rq->done)
				*rq->done = start_done; /* fetch it all again */
		}
	}
	if (!why->len && !strcmp(rq->method, "POST") && s3_xml_is_error(rq->resp.buf, rq->resp.len)) {
		/* CompleteMultipartUpload can fail inside a 200 */
		describe_http(rq, why);
		*retry = true;
	}
}

/*
 * A request that got no answer, in plain words (s3_do adds the request,
 * whose URL names the host and port): the connection refused, the host
 * name unknown to DNS, the time out with curl's account of it.
 */
static void describe_transport(CURL *h, CURLcode cc, const char *detail, struct sbuf *why)
{
	long os_errno = 0;
	if (curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &os_errno) != CURLE_OK)
		os_errno = 0;
	size_t n = strlen(detail);
	while (n && (detail[n - 1] == '\n' || detail[n - 1] == '\r'))
		n--;
	switch (cc) {
	case CURLE_COULDNT_RESOLVE_HOST:
		sbuf_adds(why, "host name not found (DNS)");
		return;
	case CURLE_COULDNT_CONNECT:
		if (os_errno == ECONNREFUSED)
			sbuf_adds(why, "connection refused");
		else if (os_errno)
			sbuf_addf(why, "cannot connect: %s", strerror((int)os_errno));
		else
			sbuf_adds(why, "cannot connect");
		return;
	case CURLE_OPERATION_TIMEDOUT:
		sbuf_adds(why, "timed out");
		break;
	default:
		sbuf_adds(why, n ? "" : curl_easy_strerror(cc));
		break;
	}
	if (n)
		sbuf_addf(why, "%s%.*s", why->len ? ": " : "", (int)n, detail);
}

/*
 * One try of rq.  0 with why empty: success; 0 with why filled: a failure
 * that *retry says whether to try again; or a final error (not found, the
 * sink or the reader failed) in err.
 */
static int try_once(const struct s3 *s, struct s3req *rq, const char *url, const char *name,
		    uint64_t start_done, struct sbuf *why, bool *retry, struct tc_err *err)
{
	CURL *h = handle();
	bool ranged = is_ranged(rq), check_get, check_put;
	struct curl_slist *hdrs = request_headers(s, rq, ranged);
	try_reset(s, rq, &check_get, &check_put);
	sbuf_reset(why);
	*retry = false;
	if (rq->rd && rq->rd->rewind(rq->rd) < 0) {
		curl_slist_free_all(hdrs);
		return tc_error_errno(err, TC_ESTORAGE, "%s: cannot read the data to send", name);
	}
	if (rq->body)
		rq->range_off = 0;
	if (!set_options(h, s, rq, url, hdrs)) {
		curl_slist_free_all(hdrs);
		return tc_error(err, TC_ESTORAGE, "%s: cannot set up the request", name);
	}
	char detail[CURL_ERROR_SIZE];
	detail[0] = '\0';
	if (curl_easy_setopt(h, CURLOPT_ERRORBUFFER, detail) != CURLE_OK)
		detail[0] = '\0'; /* the bare curl code words it then */
	CURLcode cc = curl_easy_perform(h);
	curl_slist_free_all(hdrs);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &rq->status);
	if (cc != CURLE_OK) {
		if (rq->sink_failed) {
			curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
			return tc_error_errno(err, TC_ESTORAGE, "%s: cannot store the data", name);
		}
		describe_transport(h, cc, detail, why);
		*retry = http_retryable_curl(cc);
	}
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL); /* detail is this frame's */
	if (cc != CURLE_OK) {
		/* described above */
	} else if (rq->status >= 200 && rq->status < 300) {
		check_answer(rq, ranged, check_get, check_put, start_done, why, retry);
	} else {
		describe_http(rq, why);
		*retry = http_retryable_status(rq->status);
		if (rq->status == 404) /* s3_do words it, with the URL */
			return TC_ENOTFOUND;
	}
	return 0;
}

static int s3_do(struct storage *st, struct s3req *rq, struct tc_err *err)
{
	struct sbuf url = SBUF_INIT, why = SBUF_INIT, name = SBUF_INIT;
	int rc = 0;
	int max = max_attempts();
	sbuf_init(&rq->resp, 0);
	obj_name(st, rq->key, &name);
	build_url(st, rq->key, rq->rooted, rq->query, &url);
	uint64_t start_done = rq->done ? *rq->done : 0;
	/* messages name the request as "GET http://host/bucket/key", no query */
	const char *q = strchr(url.buf, '?');
	int url_len = q ? (int)(q - url.buf) : (int)url.len;
	const char *op = rq->op ? rq->op : rq->method;
	for (int attempt = 1;; attempt++) {
		bool retry;
		rc = try_once(st->priv, rq, url.buf, name.buf, start_done, &why, &retry, err);
		if (rc == TC_ENOTFOUND)
			tc_error(err, TC_ENOTFOUND, "%s: %s: %s (%s %.*s)", name.buf, op, why.buf,
				 rq->method, url_len, url.buf);
		if (rc || !why.len)
			break;
		if ((!retry || attempt >= max) && !rq->status) {
			/* no answer: the request first, as curl(1) and wget word it */
			rc = tc_error(err, TC_ESTORAGE, "%s: %s failed%s: %s %.*s: %s", name.buf, op,
				      attempt > 1 ? " after retries" : "", rq->method, url_len, url.buf,
				      why.buf);
			break;
		}
		if (!retry || attempt >= max) {
			rc = tc_error(err, TC_ESTORAGE, "%s: %s failed%s: %s (%s %.*s)", name.buf, op,
				      attempt > 1 ? " after retries" : "", why.buf, rq->method, url_len,
				      url.buf);
			break;
		}
		http_sleep_ms(http_backoff_ms(&s3_backoff, attempt));
	}
	md5_free(rq->md5);
	rq->md5 = NULL;
	sbuf_release(&url);
	sbuf_release(&why);
	sbuf_release(&name);
	return rc;
}

static void req_release(struct s3req *rq)
{
	sbuf_release(&rq->resp);
	curl_slist_free_all(rq->hdrs);
	rq->hdrs = NULL;
}

/* ---- listing ---- */

struct s3iter {
	struct storage_iter base;
	struct s3_xml_list page;
	size_t i;     /* next object of the page */
	bool started; /* the first page was asked for */
};

static int fetch_page(struct s3iter *it, struct tc_err *err)
{
	struct storage *st = it->base.st;
	struct sbuf q = SBUF_INIT;
	if (it->page.next_token) {
		sbuf_adds(&q, "continuation-token=");
		url_encode(&q, it->page.next_token, false);
		sbuf_addch(&q, '&');
	}
	sbuf_adds(&q, "list-type=2&max-keys=1000");
	if (*st->root) {
		sbuf_adds(&q, "&prefix=");
		url_encode(&q, st->root, false);
	}
	struct s3req rq = { .method = "GET", .op = "list", .key = NULL, .query = q.buf };
	int rc = s3_do(st, &rq, err);
	sbuf_release(&q);
	if (!rc) {
		struct s3_xml_list next = { 0 };
		s3_xml_parse_list(rq.resp.buf, rq.resp.len, st->root, &next);
		s3_xml_list_release(&it->page);
		it->page = next;
		it->i = 0;
	}
	req_release(&rq);
	return rc;
}

static int s3_next(struct storage_iter *base, struct storage_obj *obj, struct tc_err *err)
{
	struct s3iter *it = (struct s3iter *)base;
	while (it->i >= it->page.n) {
		if (it->started && !it->page.truncated)
			return 0;
		it->started = true;
		int rc = fetch_page(it, err);
		if (rc)
			return rc;
	}
	struct s3_xml_obj *o = &it->page.obj[it->i++];
	obj->key = o->key;
	obj->size = o->size;
	obj->mtime_ns = o->mtime_ns;
	obj->etag = o->etag;
	return 1;
}

static void s3_iter_free(struct storage_iter *base)
{
	struct s3iter *it = (struct s3iter *)base;
	s3_xml_list_release(&it->page);
	free(it);
}

static int s3_iter_start(struct storage *st, struct storage_iter **out, struct tc_err *err)
{
	(void)err;
	struct s3iter *it = xcalloc(1, sizeof(*it));
	it->base.st = st;
	it->base.next = s3_next;
	it->base.free = s3_iter_free;
	*out = &it->base;
	return 0;
}

static int s3_stat(struct storage *st, const char *key, struct storage_obj *obj,
		   struct tc_err *err)
{
	struct s3req rq = { .method = "HEAD", .op = "look up", .key = key, .rooted = true };
	int rc = s3_do(st, &rq, err);
	if (!rc) {
		obj->key = key;
		obj->size = rq.content_length;
		obj->mtime_ns = rq.last_modified_ns;
		obj->etag_buf = rq.etag[0] ? xstrdup(rq.etag) : NULL;
		obj->etag = obj->etag_buf;
		if (storage_etag_is_md5(rq.etag))
			obj->md5 = xstrdup(rq.etag);
		else if (rq.meta_md5[0])
			obj->md5 = xstrdup(rq.meta_md5);
		obj->src_etag = rq.src_etag[0] ? xstrdup(rq.src_etag) : NULL;
	}
	req_release(&rq);
	return rc;
}

static int s3_del(struct storage *st, const char *key, struct tc_err *err)
{
	struct s3req rq = { .method = "DELETE", .op = "delete", .key = key, .rooted = true };
	int rc = s3_do(st, &rq, err);
	if (rc == TC_ENOTFOUND)
		rc = 0;
	req_release(&rq);
	return rc;
}

static int s3_read(struct storage *st, const char *key, uint64_t off, uint64_t len, sink_fn sink,
		   void *arg, uint64_t *done, struct tc_err *err)
{
	struct s3req rq = { .method = "GET", .op = "download", .key = key, .rooted = true, .sink = sink,
			    .sink_arg = arg, .range_off = off, .range_len = len, .done = done };
	if (len == 0) {
		/* Range: bytes=0--1 is not a thing; an empty read is a HEAD-less no-op */
		req_release(&rq);
		return 0;
	}
	int rc = s3_do(st, &rq, err);
	if (!rc && *done != len)
		rc = tc_error(err, TC_ESTORAGE, "s3://%s/%s%s: got %llu of %llu bytes", st->bucket,
			      st->root, key, (unsigned long long)*done, (unsigned long long)len);
	req_release(&rq);
	return rc;
}

/* ---- writing ---- */

struct wtx {
	struct storage *st;
	char *key;
	char *upload_id; /* NULL: one PUT */
	int nparts;
	char **etags;
	struct sbuf meta; /* the x-amz-meta-* header lines, '\n' after each */
};

/*
 * The object's metadata as header lines: its time, as rclone writes it
 * (seconds with 9 decimals), so that rclone sees the file's time; for a
 * multipart upload the content's MD5 when known beforehand, under rclone's
 * name, since its ETag will not say it; the ETag of the source of an S3 to
 * S3 copy, which lets the next sync know the copy whatever its parts.
 */
static void meta_lines(struct sbuf *out, const struct wmeta *m, int nparts)
{
	if (m->mtime_ns > 0)
		sbuf_addf(out, "x-amz-meta-mtime: %lld.%09lld\n", (long long)(m->mtime_ns / NS_PER_SEC),
			  (long long)(m->mtime_ns % NS_PER_SEC));
	if (nparts > 1 && storage_etag_is_md5(m->md5)) {
		unsigned char bin[16];
		for (int k = 0; k < 16; k++)
			bin[k] = (unsigned char)(hex_digit(m->md5[2 * k]) * 16 +
						 hex_digit(m->md5[2 * k + 1]));
		sbuf_adds(out, "x-amz-meta-md5chksum: ");
		b64_encode(out, bin, sizeof(bin));
		sbuf_addch(out, '\n');
	}
	/* an ETag is printable ASCII; anything else is not passed on */
	bool plain = m->src_etag && *m->src_etag && strlen(m->src_etag) < 80;
	for (const char *c = m->src_etag; plain && *c; c++)
		plain = *c > ' ' && *c < 127 && *c != '"';
	if (plain)
		sbuf_addf(out, "x-amz-meta-trainctl-src-etag: %s\n", m->src_etag);
}

static void meta_headers(struct s3req *rq, const struct sbuf *meta)
{
	for (const char *p = meta->buf, *nl; p && (nl = strchr(p, '\n')); p = nl + 1) {
		char *line = xstrndup(p, (size_t)(nl - p));
		rq->hdrs = curl_slist_append(rq->hdrs, line);
		free(line);
	}
}

static int s3_wbegin(struct storage *st, const char *key, uint64_t size,
		     const struct wmeta *m, int nparts, struct wtx **out, struct tc_err *err)
{
	(void)size;
	struct wtx *tx = xcalloc(1, sizeof(*tx));
	tx->st = st;
	tx->key = xstrdup(key);
	tx->nparts = nparts;
	sbuf_init(&tx->meta, 0);
	meta_lines(&tx->meta, m, nparts);
	if (nparts > 1) {
		struct s3req rq = { .method = "POST", .op = "start of the multipart upload", .key = key,
				    .rooted = true, .query = "uploads=" };
		meta_headers(&rq, &tx->meta);
		int rc = s3_do(st, &rq, err);
		char *id = rc ? NULL : s3_xml_upload_id(rq.resp.buf, rq.resp.len);
		if (!rc && !id)
			rc = tc_error(err, TC_ESTORAGE, "s3://%s/%s%s: no UploadId in the answer",
				      st->bucket, st->root, key);
		req_release(&rq);
		if (rc) {
			sbuf_release(&tx->meta);
			free(tx->key);
			free(tx);
			return rc;
		}
		tx->upload_id = id;
		tx->etags = xcalloc((size_t)nparts, sizeof(char *));
	}
	*out = tx;
	return 0;
}

static int s3_wpart(struct wtx *tx, int part, uint64_t off, uint64_t len, struct reader *rd,
		    struct tc_err *err)
{
	(void)off;
	struct s3req rq = { .method = "PUT", .op = "upload", .key = tx->key, .rooted = true, .rd = rd,
			    .rd_len = len };
	struct sbuf q = SBUF_INIT, op = SBUF_INIT;
	if (tx->upload_id) {
		sbuf_addf(&op, "upload of part %d", part + 1);
		rq.op = op.buf;
		sbuf_addf(&q, "partNumber=%d&uploadId=", part + 1);
		url_encode(&q, tx->upload_id, false);
		rq.query = q.buf;
	} else {
		meta_headers(&rq, &tx->meta);
		rq.hdrs = curl_slist_append(rq.hdrs, "Content-Type: application/octet-stream");
	}
	int rc = s3_do(tx->st, &rq, err);
	if (!rc && tx->upload_id) {
		if (!rq.etag[0])
			rc = tc_error(err, TC_ESTORAGE, "s3://%s/%s%s: part %d: no ETag in the answer",
				      tx->st->bucket, tx->st->root, tx->key, part + 1);
		else
			tx->etags[part] = xstrdup(rq.etag);
	}
	sbuf_release(&q);
	sbuf_release(&op);
	req_release(&rq);
	return rc;
}

static void wtx_free(struct wtx *tx)
{
	for (int i = 0; tx->etags && i < tx->nparts; i++)
		free(tx->etags[i]);
	free(tx->etags);
	free(tx->upload_id);
	free(tx->key);
	sbuf_release(&tx->meta);
	free(tx);
}

static void s3_wabort(struct wtx *tx)
{
	if (tx->upload_id) {
		struct sbuf q = SBUF_INIT;
		sbuf_adds(&q, "uploadId=");
		url_encode(&q, tx->upload_id, false);
		struct s3req rq = { .method = "DELETE", .op = "abort of the multipart upload",
				    .key = tx->key, .rooted = true, .query = q.buf };
		struct tc_err e2 = TC_ERR_INIT;
		/* best effort: a lifecycle rule cleans up what this misses */
		if (s3_do(tx->st, &rq, &e2))
			errno = 0;
		tc_err_release(&e2);
		req_release(&rq);
		sbuf_release(&q);
	}
	wtx_free(tx);
}

/*
 * Did a CompleteMultipartUpload that seemed to fail land after all?  When its
 * answer is lost (a cut connection), the retry finds the upload gone and the
 * server answers with an error although the object is there.  The object's
 * ETag says which parts made it: MD5 of the parts' binary MD5s, "-", count.
 */
static bool multipart_landed(struct wtx *tx)
{
	struct md5 *m = md5_new();
	for (int i = 0; i < tx->nparts; i++) {
		const char *e = tx->etags[i] ? tx->etags[i] : "";
		unsigned char bin[16];
		for (int k = 0; k < 16; k++) {
			int hi = hex_digit(e[2 * k]), lo = hi < 0 ? -1 : hex_digit(e[2 * k + 1]);
			if (hi < 0 || lo < 0) {
				md5_free(m);
				return false;
			}
			bin[k] = (unsigned char)(hi * 16 + lo);
		}
		md5_update(m, bin, sizeof(bin));
	}
	char hex[33];
	md5_final_hex(m, hex);
	struct sbuf want = SBUF_INIT;
	sbuf_addf(&want, "%s-%d", hex, tx->nparts);
	struct storage_obj obj = { 0 };
	struct tc_err e2 = TC_ERR_INIT;
	bool landed = s3_stat(tx->st, tx->key, &obj, &e2) == 0 && obj.etag &&
		      !strcasecmp(obj.etag, want.buf);
	storage_obj_release(&obj);
	tc_err_release(&e2);
	sbuf_release(&want);
	return landed;
}

static int s3_wcommit(struct wtx *tx, struct tc_err *err)
{
	if (!tx->upload_id) {
		wtx_free(tx);
		return 0;
	}
	struct sbuf body = SBUF_INIT, q = SBUF_INIT;
	sbuf_adds(&body, "<CompleteMultipartUpload>");
	for (int i = 0; i < tx->nparts; i++)
		sbuf_addf(&body, "<Part><PartNumber>%d</PartNumber><ETag>\"%s\"</ETag></Part>", i + 1,
			  tx->etags[i] ? tx->etags[i] : "");
	sbuf_adds(&body, "</CompleteMultipartUpload>");
	sbuf_adds(&q, "uploadId=");
	url_encode(&q, tx->upload_id, false);
	struct s3req rq = { .method = "POST", .op = "completion of the multipart upload",
			    .key = tx->key, .rooted = true, .query = q.buf, .body = body.buf,
			    .body_len = body.len };
	rq.hdrs = curl_slist_append(rq.hdrs, "Content-Type: application/xml");
	int rc = s3_do(tx->st, &rq, err);
	req_release(&rq);
	sbuf_release(&body);
	sbuf_release(&q);
	if (rc && multipart_landed(tx)) {
		tc_err_release(err);
		rc = 0;
	}
	if (rc) {
		s3_wabort(tx);
		return rc;
	}
	wtx_free(tx);
	return 0;
}

const struct storage_ops storage_s3_ops = {
	.name = "s3",
	.open = s3_open,
	.close = s3_close,
	.thread_exit = s3_thread_exit,
	.iter_start = s3_iter_start,
	.stat = s3_stat,
	.del = s3_del,
	.read = s3_read,
	.wbegin = s3_wbegin,
	.wpart = s3_wpart,
	.wcommit = s3_wcommit,
	.wabort = s3_wabort,
};

/*
 * Can this machine open a connection to st's endpoint (2 s at most)?  A
 * miss goes to warning; the caller decides it is no error (storage.h).
 */
void s3_probe(struct storage *st, struct sbuf *warning)
{
	struct s3 *s = st->priv;
	CURL *c = curl_easy_init();
	if (!c)
		return;
	char ebuf[CURL_ERROR_SIZE] = "";
	curl_easy_setopt(c, CURLOPT_URL, s->endpoint);
	curl_easy_setopt(c, CURLOPT_CONNECT_ONLY, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, ebuf);
	CURLcode rc = curl_easy_perform(c);
	if (rc != CURLE_OK)
		sbuf_addf(warning, "%s: endpoint %s is not reachable from here: %s", st->url, s->endpoint,
			  ebuf[0] ? ebuf : curl_easy_strerror(rc));
	curl_easy_cleanup(c);
}
