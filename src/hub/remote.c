/*
 * remote.c -- a remote sink's journal and its sender thread (hub.h notes
 * 2, 3, 5).  The supervisor's thread appends whole lines to the journal
 * under the lock; the sender reads them back from the file (the page
 * cache), fdatasyncs, POSTs up to max_batch bytes and moves its mark past
 * what the hub acknowledged.  Nothing the supervisor does waits on the
 * network.
 */
#include "hub/hub.h"
#include "hub/hub_int.h"
#include "core/enc.h"
#include "core/http.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <dirent.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define WARN_SEND 1u
#define WARN_JOURNAL 2u
#define WARN_GONE 4u

/*
 * Seconds a closing sink still waits once the hub's Unix socket is gone
 * (its server stopped): a server that comes back reads the journal from
 * the run folder (ingest_journals.c), so nobody needs the whole wait_s.
 */
#define HUB_GONE_WAIT 5

/* A journal left by a process of this job that is gone (note 3's stream is its own). */
struct orphan {
	char *path, *url;
	int fd;   /* flock'ed: nobody else sends it */
	off_t off, size;
};

struct hub_remote {
	char *url, *auth, *job, *path;
	char *base;          /* {url}/api/v1/hub/{job}/events?stream= */
	char *unix_path;     /* the hub's Unix socket (hub_remote_opts.unix_path), or NULL */
	struct orphan *orph; /* the sender's own: adopted at its start */
	size_t norph;
	int fd;
	int wait_s, max_batch;
	void (*warn)(void *, const char *);
	void *warn_ctx;
	pthread_mutex_t mu;
	pthread_cond_t wake, progress;
	long long seq;      /* last appended */
	long long acked;    /* last acknowledged by the hub */
	off_t end;          /* journal bytes appended */
	off_t mark;         /* offset of the first unacknowledged line */
	off_t punched;      /* the journal's blocks before this are freed (release_acked) */
	bool stop, thread_on;
	unsigned warned;
	pthread_t thread;
};

static void warn_once(struct hub_remote *r, unsigned bit, const char *fmt, ...) TC_PRINTF(3, 4);

static void warn_once(struct hub_remote *r, unsigned bit, const char *fmt, ...)
{
	if (!r->warn || (r->warned & bit))
		return;
	r->warned |= bit;
	va_list ap;
	va_start(ap, fmt);
	sbuf_vsay(r->warn, r->warn_ctx, fmt, ap);
	va_end(ap);
}

const char *hub_remote_job(const struct hub_remote *r)
{
	return r->job;
}

int hub_remote_append(struct hub_remote *r, const char *body, size_t len, struct tc_err *err)
{
	struct sbuf line = SBUF_INIT;
	pthread_mutex_lock(&r->mu);
	long long seq = r->seq + 1;
	sbuf_grow(&line, len + 32);
	sbuf_addf(&line, "{\"seq\":%lld,", seq);
	sbuf_add(&line, body, len);
	sbuf_addch(&line, '\n');
	int rc = 0;
	if (write_all(r->fd, line.buf, line.len) < 0) {
		rc = tc_error_errno(err, TC_ESYS, "hub: cannot append to the journal %s", r->path);
		/* a part written is cut off again, so the journal stays whole lines */
		if (ftruncate(r->fd, r->end) < 0)
			warn_once(r, WARN_JOURNAL, "hub: the journal %s is damaged", r->path);
	} else {
		r->seq = seq;
		r->end += (off_t)line.len;
		pthread_cond_signal(&r->wake);
	}
	pthread_mutex_unlock(&r->mu);
	sbuf_release(&line);
	return rc;
}

int hub_remote_kick(struct hub_remote *r, struct tc_err *err)
{
	(void)err;
	pthread_mutex_lock(&r->mu);
	pthread_cond_signal(&r->wake);
	pthread_mutex_unlock(&r->mu);
	return 0;
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	sbuf_add(arg, p, size * n);
	return size * n;
}

