/*
 * relay.c -- node 0's parked connections to the server for its endpoints
 * (relay.h).
 */
#include "endpoint/relay.h"
#include "core/sock.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ANSWER_MAX (16u << 10)
#define DIAL_MS 5000     /* a connection to the server, and its answer */
#define BACKOFF_MAX_MS 10000
#define STACK_BYTES (256u << 10)

/* ---- pure parts ---- */

int ep_relay_parse_url(const char *url, char **host, char **port)
{
	*host = *port = NULL;
	static const char pre[] = "http://";
	if (!url || strncmp(url, pre, sizeof(pre) - 1))
		return -1;
	const char *h = url + sizeof(pre) - 1;
	size_t n = strcspn(h, "/?#");
	const char *colon = memchr(h, ':', n);
	if (!colon || colon == h)
		return -1;
	const char *p = colon + 1;
	size_t pn = (size_t)(h + n - p);
	long v;
	char *ps = xstrndup(p, pn);
	if (!pn || !parse_long(ps, 1, 65535, &v)) {
		free(ps);
		return -1;
	}
	*host = xstrndup(h, (size_t)(colon - h));
	*port = ps;
	return 0;
}

void ep_relay_request(struct sbuf *out, const char *hostport, const char *job, const char *name,
		      const char *secret)
{
	sbuf_addf(out,
		  "GET /api/v1/hub/%s/relay/%s HTTP/1.1\r\nHost: %s\r\n"
		  "X-Trainctl-Hub-Secret: %s\r\nConnection: Upgrade\r\nUpgrade: trainctl-relay\r\n\r\n",
		  job, name, hostport, secret);
}

int ep_relay_parse_answer(const char *buf, size_t n, unsigned *status, size_t *head_len)
{
	*status = 0;
	*head_len = 0;
	const char *end = NULL;
	for (size_t i = 0; i + 3 < n; i++)
		if (!memcmp(buf + i, "\r\n\r\n", 4)) {
			end = buf + i + 4;
			break;
		}
	if (n >= 5 && memcmp(buf, "HTTP/", 5))
		return -1;
	if (!end)
		return n > ANSWER_MAX ? -1 : 0;
	unsigned maj, min, st;
	char head[32];
	size_t hn = (size_t)(end - buf) < sizeof(head) - 1 ? (size_t)(end - buf) : sizeof(head) - 1;
	memcpy(head, buf, hn);
	head[hn] = '\0';
	if (sscanf(head, "HTTP/%u.%u %u", &maj, &min, &st) != 3 || st < 100 || st > 999)
		return -1;
	*status = st;
	*head_len = (size_t)(end - buf);
	return 1;
}

/* ---- the threads ---- */

struct tgt {
	char *name;
	int port;
	int parked;   /* connections answered 101 and waiting */
	int nthreads; /* alive */
};

struct worker {
	struct worker *next;
	struct ep_relay *r;
	struct tgt *tg;
	pthread_t t;
	int hub_fd, local_fd; /* -1: none (stop shuts them down) */
	bool done;
};

struct ep_relay {
	pthread_mutex_t mu;
	pthread_cond_t cv; /* stopping */
	bool stopping;
	char *host, *port, *hostport, *secret, *job;
	struct tgt *tg;
	size_t n;
	int pool, max;
	struct worker *workers;
	void (*say)(void *ctx, const char *msg);
	void *say_ctx;
	unsigned said; /* the kinds of trouble said once */
};

enum { SAID_DIAL = 1, SAID_REFUSED = 2, SAID_LOCAL = 4, SAID_UP = 8 };

static void say_once(struct ep_relay *r, unsigned kind, const char *fmt, ...) TC_PRINTF(3, 4);
static void say_once(struct ep_relay *r, unsigned kind, const char *fmt, ...)
{
	pthread_mutex_lock(&r->mu);
	bool first = !(r->said & kind);
	r->said |= kind;
	pthread_mutex_unlock(&r->mu);
	if (!first || !r->say)
		return;
	va_list ap;
	va_start(ap, fmt);
	sbuf_vsay(r->say, r->say_ctx, fmt, ap);
	va_end(ap);
}

