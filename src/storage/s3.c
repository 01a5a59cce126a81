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
 */
#include "core/enc.h"
#include "core/http.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "storage/storage_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

struct s3 {
	char *access, *secret, *token, *region, *endpoint;
	bool virtual_host; /* bucket.host/key instead of host/bucket/key */
	bool verify_etag;  /* compare ETags of uploads with the MD5 of what was sent */
	char *sigv4;       /* "aws:amz:REGION:s3" */
};

/* ---- configuration ---- */

static char *config_path(void)
{
	const char *e = getenv("TRAINCTL_STORAGE_CONFIG");
	if (e && *e)
		return xstrdup(e);
	char *home = trainctl_home();
	struct sbuf sb = SBUF_INIT;
	sbuf_addf(&sb, "%s/storage.conf", home);
	free(home);
	return sbuf_detach(&sb);
}

/* Value of key in [section] of an INI text, heap string or NULL. */
static char *ini_get(const char *text, const char *section, const char *key)
{
	bool in = false;
	const char *p = text;
	while (*p) {
		const char *eol = strchr(p, '\n');
		size_t n = eol ? (size_t)(eol - p) : strlen(p);
		while (n && (*p == ' ' || *p == '\t')) {
			p++;
			n--;
		}
		while (n && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r'))
			n--;
		if (n && p[0] == '[') {
			in = n == strlen(section) + 2 && !strncmp(p + 1, section, strlen(section)) &&
			     p[n - 1] == ']';
		} else if (in && n && p[0] != '#' && p[0] != ';') {
			const char *eq = memchr(p, '=', n);
			if (eq) {
				size_t kl = (size_t)(eq - p);
				while (kl && (p[kl - 1] == ' ' || p[kl - 1] == '\t'))
					kl--;
				if (kl == strlen(key) && !strncmp(p, key, kl)) {
					const char *v = eq + 1;
					while (v < p + n && (*v == ' ' || *v == '\t'))
						v++;
					return xstrndup(v, (size_t)(p + n - v));
				}
			}
		}
		p += n;
		if (eol)
			p = eol + 1;
		else
			break;
	}
	return NULL;
}

/* env first, then [section] of the file, then [s3] of the file. */
static char *conf_value(const char *text, const char *section, const char *env1, const char *key)
{
	const char *e = env1 ? getenv(env1) : NULL;
	if (e && *e)
		return xstrdup(e);
	if (!text)
		return NULL;
	char *v = ini_get(text, section, key);
	if (!v && strcmp(section, "s3") != 0)
		v = ini_get(text, "s3", key);
	return v;
}

static void s3_free(struct s3 *s)
{
	if (!s)
		return;
	if (s->secret)
		memset(s->secret, 0, strlen(s->secret));
	free(s->access);
	free(s->secret);
	free(s->token);
	free(s->region);
	free(s->endpoint);
	free(s->sigv4);
	free(s);
}

static int s3_open(struct storage *st, struct tc_err *err)
{
	if (http_init(err))
		return err->code;
	bool obs = !strncmp(st->url, "obs://", 6);
	const char *section = obs ? "obs" : "s3";
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

	struct sbuf text = SBUF_INIT;
	char *cpath = config_path();
	bool have_file = read_file(cpath, &text, NULL) == 0;
	const char *t = have_file ? text.buf : NULL;
	struct s3 *s = xcalloc(1, sizeof(*s));
	s->access = conf_value(t, section, "AWS_ACCESS_KEY_ID", "access_key_id");
	s->secret = conf_value(t, section, "AWS_SECRET_ACCESS_KEY", "secret_access_key");
	s->token = conf_value(t, section, "AWS_SESSION_TOKEN", "session_token");
	s->region = conf_value(t, section, obs ? "OBS_REGION" : "AWS_REGION", "region");
	if (!s->region && obs)
		s->region = conf_value(t, section, "AWS_REGION", "region");
	if (!s->region)
		s->region = xstrdup(obs ? "cn-north-4" : "us-east-1");
	s->endpoint = conf_value(t, section, obs ? "OBS_ENDPOINT_URL" : "AWS_ENDPOINT_URL", "endpoint");
	char *addr = conf_value(t, section, NULL, "addressing");
	char *verify = conf_value(t, section, NULL, "verify_etag");
	s->verify_etag = !(verify && (!strcmp(verify, "false") || !strcmp(verify, "0")));
	if (s->endpoint) {
		s->virtual_host = addr && !strcmp(addr, "virtual");
	} else {
		struct sbuf ep = SBUF_INIT;
		if (obs)
			sbuf_addf(&ep, "https://obs.%s.myhuaweicloud.com", s->region);
		else
			sbuf_addf(&ep, "https://s3.%s.amazonaws.com", s->region);
		s->endpoint = sbuf_detach(&ep);
		s->virtual_host = !(addr && !strcmp(addr, "path"));
	}
	size_t el = strlen(s->endpoint);
	while (el && s->endpoint[el - 1] == '/')
		s->endpoint[--el] = '\0';
	free(addr);
	free(verify);
	sbuf_release(&text);
	int rc = 0;
	if (!s->access || !s->secret) {
		rc = tc_error(err, TC_EINPUT,
			      "%s: no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
			      "access_key_id and secret_access_key under [%s] in %s",
			      st->url, section, cpath);
		s3_free(s);
	} else if (strncmp(s->endpoint, "http://", 7) && strncmp(s->endpoint, "https://", 8)) {
		rc = tc_error(err, TC_EINPUT, "%s: endpoint '%s' must start with http:// or https://",
			      st->url, s->endpoint);
		s3_free(s);
	} else {
		struct sbuf sv = SBUF_INIT;
		sbuf_addf(&sv, "aws:amz:%s:s3", s->region);
		s->sigv4 = sbuf_detach(&sv);
		st->priv = s;
	}
	free(cpath);
	return rc;
}

static void s3_thread_exit(void);

static void s3_close(struct storage *st)
{
	s3_free(st->priv);
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
	uint64_t content_length;
	bool have_length;
	uint64_t total;                /* whole object size from Content-Range */
	bool have_total;
	double last_modified;
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

static double parse_http_date(const char *v)
{
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	const char *end = strptime(v, "%a, %d %b %Y %H:%M:%S", &tm);
	return end ? (double)timegm(&tm) : 0;
}

static double parse_iso_date(const char *v)
{
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	const char *end = strptime(v, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!end)
		return 0;
	double frac = 0;
	if (*end == '.') {
		double scale = 0.1;
		for (end++; *end >= '0' && *end <= '9'; end++, scale /= 10)
			frac += (*end - '0') * scale;
	}
	return (double)timegm(&tm) + frac;
}

static size_t on_header(char *buf, size_t size, size_t n, void *arg)
{
	struct s3req *rq = arg;
	size_t len = size * n;
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
	} else if (kl == 13 && !strncasecmp(buf, "Last-Modified", 13)) {
		char tmp[64];
		if (vl < sizeof(tmp)) {
			memcpy(tmp, v, vl);
			tmp[vl] = '\0';
			rq->last_modified = parse_http_date(tmp);
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
		rq->md5 = md5_new();
	}
	return CURL_SEEKFUNC_OK;
}

/* The text between <tag> and </tag> (first one at or after *from), decoded. */
static bool xml_text(const char *xml, const char *end, const char *tag, struct sbuf *out,
		     const char **after)
{
	struct sbuf open = SBUF_INIT, close_ = SBUF_INIT;
	sbuf_addf(&open, "<%s>", tag);
	sbuf_addf(&close_, "</%s>", tag);
	bool found = false;
	const char *a = memmem(xml, (size_t)(end - xml), open.buf, open.len);
	if (a) {
		a += open.len;
		const char *b = memmem(a, (size_t)(end - a), close_.buf, close_.len);
		if (b) {
			found = true;
			sbuf_reset(out);
			for (const char *p = a; p < b; p++) {
				if (*p != '&') {
					sbuf_addch(out, *p);
					continue;
				}
				static const struct { const char *ent; char c; } ents[] = {
					{ "&amp;", '&' }, { "&lt;", '<' }, { "&gt;", '>' },
					{ "&quot;", '"' }, { "&apos;", '\'' },
				};
				bool done = false;
				for (size_t i = 0; i < 5 && !done; i++) {
					size_t l = strlen(ents[i].ent);
					if ((size_t)(b - p) >= l && !strncmp(p, ents[i].ent, l)) {
						sbuf_addch(out, ents[i].c);
						p += l - 1;
						done = true;
					}
				}
				if (!done && p + 2 < b && p[1] == '#') {
					const char *semi = memchr(p, ';', (size_t)(b - p));
					char *e;
					unsigned long cp = p[2] == 'x' ? strtoul(p + 3, &e, 16)
								       : strtoul(p + 2, &e, 10);
					if (semi && e == semi && cp && cp < 0x110000) {
						utf8_add(out, cp);
						p = semi;
						done = true;
					}
				}
				if (!done)
					sbuf_addch(out, '&');
			}
			if (after)
				*after = b + close_.len;
		}
	}
	sbuf_release(&open);
	sbuf_release(&close_);
	return found;
}

/* 100 ms doubling to 5 s, with jitter so parallel retries spread */
static const struct http_backoff s3_backoff = { 100, 5000, true };

static int max_attempts(void)
{
	const char *e = getenv("TRAINCTL_S3_RETRIES");
	long v;
	return e && parse_long(e, 1, 1L << 30, &v) ? (int)v : 8;
}

static bool is_md5_hex(const char *s)
{
	if (strlen(s) != 32)
		return false;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return false;
	return true;
}

/* Describe a failed response: "HTTP 403 AccessDenied: message". */
static void describe_http(struct s3req *rq, struct sbuf *out)
{
	struct sbuf code = SBUF_INIT, msg = SBUF_INIT;
	const char *end = rq->resp.buf + rq->resp.len;
	sbuf_addf(out, "HTTP %ld", rq->status);
	if (xml_text(rq->resp.buf, end, "Code", &code, NULL))
		sbuf_addf(out, " %s", code.buf);
	if (xml_text(rq->resp.buf, end, "Message", &msg, NULL))
		sbuf_addf(out, ": %s", msg.buf);
	sbuf_release(&code);
	sbuf_release(&msg);
}

static int s3_do(struct storage *st, struct s3req *rq, struct tc_err *err)
{
	struct s3 *s = st->priv;
	struct sbuf url = SBUF_INIT, why = SBUF_INIT, name = SBUF_INIT, range = SBUF_INIT;
	int rc = 0;
	int max = max_attempts();
	sbuf_init(&rq->resp, 0);
	obj_name(st, rq->key, &name);
	build_url(st, rq->key, rq->rooted, rq->query, &url);
	uint64_t start_done = rq->done ? *rq->done : 0;
	for (int attempt = 1;; attempt++) {
		CURL *h = handle();
		struct curl_slist *hdrs = NULL;
		for (struct curl_slist *x = rq->hdrs; x; x = x->next)
			hdrs = curl_slist_append(hdrs, x->data);
		if (s->token) {
			struct sbuf t = SBUF_INIT;
			sbuf_addf(&t, "x-amz-security-token: %s", s->token);
			hdrs = curl_slist_append(hdrs, t.buf);
			sbuf_release(&t);
		}
		hdrs = curl_slist_append(hdrs, "Expect:");
		/* S3 wants the payload hash header; libcurl signs the value given */
		hdrs = curl_slist_append(hdrs, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
		bool ranged = !strcmp(rq->method, "GET") && rq->sink &&
			      (rq->range_len || (rq->done && *rq->done));
		if (ranged) {
			uint64_t d = rq->done ? *rq->done : 0;
			sbuf_reset(&range);
			if (rq->range_len)
				sbuf_addf(&range, "Range: bytes=%llu-%llu",
					  (unsigned long long)(rq->range_off + d),
					  (unsigned long long)(rq->range_off + rq->range_len - 1));
			else
				sbuf_addf(&range, "Range: bytes=%llu-", (unsigned long long)d);
			hdrs = curl_slist_append(hdrs, range.buf);
		}
		if (!hdrs)
			xdie_oom(0);
		sbuf_reset(&rq->resp);
		rq->status = 0;
		rq->etag[0] = '\0';
		rq->have_length = false;
		rq->have_total = false;
		rq->sink_failed = false;
		md5_free(rq->md5);
		rq->md5 = NULL;
		/* a GET that starts at 0 may turn out to be the whole object */
		bool check_get = !strcmp(rq->method, "GET") && rq->sink && rq->done && *rq->done == 0 &&
				 !rq->range_off;
		bool check_put = (rq->rd != NULL) && s->verify_etag;
		if (check_get || check_put)
			rq->md5 = md5_new();
		if (rq->rd && rq->rd->rewind(rq->rd) < 0) {
			curl_slist_free_all(hdrs);
			rc = tc_error_errno(err, TC_ESTORAGE, "%s: cannot read the data to send", name.buf);
			break;
		}
		if (rq->body)
			rq->range_off = 0;
		long timeout = 60;
		const char *te = getenv("TRAINCTL_S3_TIMEOUT");
		long tv;
		if (te && parse_long(te, 1, 86400, &tv))
			timeout = tv;
		int ok = curl_easy_setopt(h, CURLOPT_URL, url.buf) == CURLE_OK &&
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
		if (!ok) {
			curl_slist_free_all(hdrs);
			rc = tc_error(err, TC_ESTORAGE, "%s: cannot set up the request", name.buf);
			break;
		}
		CURLcode cc = curl_easy_perform(h);
		curl_slist_free_all(hdrs);
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &rq->status);
		bool retry = false;
		sbuf_reset(&why);
		if (cc != CURLE_OK) {
			if (rq->sink_failed) {
				rc = tc_error_errno(err, TC_ESTORAGE, "%s: cannot store the data", name.buf);
				break;
			}
			sbuf_addf(&why, "%s", curl_easy_strerror(cc));
			retry = http_retryable_curl(cc);
		} else if (rq->status >= 200 && rq->status < 300) {
			if (ranged && rq->status != 206) {
				sbuf_addf(&why, "the server ignored the byte range (HTTP %ld)", rq->status);
				retry = false;
			} else if (rq->md5 && rq->etag[0] && is_md5_hex(rq->etag) &&
				   (check_put || (rq->done && *rq->done ==
						  (rq->status == 206 ? (rq->have_total ? rq->total : 0)
								     : rq->content_length)))) {
				char hex[33];
				md5_final_hex(rq->md5, hex);
				rq->md5 = NULL;
				if (strcmp(hex, rq->etag) != 0) {
					sbuf_addf(&why, "the data does not match its ETag (MD5 %s, ETag %s)",
						  hex, rq->etag);
					retry = true;
					if (check_get && rq->done)
						*rq->done = start_done; /* fetch it all again */
				}
			}
			if (!why.len && !strcmp(rq->method, "POST") && rq->resp.len &&
			    memmem(rq->resp.buf, rq->resp.len, "<Error>", 7)) {
				/* CompleteMultipartUpload can fail inside a 200 */
				describe_http(rq, &why);
				retry = true;
			}
			if (!why.len)
				break; /* success */
		} else {
			describe_http(rq, &why);
			retry = http_retryable_status(rq->status);
			if (rq->status == 404) {
				rc = tc_error(err, TC_ENOTFOUND, "%s: %s %s", name.buf, rq->method, why.buf);
				break;
			}
		}
		if (!retry || attempt >= max) {
			rc = tc_error(err, TC_ESTORAGE, "%s: %s failed%s: %s", name.buf, rq->method,
				      attempt > 1 ? " after retries" : "", why.buf);
			break;
		}
		http_sleep_ms(http_backoff_ms(&s3_backoff, attempt));
	}
	md5_free(rq->md5);
	rq->md5 = NULL;
	sbuf_release(&url);
	sbuf_release(&why);
	sbuf_release(&name);
	sbuf_release(&range);
	return rc;
}

static void req_release(struct s3req *rq)
{
	sbuf_release(&rq->resp);
	curl_slist_free_all(rq->hdrs);
	rq->hdrs = NULL;
}

/* ---- listing ---- */

struct s3ent {
	char *key;
	uint64_t size;
	double mtime;
	char *etag;
};

struct s3iter {
	struct storage_iter base;
	struct s3ent *e;
	size_t n, i, alloc;
	char *token;
	bool more, started;
};

static void clear_page(struct s3iter *it)
{
	for (size_t i = 0; i < it->n; i++) {
		free(it->e[i].key);
		free(it->e[i].etag);
	}
	it->n = it->i = 0;
}

static int fetch_page(struct s3iter *it, struct tc_err *err)
{
	struct storage *st = it->base.st;
	struct sbuf q = SBUF_INIT;
	if (it->token) {
		sbuf_adds(&q, "continuation-token=");
		url_encode(&q, it->token, false);
		sbuf_addch(&q, '&');
	}
	sbuf_adds(&q, "list-type=2&max-keys=1000");
	if (*st->root) {
		sbuf_adds(&q, "&prefix=");
		url_encode(&q, st->root, false);
	}
	struct s3req rq = { .method = "GET", .key = NULL, .query = q.buf };
	int rc = s3_do(st, &rq, err);
	sbuf_release(&q);
	clear_page(it);
	if (rc) {
		req_release(&rq);
		return rc;
	}
	const char *p = rq.resp.buf, *end = rq.resp.buf + rq.resp.len;
	struct sbuf f = SBUF_INIT;
	size_t rl = strlen(st->root);
	for (;;) {
		const char *a = memmem(p, (size_t)(end - p), "<Contents>", 10);
		if (!a)
			break;
		const char *b = memmem(a, (size_t)(end - a), "</Contents>", 11);
		if (!b)
			break;
		struct s3ent e = { 0 };
		if (xml_text(a, b, "Key", &f, NULL) && f.len > rl && !strncmp(f.buf, st->root, rl) &&
		    f.buf[f.len - 1] != '/') {
			e.key = xstrdup(f.buf + rl);
			if (xml_text(a, b, "Size", &f, NULL))
				e.size = strtoull(f.buf, NULL, 10);
			if (xml_text(a, b, "LastModified", &f, NULL))
				e.mtime = parse_iso_date(f.buf);
			if (xml_text(a, b, "ETag", &f, NULL)) {
				const char *v = f.buf;
				size_t l = f.len;
				if (l >= 2 && v[0] == '"' && v[l - 1] == '"') {
					v++;
					l -= 2;
				}
				e.etag = xstrndup(v, l);
			}
			XGROW(it->e, it->n + 1, it->alloc);
			it->e[it->n++] = e;
		}
		p = b + 11;
	}
	it->more = xml_text(rq.resp.buf, end, "IsTruncated", &f, NULL) && !strcmp(f.buf, "true");
	free(it->token);
	it->token = NULL;
	if (it->more) {
		if (xml_text(rq.resp.buf, end, "NextContinuationToken", &f, NULL) && f.len)
			it->token = xstrdup(f.buf);
		else
			it->more = false;
	}
	sbuf_release(&f);
	req_release(&rq);
	return 0;
}

static int s3_next(struct storage_iter *base, struct storage_obj *obj, struct tc_err *err)
{
	struct s3iter *it = (struct s3iter *)base;
	while (it->i >= it->n) {
		if (it->started && !it->more)
			return 0;
		it->started = true;
		int rc = fetch_page(it, err);
		if (rc)
			return rc;
	}
	struct s3ent *e = &it->e[it->i++];
	obj->key = e->key;
	obj->size = e->size;
	obj->mtime = e->mtime;
	obj->etag = e->etag;
	return 1;
}

static void s3_iter_free(struct storage_iter *base)
{
	struct s3iter *it = (struct s3iter *)base;
	clear_page(it);
	free(it->e);
	free(it->token);
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
	struct s3req rq = { .method = "HEAD", .key = key, .rooted = true };
	int rc = s3_do(st, &rq, err);
	if (!rc) {
		obj->key = key;
		obj->size = rq.content_length;
		obj->mtime = rq.last_modified;
		obj->etag_buf = rq.etag[0] ? xstrdup(rq.etag) : NULL;
		obj->etag = obj->etag_buf;
	}
	req_release(&rq);
	return rc;
}

static int s3_del(struct storage *st, const char *key, struct tc_err *err)
{
	struct s3req rq = { .method = "DELETE", .key = key, .rooted = true };
	int rc = s3_do(st, &rq, err);
	if (rc == TC_ENOTFOUND)
		rc = 0;
	req_release(&rq);
	return rc;
}

static int s3_read(struct storage *st, const char *key, uint64_t off, uint64_t len, sink_fn sink,
		   void *arg, uint64_t *done, struct tc_err *err)
{
	struct s3req rq = { .method = "GET", .key = key, .rooted = true, .sink = sink,
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
	double mtime;
};

static void mtime_header(struct s3req *rq, double mtime)
{
	if (mtime <= 0)
		return;
	struct sbuf h = SBUF_INIT;
	/* rclone's convention, so that rclone sees the file's time */
	sbuf_addf(&h, "x-amz-meta-mtime: %.9f", mtime);
	rq->hdrs = curl_slist_append(rq->hdrs, h.buf);
	sbuf_release(&h);
}

static int s3_wbegin(struct storage *st, const char *key, uint64_t size, double mtime, int nparts,
		     struct wtx **out, struct tc_err *err)
{
	(void)size;
	struct wtx *tx = xcalloc(1, sizeof(*tx));
	tx->st = st;
	tx->key = xstrdup(key);
	tx->nparts = nparts;
	tx->mtime = mtime;
	if (nparts > 1) {
		struct s3req rq = { .method = "POST", .key = key, .rooted = true, .query = "uploads=" };
		mtime_header(&rq, mtime);
		int rc = s3_do(st, &rq, err);
		struct sbuf id = SBUF_INIT;
		if (!rc && !xml_text(rq.resp.buf, rq.resp.buf + rq.resp.len, "UploadId", &id, NULL))
			rc = tc_error(err, TC_ESTORAGE, "s3://%s/%s%s: no UploadId in the answer",
				      st->bucket, st->root, key);
		req_release(&rq);
		if (rc) {
			sbuf_release(&id);
			free(tx->key);
			free(tx);
			return rc;
		}
		tx->upload_id = sbuf_detach(&id);
		tx->etags = xcalloc((size_t)nparts, sizeof(char *));
	}
	*out = tx;
	return 0;
}

static int s3_wpart(struct wtx *tx, int part, uint64_t off, uint64_t len, struct reader *rd,
		    struct tc_err *err)
{
	(void)off;
	struct s3req rq = { .method = "PUT", .key = tx->key, .rooted = true, .rd = rd, .rd_len = len };
	struct sbuf q = SBUF_INIT;
	if (tx->upload_id) {
		sbuf_addf(&q, "partNumber=%d&uploadId=", part + 1);
		url_encode(&q, tx->upload_id, false);
		rq.query = q.buf;
	} else {
		mtime_header(&rq, tx->mtime);
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
	free(tx);
}

static void s3_wabort(struct wtx *tx)
{
	if (tx->upload_id) {
		struct sbuf q = SBUF_INIT;
		sbuf_adds(&q, "uploadId=");
		url_encode(&q, tx->upload_id, false);
		struct s3req rq = { .method = "DELETE", .key = tx->key, .rooted = true, .query = q.buf };
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
 * Did a CompleteMultipartUpload that "failed" land after all?  When its
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
	struct s3req rq = { .method = "POST", .key = tx->key, .rooted = true, .query = q.buf,
			    .body = body.buf, .body_len = body.len };
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