/* POST body to url; 0 and *acked, or an error (err says why). */
static int post(struct hub_remote *r, CURL *h, const char *url, const struct sbuf *body,
		long long *acked, struct tc_err *err)
{
	struct sbuf resp = SBUF_INIT;
	struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/x-ndjson");
	hdrs = curl_slist_append(hdrs, r->auth);
	hdrs = curl_slist_append(hdrs, "Expect:");
	int rc = 0;
	long status = 0;
	if (curl_easy_setopt(h, CURLOPT_URL, url) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, r->unix_path) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_POST, 1L) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body->buf) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body->len) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 5L) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_WRITEDATA, &resp) != CURLE_OK) {
		rc = tc_error(err, TC_EBACKEND, "hub: cannot set up the request");
	} else {
		CURLcode c = curl_easy_perform(h);
		if (c != CURLE_OK)
			rc = tc_error(err, TC_EBACKEND, "hub %s: %s", r->url, curl_easy_strerror(c));
		else if (curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK)
			rc = tc_error(err, TC_EBACKEND, "hub %s: no status", r->url);
	}
	if (!rc) {
		json_t *o = json_loadb(resp.buf ? resp.buf : "", resp.len, 0, NULL);
		json_t *a = json_object_get(o, "acked");
		if (status == 200 && json_is_integer(a)) {
			*acked = json_integer_value(a);
		} else {
			const char *msg = json_string_value(json_object_get(o, "error"));
			rc = tc_error(err, TC_EBACKEND, "hub %s: HTTP %ld%s%s", r->url, status,
				      msg ? ": " : "", msg ? msg : "");
		}
		json_decref(o);
	}
	curl_slist_free_all(hdrs);
	sbuf_release(&resp);
	return rc;
}

/* The seq of a journal line ({"seq":N,...), or -1. */
static long long line_seq(const char *p, const char *end)
{
	static const char pre[] = "{\"seq\":";
	size_t n = sizeof(pre) - 1;
	if ((size_t)(end - p) <= n || memcmp(p, pre, n))
		return -1;
	long long v = 0;
	for (p += n; p < end && *p >= '0' && *p <= '9'; p++)
		v = v * 10 + (*p - '0');
	return v;
}

/* Read whole lines from a journal at off, max bytes or at least one line. */
static int read_batch(struct hub_remote *r, int fd, const char *path, off_t off, off_t end,
		      struct sbuf *out, struct tc_err *err)
{
	size_t want = (size_t)(end - off);
	if (want > (size_t)r->max_batch)
		want = (size_t)r->max_batch;
	for (;;) {
		sbuf_reset(out);
		sbuf_grow(out, want);
		ssize_t got = pread(fd, out->buf, want, off);
		if (got < 0)
			return tc_error_errno(err, TC_ESYS, "hub: cannot read the journal %s", path);
		out->len = (size_t)got;
		out->buf[out->len] = '\0';
		char *nl = memrchr(out->buf, '\n', out->len);
		if (nl) {
			sbuf_setlen(out, (size_t)(nl - out->buf) + 1);
			return 0;
		}
		if ((off_t)want >= end - off)
			return tc_error(err, TC_ESYS, "hub: the journal %s ends inside a line", path);
		want *= 2; /* one line longer than a batch */
		if ((off_t)want > end - off)
			want = (size_t)(end - off);
	}
}

/* Bytes of the lines at the start of body whose seq is at most acked. */
static size_t acked_prefix(const struct sbuf *body, long long acked)
{
	const char *p = body->buf, *end = body->buf + body->len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			break;
		long long s = line_seq(p, nl);
		if (s < 0 || s > acked)
			break;
		p = nl + 1;
	}
	return (size_t)(p - body->buf);
}

/* A journal that reached its end at the hub: kept, renamed, so that nobody adopts it again. */
static void retire(const char *path)
{
	struct sbuf done = SBUF_INIT;
	sbuf_addf(&done, "%s.done", path);
	if (rename(path, done.buf) < 0)
		errno = 0; /* it is sent either way; a later adopter resends, the hub skips it */
	sbuf_release(&done);
}

/* The first line start at or after from (from itself when a line ends just before it). */
static off_t line_start(int fd, off_t from, off_t size)
{
	char buf[65536];
	if (from <= 0)
		return 0;
	for (off_t at = from - 1; at < size;) {
		ssize_t n = pread(fd, buf, sizeof(buf), at);
		if (n <= 0)
			break;
		char *nl = memchr(buf, '\n', (size_t)n);
		if (nl)
			return at + (nl - buf) + 1;
		at += n;
	}
	return size;
}

/*
 * The journals of this job in dir that no live process holds (a supervisor
 * killed before the hub took everything): their streams are sent on from
 * here, under their own names, so the hub's dedup keeps them exactly once.
 */