static bool stopping(struct ep_relay *r)
{
	pthread_mutex_lock(&r->mu);
	bool s = r->stopping;
	pthread_mutex_unlock(&r->mu);
	return s;
}

/* Sleep ms, or less when the relay stops. */
static void nap(struct ep_relay *r, int ms)
{
	struct timespec until = mono_deadline(ms);
	pthread_mutex_lock(&r->mu);
	while (!r->stopping && pthread_cond_timedwait(&r->cv, &r->mu, &until) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&r->mu);
}

/* Set the worker's socket (under the lock: stop shuts down what it sees). */
static void set_fd(struct worker *w, int *slot, int fd)
{
	pthread_mutex_lock(&w->r->mu);
	*slot = fd;
	pthread_mutex_unlock(&w->r->mu);
}

static void drop_fd(struct worker *w, int *slot)
{
	pthread_mutex_lock(&w->r->mu);
	int fd = *slot;
	*slot = -1;
	pthread_mutex_unlock(&w->r->mu);
	if (fd >= 0)
		close(fd);
}

/* Wait until fd has events, in short slices so that a stop is seen; false: stopped or timed out. */
static bool wait_fd(struct ep_relay *r, int fd, short events, int timeout_ms)
{
	int64_t until = timeout_ms < 0 ? -1 : now_mono_ms() + timeout_ms;
	for (;;) {
		if (stopping(r))
			return false;
		struct pollfd pf = { .fd = fd, .events = events };
		int rc = poll(&pf, 1, 500);
		if (rc > 0)
			return true;
		if (rc < 0 && errno != EINTR)
			return false;
		if (until >= 0 && now_mono_ms() >= until)
			return false;
	}
}

/* A TCP connection to the server, registered in w->hub_fd; -1 on failure. */
static int dial(struct worker *w)
{
	struct ep_relay *r = w->r;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai = NULL;
	int gai = getaddrinfo(r->host, r->port, &hints, &ai);
	if (gai) {
		say_once(r, SAID_DIAL, "warning: endpoint relay: cannot resolve %s: %s", r->host,
			 gai_strerror(gai));
		return -1;
	}
	int fd = -1;
	for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			continue;
		set_fd(w, &w->hub_fd, fd);
		int rc = connect(fd, a->ai_addr, a->ai_addrlen);
		int e = 0;
		socklen_t el = sizeof(e);
		if (rc < 0 && errno == EINPROGRESS && wait_fd(r, fd, POLLOUT, DIAL_MS) &&
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) == 0 && e == 0)
			rc = 0;
		else if (rc < 0 && !e)
			e = errno;
		int fl = fcntl(fd, F_GETFL);
		if (rc == 0 && (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0))
			rc = -1;
		if (rc < 0) {
			if (!stopping(r))
				say_once(r, SAID_DIAL, "warning: endpoint relay: cannot reach the server at"
					 " %s: %s (trying again)", r->hostport, strerror(e ? e : errno));
			drop_fd(w, &w->hub_fd);
			fd = -1;
		}
	}
	freeaddrinfo(ai);
	if (fd >= 0) {
		int one = 1;
		if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) < 0)
			errno = 0;
	}
	return fd;
}

static void *work(void *arg);

/* One more worker for tg (under r->mu); joins the workers that are done. */
static void spawn_locked(struct ep_relay *r, struct tgt *tg)
{
	/* once stopping, the list is ep_relay_stop's to walk */
	if (r->stopping)
		return;
	for (struct worker **pp = &r->workers; *pp;) {
		struct worker *w = *pp;
		if (w->done) {
			pthread_join(w->t, NULL);
			*pp = w->next;
			free(w);
		} else {
			pp = &w->next;
		}
	}
	if (tg->nthreads >= r->max)
		return;
	struct worker *w = xcalloc(1, sizeof(*w));
	*w = (struct worker){ .r = r, .tg = tg, .hub_fd = -1, .local_fd = -1 };
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, STACK_BYTES);
	if (pthread_create(&w->t, &at, work, w) == 0) {
		w->next = r->workers;
		r->workers = w;
		tg->nthreads++;
	} else {
		free(w);
	}
	pthread_attr_destroy(&at);
}

