/* notify.c -- webhook bodies, signatures and the delivery thread; see notify.h. */
#include "notify/notify.h"
#include "core/enc.h"
#include "core/http.h"
#include "core/upath.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- events ---- */

static const char *const event_names[NOTIFY_NEVENTS] = {
	[NOTIFY_QUEUED] = "queued",       [NOTIFY_STARTED] = "started",
	[NOTIFY_SUCCEEDED] = "succeeded", [NOTIFY_FAILED] = "failed",
	[NOTIFY_HANG] = "hang",           [NOTIFY_RESTARTED] = "restarted",
	[NOTIFY_PREEMPTED] = "preempted", [NOTIFY_LOG_MATCH] = "log_match",
	[NOTIFY_KILLED] = "killed",       [NOTIFY_UNHEALTHY] = "device_unhealthy",
	[NOTIFY_IDLE] = "idle",
};

const char *notify_event_name(enum notify_event e)
{
	return (unsigned)e < NOTIFY_NEVENTS ? event_names[e] : "unknown";
}

int notify_event_parse(const char *name)
{
	for (int i = 0; i < NOTIFY_NEVENTS; i++)
		if (!strcmp(event_names[i], name))
			return i;
	return -1;
}

const char *notify_event_names(void)
{
	return "queued, started, succeeded, failed, hang, restarted, preempted, log_match, "
	       "killed, device_unhealthy";
}

/* ---- hooks ---- */

void notify_hook_release(struct notify_hook *h)
{
	free(h->url);
	free(h->secret_env);
	free(h->secret_file);
	memset(h, 0, sizeof(*h));
}

void notify_hooks_free(struct notify_hook *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		notify_hook_release(&v[i]);
	free(v);
}

void notify_hook_copy(struct notify_hook *dst, const struct notify_hook *src)
{
	dst->url = src->url ? xstrdup(src->url) : NULL;
	dst->events = src->events;
	dst->format = src->format;
	dst->secret_env = src->secret_env ? xstrdup(src->secret_env) : NULL;
	dst->secret_file = src->secret_file ? xstrdup(src->secret_file) : NULL;
}

/* Length of "http://" or "https://" at the start of url, or 0. */
static size_t scheme_len(const char *url)
{
	if (!strncmp(url, "http://", 7))
		return 7;
	if (!strncmp(url, "https://", 8))
		return 8;
	return 0;
}

const char *notify_url_problem(const char *url)
{
	size_t s = scheme_len(url);
	if (!s)
		return "must be an http:// or https:// URL";
	if (!url[s] || url[s] == '/' || url[s] == ':')
		return "has no host";
	for (const unsigned char *c = (const unsigned char *)url; *c; c++)
		if (*c <= 0x20 || *c == 0x7f)
			return "may not hold blanks or control characters";
	return NULL;
}

char *notify_url_shown(const char *url)
{
	size_t s = scheme_len(url);
	const char *slash = strchr(url + s, '/');
	struct sbuf sb = SBUF_INIT;
	/* user:password@ is a secret too: keep only what follows the last '@' */
	const char *host = url + s, *end = slash ? slash : url + strlen(url);
	for (const char *c = host; c < end; c++)
		if (*c == '@')
			host = c + 1;
	sbuf_add(&sb, url, s);
	sbuf_add(&sb, host, (size_t)(end - host));
	if (slash && slash[1])
		sbuf_adds(&sb, "/...");
	else if (slash)
		sbuf_addch(&sb, '/');
	return sbuf_detach(&sb);
}

/* ---- bodies and signatures ---- */

static void iso_time(struct sbuf *out, double t)
{
	format_time_utc(out, t);
}