static void adopt(struct hub_remote *r, const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t alloc = 0;
	while (d && (e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (n <= 6 || strcmp(e->d_name + n - 6, ".jsonl"))
			continue;
		struct sbuf p = SBUF_INIT;
		sbuf_addf(&p, "%s/%s", dir, e->d_name);
		if (!strcmp(p.buf, r->path)) {
			sbuf_release(&p);
			continue;
		}
		int fd = open(p.buf, O_RDONLY | O_CLOEXEC);
		struct stat st;
		if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0 || fstat(fd, &st) < 0) {
			if (fd >= 0)
				close(fd);
			sbuf_release(&p);
			continue;
		}
		/* past the hole of what was acknowledged (release_acked), at a line's start */
		off_t from = lseek(fd, 0, SEEK_DATA);
		if (from < 0)
			from = st.st_size; /* all hole, or empty: nothing left to send */
		from = line_start(fd, from, st.st_size);
		XGROW(r->orph, r->norph + 1, alloc);
		struct sbuf u = SBUF_INIT;
		sbuf_addf(&u, "%s%.*s", r->base, (int)(n - 6), e->d_name);
		r->orph[r->norph++] = (struct orphan){ sbuf_detach(&p), sbuf_detach(&u), fd, from,
						       st.st_size };
	}
	if (d)
		closedir(d);
}

static void orphan_drop(struct hub_remote *r, bool sent)
{
	struct orphan *o = &r->orph[0];
	if (sent)
		retire(o->path);
	close(o->fd);
	free(o->path);
	free(o->url);
	memmove(r->orph, r->orph + 1, (r->norph - 1) * sizeof(*r->orph));
	r->norph--;
}

/* One batch of the first adopted journal; false when it failed (back off). */
static bool orphan_batch(struct hub_remote *r, CURL *h, struct sbuf *body)
{
	struct orphan *o = &r->orph[0];
	struct tc_err err = TC_ERR_INIT;
	long long acked = 0;
	int rc = o->off < o->size ? read_batch(r, o->fd, o->path, o->off, o->size, body, &err) : 0;
	if (!rc && o->off < o->size)
		rc = post(r, h, o->url, body, &acked, &err);
	if (rc == TC_ESYS) { /* a torn journal: what it holds up to there went */
		orphan_drop(r, false);
		tc_err_release(&err);
		return true;
	}
	tc_err_release(&err);
	if (rc)
		return false;
	size_t adv = o->off < o->size ? acked_prefix(body, acked) : 0;
	o->off += (off_t)adv;
	if (o->off >= o->size)
		orphan_drop(r, true);
	return adv > 0 || o->off >= o->size;
}

/*
 * What the hub acknowledged need not take disk space: a long job's journal
 * would grow by its every metric.  Its blocks are freed (a hole, the offsets
 * stay), every 1 MiB; adopt() starts after the hole.
 */
static void release_acked(struct hub_remote *r, off_t mark)
{
	off_t upto = mark & ~(off_t)4095;
	if (upto - r->punched < (1 << 20))
		return;
	/* where holes are not supported the journal just keeps its blocks */
	if (fallocate(r->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, upto) < 0)
		errno = 0;
	r->punched = upto;
}

/*
 * Is the hub's Unix socket gone: no such file, or nothing listens on it
 * (a server killed without its cleanup)?  false where there is none or
 * where it cannot tell: then the whole wait applies.  why: what was seen.
 */
static bool socket_gone(const char *path, struct sbuf *why)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	if (!path || strlen(path) >= sizeof(a.sun_path))
		return false;
	struct stat sb;
	if (stat(path, &sb) < 0) {
		if (errno != ENOENT)
			return false;
		sbuf_addf(why, "%s no longer exists", path);
		return true;
	}
	memcpy(a.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	bool gone = connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 && errno == ECONNREFUSED;
	if (gone)
		sbuf_addf(why, "nothing listens on %s", path);
	close(fd);
	return gone;
}

/*
 * A closing sink (stop) whose hub's socket is gone waits at most
 * HUB_GONE_WAIT more seconds, and says so once.
 */
static void shorten_if_gone(struct hub_remote *r, double *deadline)
{
	double soon = now_wall() + HUB_GONE_WAIT;
	struct sbuf why = SBUF_INIT;
	if (*deadline > soon && socket_gone(r->unix_path, &why)) {
		*deadline = soon;
		warn_once(r, WARN_GONE, "hub: %s: the server is gone; waiting %d s for it, not %d"
			  " (the journal stays in %s for the server that comes back)", why.buf,
			  HUB_GONE_WAIT, r->wait_s, r->path);
	}
	sbuf_release(&why);
}