/*
 * Connect, ask to be parked, and read the answer: the socket (in w->hub_fd)
 * with any bytes after the answer's head in pre, or -1 with *status (0: no
 * answer).
 */
static int park(struct worker *w, struct sbuf *pre, unsigned *status)
{
	struct ep_relay *r = w->r;
	*status = 0;
	int fd = dial(w);
	if (fd < 0)
		return -1;
	struct sbuf req = SBUF_INIT, in = SBUF_INIT;
	ep_relay_request(&req, r->hostport, r->job, w->tg->name, r->secret);
	int ok = sock_send_all(fd, req.buf, req.len) == 0 ? 0 : -1;
	memset(req.buf, 0, req.len); /* the secret */
	sbuf_release(&req);
	size_t head = 0;
	int64_t until = now_mono_ms() + DIAL_MS;
	while (!ok) {
		int got = ep_relay_parse_answer(in.buf, in.len, status, &head);
		if (got)
			ok = got > 0 ? 1 : -1;
		else if (!wait_fd(r, fd, POLLIN, (int)(until - now_mono_ms() > 0 ? until - now_mono_ms() : 0)))
			ok = -1;
		else {
			char buf[4096];
			ssize_t n = recv(fd, buf, sizeof(buf), 0);
			if (n > 0)
				sbuf_add(&in, buf, (size_t)n);
			else if (!(n < 0 && errno == EINTR))
				ok = -1;
		}
	}
	if (ok > 0 && *status == 101) {
		sbuf_add(pre, in.buf + head, in.len - head);
	} else {
		drop_fd(w, &w->hub_fd);
		fd = -1;
	}
	sbuf_release(&in);
	return fd;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	struct ep_relay *r = w->r;
	struct tgt *tg = w->tg;
	int backoff = 0;
	bool quit = false;
	while (!quit && !stopping(r)) {
		if (backoff)
			nap(r, backoff);
		struct sbuf pre = SBUF_INIT;
		unsigned status;
		int fd = park(w, &pre, &status);
		if (fd < 0) {
			sbuf_release(&pre);
			if (status == 410)
				break; /* the job has ended, for the server */
			if (status == 404) {
				/* a hub that is not `trainctl server` (trainctl run's): no proxy to serve */
				say_once(r, SAID_REFUSED, "endpoint relay: the hub at %s has no relay route:"
					 " the endpoints are reached on this node only", r->hostport);
				break;
			}
			if (status && status != 429 && !stopping(r))
				say_once(r, SAID_REFUSED, "warning: endpoint relay: the server at %s refused"
					 " a connection for endpoint %s (HTTP %u; trying again)", r->hostport,
					 tg->name, status);
			/* a server that will not know the job's secret: slower */
			int cap = status == 401 ? 4 * BACKOFF_MAX_MS : BACKOFF_MAX_MS;
			backoff = backoff ? (backoff * 2 > cap ? cap : backoff * 2) : 1000;
			continue;
		}
		backoff = 0;
		say_once(r, SAID_UP, "endpoint relay: connections parked at %s", r->hostport);
		pthread_mutex_lock(&r->mu);
		tg->parked++;
		pthread_mutex_unlock(&r->mu);
		bool woke = pre.len || wait_fd(r, fd, POLLIN, -1);
		char c;
		ssize_t peek = pre.len ? 1 : woke ? recv(fd, &c, 1, MSG_PEEK) : 0;
		pthread_mutex_lock(&r->mu);
		tg->parked--;
		/* in use: another takes its place */
		if (peek > 0 && tg->parked < r->pool)
			spawn_locked(r, tg);
		pthread_mutex_unlock(&r->mu);
		if (peek <= 0) {
			/* the server closed it (it restarts, or let it go): park anew */
			drop_fd(w, &w->hub_fd);
			sbuf_release(&pre);
			backoff = 200;
			continue;
		}
		int lfd = sock_connect_local(tg->port);
		if (lfd < 0) {
			say_once(r, SAID_LOCAL, "warning: endpoint relay: endpoint %s does not answer on"
				 " 127.0.0.1:%d: %s", tg->name, tg->port, strerror(errno));
		} else {
			set_fd(w, &w->local_fd, lfd);
			if (!pre.len || sock_send_all(lfd, pre.buf, pre.len) == 0)
				sock_pump(fd, lfd);
			shutdown(lfd, SHUT_RDWR);
			drop_fd(w, &w->local_fd);
		}
		shutdown(fd, SHUT_RDWR);
		drop_fd(w, &w->hub_fd);
		sbuf_release(&pre);
		pthread_mutex_lock(&r->mu);
		/* enough others parked: this one ends (the pool grows for bursts only) */
		quit = tg->parked >= r->pool;
		pthread_mutex_unlock(&r->mu);
	}
	pthread_mutex_lock(&r->mu);
	tg->nthreads--;
	w->done = true;
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

int ep_relay_start(const struct ep_relay_opts *o, struct ep_relay **out, struct tc_err *err)
{
	*out = NULL;
	struct ep_relay *r = xcalloc(1, sizeof(*r));
	if (ep_relay_parse_url(o->url, &r->host, &r->port)) {
		free(r);
		return tc_error(err, TC_EUSAGE, "endpoint relay: the hub's URL '%s' is not"
				" http://HOST:PORT", o->url ? o->url : "");
	}
	struct sbuf hp = SBUF_INIT;
	sbuf_addf(&hp, "%s:%s", r->host, r->port);
	r->hostport = sbuf_detach(&hp);
	r->secret = xstrdup(o->secret);
	r->job = xstrdup(o->job_id);
	r->pool = o->pool > 0 ? o->pool : 2;
	r->max = o->max > 0 ? o->max : 8;
	if (r->max < r->pool)
		r->max = r->pool;
	r->say = o->say;
	r->say_ctx = o->say_ctx;
	pthread_mutex_init(&r->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->cv, &ca);
	pthread_condattr_destroy(&ca);
	r->n = o->ntargets;
	r->tg = xcalloc(r->n ? r->n : 1, sizeof(*r->tg));
	for (size_t i = 0; i < r->n; i++)
		r->tg[i] = (struct tgt){ xstrdup(o->targets[i].name), o->targets[i].port, 0, 0 };
	pthread_mutex_lock(&r->mu);
	for (size_t i = 0; i < r->n; i++)
		for (int k = 0; k < r->pool; k++)
			spawn_locked(r, &r->tg[i]);
	pthread_mutex_unlock(&r->mu);
	*out = r;
	return 0;
}

int ep_relay_parked(struct ep_relay *r)
{
	int n = 0;
	pthread_mutex_lock(&r->mu);
	for (size_t i = 0; i < r->n; i++)
		n += r->tg[i].parked;
	pthread_mutex_unlock(&r->mu);
	return n;
}

void ep_relay_stop(struct ep_relay *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->mu);
	r->stopping = true;
	for (struct worker *w = r->workers; w; w = w->next) {
		if (w->hub_fd >= 0)
			shutdown(w->hub_fd, SHUT_RDWR);
		if (w->local_fd >= 0)
			shutdown(w->local_fd, SHUT_RDWR);
	}
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	/* no worker is added once stopping is set: the list is ours to walk */
	for (struct worker *w = r->workers, *next; w; w = next) {
		next = w->next;
		pthread_join(w->t, NULL);
		free(w);
	}
	for (size_t i = 0; i < r->n; i++)
		free(r->tg[i].name);
	free(r->tg);
	memset(r->secret, 0, strlen(r->secret));
	free(r->secret);
	free(r->host);
	free(r->port);
	free(r->hostport);
	free(r->job);
	pthread_mutex_destroy(&r->mu);
	pthread_cond_destroy(&r->cv);
	free(r);
}