char *notify_body(const struct notify_msg *m, enum notify_format f)
{
	const char *ev = notify_event_name(m->event);
	json_t *o;
	if (f == NOTIFY_SLACK) {
		struct sbuf text = SBUF_INIT;
		sbuf_addf(&text, "trainctl: job %s", m->job_id ? m->job_id : "?");
		if (m->job_name)
			sbuf_addf(&text, " (%s)", m->job_name);
		sbuf_addf(&text, " %s", ev);
		if (m->host)
			sbuf_addf(&text, " on %s", m->host);
		if (m->reason && *m->reason)
			sbuf_addf(&text, ": %s", m->reason);
		o = json_pack("{s:s}", "text", text.buf);
		sbuf_release(&text);
	} else {
		struct sbuf t = SBUF_INIT;
		iso_time(&t, m->time);
		o = json_pack("{s:s, s:{s:s?, s:s*, s:s*, s:s*}, s:s, s:s*, s:s*}", "event", ev, "job",
			      "id", m->job_id, "name", m->job_name, "state", m->state, "user", m->user,
			      "time", t.buf, "reason", m->reason, "host", m->host);
		sbuf_release(&t);
		if (o && m->attempt >= 0)
			json_object_set_new(o, "attempt", json_integer(m->attempt));
		if (o && m->exit_code >= 0)
			json_object_set_new(o, "exit_code", json_integer(m->exit_code));
	}
	char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(o);
	if (!text)
		xdie_oom(0);
	char *r = xstrdup(text);
	free(text);
	return r;
}

#define SHA256_LEN 32
#define SHA256_BLOCK 64

static void sha256_two(const void *a, size_t na, const void *b, size_t nb,
		       unsigned char out[SHA256_LEN])
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	unsigned int len = 0;
	if (!c)
		xdie_oom(0);
	/* SHA-256 over memory fails only without memory: treat it so */
	if (EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1 || EVP_DigestUpdate(c, a, na) != 1 ||
	    EVP_DigestUpdate(c, b, nb) != 1 || EVP_DigestFinal_ex(c, out, &len) != 1 ||
	    len != SHA256_LEN)
		xdie_oom(0);
	EVP_MD_CTX_free(c);
}

void notify_hmac_sha256(const void *key, size_t klen, const void *msg, size_t n,
			unsigned char out[32])
{
	unsigned char k[SHA256_BLOCK] = { 0 }, pad[SHA256_BLOCK], inner[SHA256_LEN];
	if (klen > SHA256_BLOCK)
		sha256_two(key, klen, "", 0, k); /* RFC 2104: a long key is hashed first */
	else if (klen)
		memcpy(k, key, klen);
	for (int i = 0; i < SHA256_BLOCK; i++)
		pad[i] = k[i] ^ 0x36;
	sha256_two(pad, sizeof(pad), msg, n, inner);
	for (int i = 0; i < SHA256_BLOCK; i++)
		pad[i] = k[i] ^ 0x5c;
	sha256_two(pad, sizeof(pad), inner, sizeof(inner), out);
}

void notify_signature(const char *secret, const char *body, size_t len, struct sbuf *out)
{
	unsigned char mac[SHA256_LEN];
	char hex[2 * SHA256_LEN + 1];
	notify_hmac_sha256(secret, strlen(secret), body, len, mac);
	hex_encode(hex, mac, sizeof(mac));
	sbuf_adds(out, "sha256=");
	sbuf_add(out, hex, 2 * SHA256_LEN);
}

/* ---- the notifier ---- */

struct hook_rt {
	struct notify_hook h;
	char *secret; /* NULL: unsigned */
	char *shown;  /* notify_url_shown */
};

struct item {
	struct hook_rt *h; /* one of the notifier's, or owned (notify_post_hooks) */
	bool own;
	enum notify_event event;
	char *job_id;
	char *body;
};

struct notifier {
	struct hook_rt *hooks;
	size_t n;
	unsigned wanted; /* the union of the hooks' events */
	struct notify_opts o;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct item q[NOTIFY_QUEUE_MAX];
	size_t head, count;
	bool busy, closing, started;
	atomic_bool abort; /* read by curl's progress callback without the lock */
	pthread_t th;
};