static void *sender(void *arg)
{
	struct hub_remote *r = arg;
	CURL *h = curl_easy_init();
	struct sbuf body = SBUF_INIT;
	struct http_backoff bo = { 200, 5000, true };
	int fails = 0;
	double deadline = 0;
	for (;;) {
		pthread_mutex_lock(&r->mu);
		bool stop = r->stop, idle = r->mark == r->end;
		pthread_mutex_unlock(&r->mu);
		if (stop && !deadline)
			deadline = now_wall() + r->wait_s;
		if (h && r->norph && idle) {
			/* our own records first; journals of processes gone when there are none */
			if (orphan_batch(r, h, &body)) {
				fails = 0;
			} else {
				if (stop)
					shorten_if_gone(r, &deadline);
				if (stop && now_wall() >= deadline)
					break;
				http_sleep_ms(http_backoff_ms(&bo, ++fails));
			}
			continue;
		}
		pthread_mutex_lock(&r->mu);
		while (!r->stop && r->mark == r->end && !(h && r->norph)) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += 1;
			pthread_cond_timedwait(&r->wake, &r->mu, &ts);
		}
		if (r->stop && !deadline)
			deadline = now_wall() + r->wait_s;
		bool done = (r->mark == r->end && (!r->norph || !h)) ||
			    (r->stop && now_wall() >= deadline);
		off_t off = r->mark, end = r->end;
		pthread_mutex_unlock(&r->mu);
		if (done)
			break;
		struct tc_err err = TC_ERR_INIT;
		long long acked = 0;
		int rc = !h ? tc_error(&err, TC_EBACKEND, "hub: libcurl failed to start") : 0;
		if (!rc && fdatasync(r->fd) < 0 && errno != EINVAL)
			warn_once(r, WARN_JOURNAL, "hub: cannot sync the journal %s: %s", r->path,
				  strerror(errno));
		if (!rc)
			rc = read_batch(r, r->fd, r->path, off, end, &body, &err);
		if (!rc)
			rc = post(r, h, r->url, &body, &acked, &err);
		if (rc) {
			warn_once(r, WARN_SEND, "%s (the journal keeps every record; resending)", err.msg);
			tc_err_release(&err);
			if (deadline)
				shorten_if_gone(r, &deadline);
			http_sleep_ms(http_backoff_ms(&bo, ++fails));
			continue;
		}
		if (fails)
			r->warned &= ~WARN_SEND; /* a later outage is news again */
		fails = 0;
		size_t adv = acked_prefix(&body, acked);
		pthread_mutex_lock(&r->mu);
		if (acked > r->acked)
			r->acked = acked;
		r->mark = off + (off_t)adv;
		pthread_cond_broadcast(&r->progress);
		pthread_mutex_unlock(&r->mu);
		release_acked(r, off + (off_t)adv);
		if (!adv) /* the hub took none of it: not at once again */
			http_sleep_ms(http_backoff_ms(&bo, 1));
	}
	sbuf_release(&body);
	if (h)
		curl_easy_cleanup(h);
	return NULL;
}

void hub_remote_close(struct hub_remote *r)
{
	if (!r)
		return;
	if (r->thread_on) {
		pthread_mutex_lock(&r->mu);
		r->stop = true;
		pthread_cond_signal(&r->wake);
		pthread_mutex_unlock(&r->mu);
		pthread_join(r->thread, NULL);
	}
	while (r->norph)
		orphan_drop(r, false);
	free(r->orph);
	if (r->fd >= 0 && r->mark == r->end && r->end > 0)
		retire(r->path);
	else if (r->fd >= 0 && r->end == 0 && unlink(r->path) < 0)
		errno = 0; /* nothing was ever in it: nothing to keep (a flush's own) */
	if (r->mark < r->end && r->warn) {
		struct sbuf sb = SBUF_INIT;
		sbuf_addf(&sb, "warning: hub %s did not acknowledge records %lld..%lld in %d s;"
			  " they stay in %s", r->url, r->acked + 1, r->seq, r->wait_s, r->path);
		r->warn(r->warn_ctx, sb.buf);
		sbuf_release(&sb);
	}
	if (r->fd >= 0)
		close(r->fd);
	pthread_mutex_destroy(&r->mu);
	pthread_cond_destroy(&r->wake);
	pthread_cond_destroy(&r->progress);
	free(r->url);
	if (r->auth) {
		memset(r->auth, 0, strlen(r->auth));
		free(r->auth);
	}
	free(r->job);
	free(r->path);
	free(r->base);
	free(r->unix_path);
	free(r);
}