static void say(struct notifier *nf, const char *fmt, ...) TC_PRINTF(2, 3);
static void say(struct notifier *nf, const char *fmt, ...)
{
	if (!nf->o.warn)
		return;
	va_list ap;
	va_start(ap, fmt);
	sbuf_vsay(nf->o.warn, nf->o.ctx, fmt, ap);
	va_end(ap);
}

/*
 * path's bytes (a regular file, at most NOTIFY_SECRET_MAX) into text; a FIFO
 * never blocks.  A file a spec names, read by whoever reads as the job's
 * account (its supervisor, or the server with the account's file ids): the
 * user-path door's read of such a file (core/upath.h).
 */
static int read_secret_file(const char *path, struct sbuf *text, struct tc_err *err)
{
	int rc = upath_read_path(path, NOTIFY_SECRET_MAX, text, err);
	if (rc) {
		tc_error_prefix(err, "notify: cannot read the secret file");
		err->code = rc = TC_EUSAGE;
	}
	return rc;
}

int notify_secret_read(const struct notify_hook *h, unsigned flags, char **out,
		       struct tc_err *err)
{
	*out = NULL;
	if (h->secret_env) {
		if (flags & NOTIFY_NO_ENV)
			return tc_error(err, TC_EUSAGE,
					"notify: secret_env (%s) is not read in a job of a server, whose "
					"environment is not yours: give secret_file",
					h->secret_env);
		const char *v = getenv(h->secret_env);
		if (!v || !*v)
			return tc_error(err, TC_EUSAGE, "notify: the secret's variable %s is not set",
					h->secret_env);
		*out = xstrdup(v);
		return 0;
	}
	if (h->secret_file) {
		struct sbuf text = SBUF_INIT;
		int rc = read_secret_file(h->secret_file, &text, err);
		while (!rc && text.len &&
		       (text.buf[text.len - 1] == '\n' || text.buf[text.len - 1] == '\r'))
			sbuf_setlen(&text, text.len - 1);
		if (!rc && !text.len)
			rc = tc_error(err, TC_EUSAGE, "notify: the secret file %s is empty",
				      h->secret_file);
		if (rc) {
			if (text.buf)
				explicit_bzero(text.buf, text.alloc);
			sbuf_release(&text);
			return rc;
		}
		*out = sbuf_detach(&text);
	}
	return 0;
}

static void release_hook(struct hook_rt *h)
{
	notify_hook_release(&h->h);
	if (h->secret) {
		/* do not leave the secret in freed memory */
		memset(h->secret, 0, strlen(h->secret));
		free(h->secret);
	}
	free(h->shown);
}

static void free_hooks(struct hook_rt *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		release_hook(&v[i]);
	free(v);
}

static void item_release(struct item *it)
{
	if (it->own) {
		release_hook(it->h);
		free(it->h);
	}
	free(it->job_id);
	free(it->body);
}

/* A hook ready to send: copied, its URL redacted, its secret read. */
static int hook_ready(struct hook_rt *rt, const struct notify_hook *h, unsigned flags,
		      struct tc_err *err)
{
	notify_hook_copy(&rt->h, h);
	rt->shown = notify_url_shown(h->url);
	return notify_secret_read(h, flags, &rt->secret, err);
}

static struct notifier *notifier_new(const struct notify_opts *o);

int notify_start(const struct notify_hook *hooks, size_t n, const struct notify_opts *o,
		 struct notifier **out, struct tc_err *err)
{
	*out = NULL;
	unsigned wanted = 0;
	for (size_t i = 0; i < n; i++)
		wanted |= hooks[i].events;
	if (!n || !wanted)
		return 0;
	struct hook_rt *rt = xcalloc(n, sizeof(*rt));
	for (size_t i = 0; i < n; i++) {
		int rc = hook_ready(&rt[i], &hooks[i], o->flags, err);
		if (rc) {
			free_hooks(rt, i + 1);
			return rc;
		}
	}
	struct notifier *nf = notifier_new(o);
	nf->hooks = rt;
	nf->n = n;
	nf->wanted = wanted;
	*out = nf;
	return 0;
}

struct notifier *notify_pool(const struct notify_opts *o)
{
	struct notifier *nf = notifier_new(o);
	nf->wanted = NOTIFY_ALL; /* whatever the hooks of each post want */
	return nf;
}

static struct notifier *notifier_new(const struct notify_opts *o)
{
	struct notifier *nf = xcalloc(1, sizeof(*nf));
	nf->o = *o;
	if (nf->o.tries <= 0)
		nf->o.tries = 4;
	if (nf->o.backoff_ms <= 0)
		nf->o.backoff_ms = 500;
	if (nf->o.timeout_s <= 0)
		nf->o.timeout_s = 10;
	atomic_init(&nf->abort, false);
	pthread_mutex_init(&nf->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&nf->cv, &ca);
	pthread_condattr_destroy(&ca);
	return nf;
}

bool notify_wants(const struct notifier *nf, enum notify_event e)
{
	return nf && (nf->wanted & (1u << e));
}

static size_t discard_body(char *p, size_t size, size_t n, void *ctx)
{
	(void)p;
	(void)ctx;
	return size * n;
}

static int on_progress(void *ctx, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	(void)a;
	(void)b;
	(void)c;
	(void)d;
	struct notifier *nf = ctx;
	return atomic_load(&nf->abort) ? 1 : 0; /* non-zero aborts the transfer */
}

/* One POST: 0 with *status, or the curl code (its text in errbuf). */
static CURLcode post_once(struct notifier *nf, const struct hook_rt *h, const struct item *it,
			  long *status, char errbuf[CURL_ERROR_SIZE])
{
	struct tc_err err = TC_ERR_INIT;
	*status = 0;
	errbuf[0] = '\0';
	if (http_init(&err)) {
		snprintf(errbuf, CURL_ERROR_SIZE, "%s", err.msg);
		tc_err_release(&err);
		return CURLE_FAILED_INIT;
	}
	CURL *c = curl_easy_init();
	if (!c) {
		snprintf(errbuf, CURL_ERROR_SIZE, "cannot create a libcurl handle");
		return CURLE_FAILED_INIT;
	}
	struct curl_slist *hdrs = NULL;
	struct sbuf line = SBUF_INIT;
	hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
	sbuf_addf(&line, "X-Trainctl-Event: %s", notify_event_name(it->event));
	hdrs = curl_slist_append(hdrs, line.buf);
	if (h->secret) {
		sbuf_reset(&line);
		sbuf_adds(&line, "X-Trainctl-Signature: ");
		notify_signature(h->secret, it->body, strlen(it->body), &line);
		hdrs = curl_slist_append(hdrs, line.buf);
	}
	hdrs = curl_slist_append(hdrs, "Expect:"); /* no 100-continue round trip */
	bool ok = hdrs && curl_easy_setopt(c, CURLOPT_URL, h->h.url) == CURLE_OK &&
		  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
		  curl_easy_setopt(c, CURLOPT_POSTFIELDS, it->body) == CURLE_OK &&
		  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs) == CURLE_OK &&
		  curl_easy_setopt(c, CURLOPT_USERAGENT, "trainctl-notify") == CURLE_OK &&
		  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf) == CURLE_OK &&
		  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard_body) == CURLE_OK &&
		  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 5L) == CURLE_OK &&
		  curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)nf->o.timeout_s) == CURLE_OK &&
		  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L) == CURLE_OK &&
		  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress) == CURLE_OK &&
		  curl_easy_setopt(c, CURLOPT_XFERINFODATA, nf) == CURLE_OK &&
		  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https") == CURLE_OK;
	CURLcode rc = ok ? curl_easy_perform(c) : CURLE_FAILED_INIT;
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
	else if (!errbuf[0])
		snprintf(errbuf, CURL_ERROR_SIZE, "%s", curl_easy_strerror(rc));
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(c);
	sbuf_release(&line);
	return rc;
}