static bool name_ok(const char *s)
{
	if (!s || !*s || strlen(s) > 128)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      *s == '-' || *s == '_' || *s == '.'))
			return false;
	return true;
}

int sink_remote_open(const struct hub_remote_opts *o, struct sink **out, struct tc_err *err)
{
	*out = NULL;
	if (!o->url || strncmp(o->url, "http://", 7) != 0)
		return tc_error(err, TC_EUSAGE, "hub: the URL must be http://ADDR:PORT, not '%s'",
				o->url ? o->url : "");
	if (!o->secret || !*o->secret || strchr(o->secret, '\n') || strchr(o->secret, '\r'))
		return tc_error(err, TC_EUSAGE, "hub: no usable secret for job %s", o->job_id);
	if (!name_ok(o->job_id) || !name_ok(o->stream))
		return tc_error(err, TC_EUSAGE, "hub: bad job or stream name");
	int rc = http_init(err);
	if (rc || (rc = mkdir_p(o->journal_dir, err)))
		return rc;
	struct hub_remote *r = xcalloc(1, sizeof(*r));
	struct sbuf sb = SBUF_INIT;
	const char *base = o->url;
	size_t bl = strlen(base);
	while (bl && base[bl - 1] == '/')
		bl--;
	sbuf_addf(&sb, "%.*s/api/v1/hub/%s/events?stream=", (int)bl, base, o->job_id);
	r->base = xstrdup(sb.buf);
	sbuf_adds(&sb, o->stream);
	r->url = sbuf_detach(&sb);
	sbuf_addf(&sb, "X-Trainctl-Hub-Secret: %s", o->secret);
	r->auth = sbuf_detach(&sb);
	r->job = xstrdup(o->job_id);
	r->unix_path = o->unix_path && *o->unix_path ? xstrdup(o->unix_path) : NULL;
	sbuf_addf(&sb, "%s/%s.jsonl", o->journal_dir, o->stream);
	r->path = sbuf_detach(&sb);
	r->wait_s = o->wait_s > 0 ? o->wait_s : HUB_WAIT_DEFAULT;
	r->max_batch = o->max_batch > 0 ? o->max_batch : 4 << 20;
	r->warn = o->warn;
	r->warn_ctx = o->warn_ctx;
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->wake, NULL);
	pthread_cond_init(&r->progress, NULL);
	/* a new stream each process (note 3): a journal left by a namesake is replaced */
	r->fd = open(r->path, O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
	if (r->fd < 0 || flock(r->fd, LOCK_EX | LOCK_NB) < 0) {
		rc = tc_error_errno(err, TC_ESYS, "hub: cannot create the journal %s", r->path);
		hub_remote_close(r);
		return rc;
	}
	/* held while we live: a later process of the job adopts it only once we are gone */
	adopt(r, o->journal_dir);
	/*
	 * The sender takes no signals: they are the supervisor's (its signalfd),
	 * and one delivered here (SIGUSR1 from Slurm) would end the process.
	 */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int prc = pthread_create(&r->thread, NULL, sender, r);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (prc != 0) {
		errno = prc;
		rc = tc_error_errno(err, TC_ESYS, "hub: cannot start the sender thread");
		hub_remote_close(r);
		return rc;
	}
	r->thread_on = true;
	*out = sink_remote(r);
	return 0;
}

void sink_remote_counts(const struct sink *k, long long *appended, long long *acked)
{
	struct hub_remote *r = sink_remote_of(k);
	*appended = *acked = 0;
	if (!r)
		return;
	pthread_mutex_lock(&r->mu);
	*appended = r->seq;
	*acked = r->acked;
	pthread_mutex_unlock(&r->mu);
}

const char *sink_remote_stream(const struct sink *k)
{
	struct hub_remote *r = sink_remote_of(k);
	const char *p = r ? strstr(r->url, "?stream=") : NULL;
	return p ? p + strlen("?stream=") : NULL;
}

static char *secret_from_env(struct tc_err *err)
{
	const char *v = getenv("TRAINCTL_HUB_SECRET");
	if (v && *v)
		return xstrdup(v);
	const char *f = getenv("TRAINCTL_HUB_SECRET_FILE");
	if (!f || !*f) {
		tc_error(err, TC_EUSAGE, "hub: TRAINCTL_HUB_URL is set but neither TRAINCTL_HUB_SECRET"
					 " nor TRAINCTL_HUB_SECRET_FILE");
		return NULL;
	}
	struct sbuf sb = SBUF_INIT;
	if (read_file(f, &sb, err)) {
		sbuf_release(&sb);
		return NULL;
	}
	sbuf_rtrim(&sb);
	return sbuf_detach(&sb);
}

int sink_from_env(const char *home, const char *job_id, const char *stream,
		  void (*warn)(void *, const char *), void *warn_ctx, struct sink **out,
		  struct tc_err *err)
{
	*out = NULL;
	const char *url = getenv("TRAINCTL_HUB_URL");
	if (!url || !*url)
		return 0;
	char *secret = secret_from_env(err);
	if (!secret)
		return err->code;
	long wait = 0;
	const char *w = getenv("TRAINCTL_HUB_WAIT");
	if (w && !parse_long(w, 1, 7L * 24 * 3600, &wait))
		wait = 0;
	struct sbuf dir = SBUF_INIT;
	/* a root server's job of another account journals in its own run folder (slurm.c) */
	const char *jd = getenv("TRAINCTL_HUB_JOURNAL");
	if (jd && *jd)
		sbuf_adds(&dir, jd);
	else
		sbuf_addf(&dir, "%s/journal/%s", home, job_id);
	struct hub_remote_opts o = { .url = url, .secret = secret, .job_id = job_id,
				     .stream = stream, .journal_dir = dir.buf, .wait_s = (int)wait,
				     .unix_path = getenv("TRAINCTL_HUB_SOCKET"),
				     .warn = warn, .warn_ctx = warn_ctx };
	int rc = sink_remote_open(&o, out, err);
	memset(secret, 0, strlen(secret));
	free(secret);
	sbuf_release(&dir);
	return rc;
}

/*
 * Journals of the job in dir still to send (*.jsonl) that nobody sends: one
 * a live process holds (another node's flush, where nodes share the folder)
 * is that process's to send.
 */
static int journals_left(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	while (d && (e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (l <= 6 || strcmp(e->d_name + l - 6, ".jsonl") != 0)
			continue;
		int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		n += fd < 0 || flock(fd, LOCK_SH | LOCK_NB) == 0 || errno != EWOULDBLOCK;
		if (fd >= 0)
			close(fd);
	}
	if (d)
		closedir(d);
	return n;
}

int hub_flush_main(const char *home, const char *job_id, int *left, struct tc_err *err)
{
	struct sbuf stream = SBUF_INIT, dir = SBUF_INIT;
	char host[64] = "";
	if (gethostname(host, sizeof(host) - 1) < 0)
		host[0] = '\0';
	for (char *p = host; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '-')
			*p = '-';
	sbuf_addf(&stream, "flush.%s.%ld", *host ? host : "host", (long)getpid());
	const char *jd = getenv("TRAINCTL_HUB_JOURNAL"); /* where sink_from_env journals */
	if (jd && *jd)
		sbuf_adds(&dir, jd);
	else
		sbuf_addf(&dir, "%s/journal/%s", home, job_id);
	struct sink *k = NULL;
	*left = 0;
	int rc = sink_from_env(home, job_id, stream.buf, NULL, NULL, &k, err);
	if (!rc && !k)
		rc = tc_error(err, TC_EUSAGE, "hub --flush: TRAINCTL_HUB_URL is not set");
	/* adopted at the open; the close sends them, within TRAINCTL_HUB_WAIT */
	sink_close(k);
	if (!rc)
		*left = journals_left(dir.buf);
	sbuf_release(&stream);
	sbuf_release(&dir);
	return rc;
}

int hub_secret_new(char **out, struct tc_err *err)
{
	unsigned char raw[32];
	*out = NULL;
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return tc_error_errno(err, TC_ESYS, "cannot open /dev/urandom");
	ssize_t n = read(fd, raw, sizeof(raw));
	close(fd);
	if (n != (ssize_t)sizeof(raw))
		return tc_error(err, TC_ESYS, "cannot read /dev/urandom");
	char *hex = xmalloc(2 * sizeof(raw) + 1);
	hex_encode(hex, raw, sizeof(raw));
	*out = hex;
	return 0;
}

void hub_secret_hash(const char *secret, struct sbuf *out)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	char hex[2 * EVP_MAX_MD_SIZE + 1];
	if (!EVP_Digest(secret, strlen(secret), md, &n, EVP_sha256(), NULL))
		n = 0;
	hex_encode(hex, md, n);
	hex[2 * n] = '\0';
	sbuf_add(out, hex, 2 * n);
}