static void record(struct notifier *nf, const struct item *it, bool ok, int tries, long status,
		   const char *error)
{
	const struct hook_rt *h = it->h;
	if (!ok)
		say(nf, "warning: notify: %s to %s not delivered after %d tr%s: %s",
		    notify_event_name(it->event), h->shown, tries, tries == 1 ? "y" : "ies", error);
	if (!nf->o.record)
		return;
	struct notify_delivery d = { .job_id = it->job_id, .url = h->shown, .event = it->event, .ok = ok,
				     .tries = tries, .status = status, .error = error,
				     .time = now_wall() };
	nf->o.record(nf->o.ctx, &d);
}

/* Deliver it with retries; false when aborted (the caller records it). */
static void deliver(struct notifier *nf, const struct item *it)
{
	const struct hook_rt *h = it->h;
	struct http_backoff bo = { .first_ms = nf->o.backoff_ms, .max_ms = 30000, .jitter = false };
	char errbuf[CURL_ERROR_SIZE];
	struct sbuf why = SBUF_INIT;
	long status = 0;
	int t;
	for (t = 1; t <= nf->o.tries; t++) {
		CURLcode rc = post_once(nf, h, it, &status, errbuf);
		sbuf_reset(&why);
		if (rc == CURLE_OK && status >= 200 && status < 300) {
			record(nf, it, true, t, status, NULL);
			sbuf_release(&why);
			return;
		}
		bool again;
		if (rc == CURLE_ABORTED_BY_CALLBACK || atomic_load(&nf->abort)) {
			sbuf_adds(&why, "the job ended before it was delivered");
			again = false;
		} else if (rc != CURLE_OK) {
			sbuf_adds(&why, errbuf);
			again = http_retryable_curl(rc);
		} else {
			sbuf_addf(&why, "HTTP status %ld", status);
			again = http_retryable_status(status);
		}
		if (!again || t == nf->o.tries)
			break;
		/* the wait ends early when the notifier is aborted */
		struct timespec until = mono_deadline(http_backoff_ms(&bo, t));
		pthread_mutex_lock(&nf->mu);
		while (!atomic_load(&nf->abort) &&
		       pthread_cond_timedwait(&nf->cv, &nf->mu, &until) == 0)
			;
		pthread_mutex_unlock(&nf->mu);
	}
	record(nf, it, false, t > nf->o.tries ? nf->o.tries : t, status, why.buf);
	sbuf_release(&why);
}

static void *notify_thread(void *arg)
{
	struct notifier *nf = arg;
	pthread_mutex_lock(&nf->mu);
	for (;;) {
		while (!nf->count && !nf->closing)
			pthread_cond_wait(&nf->cv, &nf->mu);
		if (!nf->count || atomic_load(&nf->abort))
			break;
		struct item it = nf->q[nf->head];
		nf->head = (nf->head + 1) % NOTIFY_QUEUE_MAX;
		nf->count--;
		nf->busy = true;
		pthread_mutex_unlock(&nf->mu);
		deliver(nf, &it);
		item_release(&it);
		pthread_mutex_lock(&nf->mu);
		nf->busy = false;
		pthread_cond_broadcast(&nf->cv);
	}
	pthread_mutex_unlock(&nf->mu);
	return NULL;
}

/* Start the thread with every signal blocked (the supervisor reads its signals from a signalfd). */
static bool start_thread(struct notifier *nf)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int rc = pthread_create(&nf->th, NULL, notify_thread, nf);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc == 0;
}