static int hub_get(const char *job, const char *what, int timeout_s, json_t **out,
		   struct tc_err *err);

int hub_job_status_json(const char *job, int timeout_s, json_t **out, struct tc_err *err)
{
	return hub_get(job, "status", timeout_s, out, err);
}

int hub_job_report(const char *job, int timeout_s, json_t **out, struct tc_err *err)
{
	return hub_get(job, "report", timeout_s, out, err);
}

static int hub_get(const char *job, const char *what, int timeout_s, json_t **out,
		   struct tc_err *err)
{
	*out = NULL;
	const char *url = getenv("TRAINCTL_HUB_URL");
	if (!url || !*url)
		return tc_error(err, TC_EUSAGE, "hub: TRAINCTL_HUB_URL is not set");
	char *secret = secret_from_env(err);
	if (!secret)
		return err->code;
	int rc = http_init(err);
	CURL *h = rc ? NULL : curl_easy_init();
	if (!rc && !h)
		rc = tc_error(err, TC_EBACKEND, "hub: libcurl failed to start");
	struct sbuf u = SBUF_INIT, auth = SBUF_INIT, resp = SBUF_INIT;
	size_t bl = strlen(url);
	while (bl && url[bl - 1] == '/')
		bl--;
	sbuf_addf(&u, "%.*s/api/v1/hub/%s/%s", (int)bl, url, job, what);
	sbuf_addf(&auth, "X-Trainctl-Hub-Secret: %s", secret);
	struct curl_slist *hdrs = curl_slist_append(NULL, auth.buf);
	long status = 0;
	const char *sock = getenv("TRAINCTL_HUB_SOCKET");
	if (!rc && (curl_easy_setopt(h, CURLOPT_URL, u.buf) != CURLE_OK ||
		    curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, sock && *sock ? sock : NULL) != CURLE_OK ||
		    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs) != CURLE_OK ||
		    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
		    curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)(timeout_s > 0 ? timeout_s : 5)) != CURLE_OK ||
		    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body) != CURLE_OK ||
		    curl_easy_setopt(h, CURLOPT_WRITEDATA, &resp) != CURLE_OK))
		rc = tc_error(err, TC_EBACKEND, "hub: cannot set up the request");
	if (!rc) {
		CURLcode c = curl_easy_perform(h);
		if (c != CURLE_OK)
			rc = tc_error(err, TC_EBACKEND, "hub %s: %s", url, curl_easy_strerror(c));
		else if (curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK ||
			 status != 200)
			rc = tc_error(err, TC_EBACKEND, "hub %s: HTTP %ld", url, status);
	}
	if (!rc) {
		json_t *o = json_loadb(resp.buf ? resp.buf : "", resp.len, 0, NULL);
		if (!json_is_object(o)) {
			json_decref(o);
			rc = tc_error(err, TC_EBACKEND, "hub %s: not a status", url);
		} else {
			*out = o;
		}
	}
	curl_slist_free_all(hdrs);
	if (h)
		curl_easy_cleanup(h);
	memset(auth.buf, 0, auth.len);
	sbuf_release(&auth);
	sbuf_release(&u);
	sbuf_release(&resp);
	memset(secret, 0, strlen(secret));
	free(secret);
	return rc;
}

int hub_job_status(const char *job, int timeout_s, enum job_stop *stop, int *restarts,
		   struct tc_err *err)
{
	*stop = JOB_STOP_NONE;
	*restarts = 0;
	json_t *o = NULL;
	int rc = hub_job_status_json(job, timeout_s, &o, err);
	if (!rc) {
		*stop = job_stop_parse(json_string_value(json_object_get(o, "stop")));
		json_t *r = json_object_get(o, "restarts");
		*restarts = json_is_integer(r) ? (int)json_integer_value(r) : 0;
	}
	json_decref(o);
	return rc;
}

char *hub_env_secret(struct tc_err *err)
{
	return secret_from_env(err);
}