/* Queue one delivery (it is taken); a full queue records it as not delivered. */
static void enqueue(struct notifier *nf, struct item it)
{
	pthread_mutex_lock(&nf->mu);
	bool full = nf->count == NOTIFY_QUEUE_MAX || nf->closing;
	if (!full) {
		if (!nf->started)
			nf->started = start_thread(nf);
		full = !nf->started;
	}
	if (!full) {
		nf->q[(nf->head + nf->count) % NOTIFY_QUEUE_MAX] = it;
		nf->count++;
		pthread_cond_broadcast(&nf->cv);
	}
	pthread_mutex_unlock(&nf->mu);
	if (full) {
		record(nf, &it, false, 0, 0,
		       nf->started ? "the queue of deliveries is full"
				   : "the delivery thread could not start");
		item_release(&it);
	}
}

/* Queue m for each of hooks[0..n) that wants it; own: the items own copies of the hooks. */
static void post(struct notifier *nf, struct hook_rt *hooks, size_t n, bool own,
		 const struct notify_msg *m)
{
	char *body[2] = { NULL, NULL }; /* one per format, built once */
	for (size_t i = 0; i < n; i++) {
		if (!(hooks[i].h.events & (1u << m->event)))
			continue;
		enum notify_format f = hooks[i].h.format;
		if (!body[f])
			body[f] = notify_body(m, f);
		struct item it = { .h = &hooks[i], .event = m->event, .body = xstrdup(body[f]),
				   .job_id = m->job_id ? xstrdup(m->job_id) : NULL };
		if (own) {
			it.h = xmalloc(sizeof(*it.h));
			*it.h = hooks[i]; /* moved: the caller frees only the array */
			it.own = true;
			memset(&hooks[i], 0, sizeof(hooks[i]));
		}
		enqueue(nf, it);
	}
	free(body[0]);
	free(body[1]);
}

void notify_post(struct notifier *nf, const struct notify_msg *m)
{
	if (notify_wants(nf, m->event))
		post(nf, nf->hooks, nf->n, false, m);
}

int notify_post_hooks(struct notifier *nf, const struct notify_hook *hooks, size_t n,
		      const struct notify_msg *m, unsigned flags, struct tc_err *err)
{
	if (!nf)
		return 0;
	size_t want = 0;
	for (size_t i = 0; i < n; i++)
		want += (hooks[i].events & (1u << m->event)) != 0;
	if (!want)
		return 0;
	struct hook_rt *rt = xcalloc(n, sizeof(*rt));
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i++)
		if (hooks[i].events & (1u << m->event))
			rc = hook_ready(&rt[i], &hooks[i], flags, err);
	if (!rc)
		post(nf, rt, n, true, m);
	free_hooks(rt, n); /* what post() did not take */
	return rc;
}

void notify_finish(struct notifier *nf, int wait_ms)
{
	if (!nf)
		return;
	if (nf->started) {
		struct timespec until = mono_deadline(wait_ms > 0 ? wait_ms : 0);
		pthread_mutex_lock(&nf->mu);
		nf->closing = true;
		pthread_cond_broadcast(&nf->cv);
		while ((nf->count || nf->busy) &&
		       pthread_cond_timedwait(&nf->cv, &nf->mu, &until) == 0)
			;
		if (nf->count || nf->busy) {
			atomic_store(&nf->abort, true);
			pthread_cond_broadcast(&nf->cv);
		}
		pthread_mutex_unlock(&nf->mu);
		pthread_join(nf->th, NULL);
		/* what never left the queue */
		for (; nf->count; nf->count--) {
			struct item *it = &nf->q[nf->head];
			record(nf, it, false, 0, 0, "the job ended before it was sent");
			item_release(it);
			nf->head = (nf->head + 1) % NOTIFY_QUEUE_MAX;
		}
	}
	pthread_cond_destroy(&nf->cv);
	pthread_mutex_destroy(&nf->mu);
	free_hooks(nf->hooks, nf->n);
	free(nf);
}
