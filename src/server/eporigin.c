/*
 * eporigin.c -- one origin per endpoint (docs/endpoints.md, docs/security.md).
 *
 * A proxied endpoint serves pages the job wrote (Jupyter's, or any
 * command's): served on the API's origin, their JavaScript would run with
 * the session of whoever opens them, an admin's too.  With `trainctl
 * server --endpoint-ports LO-HI` each endpoint a browser opens gets a
 * listener of its own on a port of that range, so its pages run in an
 * origin of their own:
 *
 *   API origin, GET /jobs/J/endpoints/N/REST with the session cookie
 *     -> 302 http://HOST:P/.trainctl/enter?ticket=T
 *        (T: random, one use, EPORIGIN_TICKET_SECONDS, bound to J, N, P,
 *        the caller and REST; kept here in memory, hashed)
 *   endpoint origin (port P), GET /.trainctl/enter?ticket=T
 *     -> 303 /jobs/J/endpoints/N/REST, Set-Cookie trainctl_endpoint=
 *        HEX(USER).ADMIN.EXPIRES.MAC (HttpOnly, SameSite=Strict, Path=
 *        /jobs/J/endpoints/N; MAC: HMAC-SHA256 under a key made at start,
 *        over user, admin, expiry, J, N and P)
 *   endpoint origin, /jobs/J/endpoints/N/... with that cookie
 *     -> proxy.c, as the cookie's user (the owner of J or an admin)
 *
 * INVARIANTS
 *  (1) A listener serves one endpoint of one job: any other path is 404.
 *      It never serves the API or the UI and takes no API credential: a
 *      bearer token or the session cookie proves nothing here (the proxy
 *      strips both before the endpoint).
 *  (2) The API never takes the endpoint cookie (it reads trainctl_session
 *      only), and the cookie of one endpoint opens no other: the MAC names
 *      the job, the endpoint and the port.
 *  (3) A state-changing request or a WebSocket must come from the
 *      listener's own origin (Origin, Sec-Fetch-Site); the API refuses
 *      this origin's in turn (guard.c: the Origin names another port).  No
 *      CORS header is ever added.
 *  (4) A listener closes once its endpoint is no longer running (the
 *      reaper, every REAP_SECONDS) and when the server stops.
 *
 * Locking: o->mu guards the listeners and the tickets.  s->mu is never
 * taken while o->mu is held, and no daemon is stopped under either.
 */
#include "server/api_int.h"
#include "core/enc.h"
#include "core/lazylib.h"
#include "core/reqbody.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "endpoint/endpoint.h"
#include "notify/notify.h"
#include "store/store.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define REAP_SECONDS 2
#define MAX_TICKETS 1024

/* ---- pure parts (unit-tested) ---- */

enum ep_route eporigin_decide(bool own_origins, enum auth_via via, bool owner)
{
	/* a bearer token or the Unix socket: a script, whose answers no browser runs */
	if (via != AUTH_VIA_SESSION)
		return EP_PROXY;
	if (own_origins)
		return EP_REDIRECT;
	return owner ? EP_PROXY : EP_REFUSE;
}

bool server_parse_endpoint_ports(const char *text, int *lo, int *hi)
{
	const char *dash = text ? strchr(text, '-') : NULL;
	long a, b;
	if (!dash || dash == text)
		return false;
	char *first = xstrndup(text, (size_t)(dash - text));
	bool ok = parse_long(first, 1024, 65535, &a) && parse_long(dash + 1, 1024, 65535, &b) &&
		  a <= b;
	free(first);
	if (ok) {
		*lo = (int)a;
		*hi = (int)b;
	}
	return ok;
}

/* What the MAC covers: the cookie's fields, then what it opens. */
static void mac_of(const unsigned char *key, const char *user_hex, bool admin, long long expires,
		   const char *job, const char *name, int port, char out[65])
{
	struct sbuf msg = SBUF_INIT;
	sbuf_addf(&msg, "trainctl-endpoint\n%s\n%d\n%lld\n%s\n%s\n%d", user_hex, admin ? 1 : 0,
		  expires, job, name, port);
	unsigned char md[32];
	notify_hmac_sha256(key, EPORIGIN_KEY_BYTES, msg.buf, msg.len, md);
	hex_encode(out, md, sizeof(md));
	sbuf_release(&msg);
}

void eporigin_cookie_make(const unsigned char *key, const char *user, bool admin,
			  long long expires, const char *job, const char *name, int port,
			  struct sbuf *out)
{
	/* hex: an account's name may hold what a cookie may not */
	size_t n = strlen(user);
	char *uh = xmalloc(2 * n + 1);
	hex_encode(uh, user, n);
	char mac[65];
	mac_of(key, uh, admin, expires, job, name, port, mac);
	sbuf_addf(out, "%s.%d.%lld.%s", uh, admin ? 1 : 0, expires, mac);
	free(uh);
}

/* Equal without telling where they differ. */
static bool same(const char *a, const char *b, size_t n)
{
	unsigned char d = 0;
	for (size_t i = 0; i < n; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

int eporigin_cookie_check(const unsigned char *key, const char *value, const char *job,
			  const char *name, int port, double now, char **user, bool *admin)
{
	*user = NULL;
	*admin = false;
	if (!value)
		return -1;
	const char *d1 = strchr(value, '.');
	const char *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
	const char *d3 = d2 ? strchr(d2 + 1, '.') : NULL;
	if (!d3 || d1 == value || (d1 - value) % 2 || (d1 - value) > 256 || d2 != d1 + 2 ||
	    (d1[1] != '0' && d1[1] != '1') || strlen(d3 + 1) != 64)
		return -1;
	char *uh = xstrndup(value, (size_t)(d1 - value));
	char *ex = xstrndup(d2 + 1, (size_t)(d3 - d2 - 1));
	long v;
	int rc = -1;
	if (parse_long(ex, 1, 1L << 40, &v) && (double)v > now) {
		char mac[65];
		bool adm = d1[1] == '1';
		mac_of(key, uh, adm, v, job, name, port, mac);
		if (same(mac, d3 + 1, 64)) {
			size_t n = strlen(uh) / 2;
			char *u = xmalloc(n + 1);
			bool ok = true;
			for (size_t i = 0; i < n && ok; i++) {
				int hi = hex_digit(uh[2 * i]), lo = hex_digit(uh[2 * i + 1]);
				ok = hi >= 0 && lo >= 0 && (hi || lo);
				u[i] = (char)(hi * 16 + lo);
			}
			u[n] = '\0';
			if (ok) {
				*user = u;
				*admin = adm;
				rc = 0;
			} else {
				free(u);
			}
		}
	}
	free(uh);
	free(ex);
	return rc;
}

void eporigin_location(const char *host_header, int port, const char *ticket, struct sbuf *out)
{
	/* the Host as the browser named us (checked by guard.c), with our port */
	const char *h = host_header ? host_header : "127.0.0.1";
	size_t n = h[0] == '[' ? strcspn(h, "]") + (strchr(h, ']') ? 1 : 0) : strcspn(h, ":");
	sbuf_adds(out, "http://");
	sbuf_add(out, h, n);
	sbuf_addf(out, ":%d/.trainctl/enter?ticket=%s", port, ticket);
}

/* ---- the state ---- */

struct eplis {
	struct eporigin *o;
	char *job, *name;    /* the one endpoint it serves */
	char *base;          /* "/jobs/J/endpoints/N" */
	int port;
	struct MHD_Daemon *d;
};

struct ticket {
	char hash[65];
	char *user, *job, *name, *next;
	bool admin;
	int port;
	double expires;
};

struct eporigin {
	struct srv *s;
	unsigned char key[EPORIGIN_KEY_BYTES];
	int lo, hi;
	double ticket_seconds;
	struct sockaddr_in addr;   /* --listen's address: the listeners bind there */
	pthread_mutex_t mu;
	struct eplis **lis;
	size_t nlis, lis_alloc;
	struct ticket *t;
	size_t nt, t_alloc;
	pthread_t reaper;
	bool reaping, stop;
	pthread_cond_t cv;
};

static int random_bytes(unsigned char *out, size_t n, struct tc_err *err)
{
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return tc_error_errno(err, TC_ESYS, "/dev/urandom");
	ssize_t r = read(fd, out, n);
	close(fd);
	if (r != (ssize_t)n)
		return tc_error(err, TC_ESYS, "/dev/urandom: short read");
	return 0;
}

static void ticket_free(struct ticket *t)
{
	free(t->user);
	free(t->job);
	free(t->name);
	free(t->next);
}

static void lis_stop(struct eplis *l)
{
	proxy_stop_port(l->port); /* a pumped WebSocket would hold its connection's thread */
	if (l->d)
		MHD_stop_daemon(l->d); /* closes the listening socket too */
	free(l->job);
	free(l->name);
	free(l->base);
	free(l);
}

/* Is job's endpoint name still running here?  (s->mu taken alone) */
static bool still_running(struct srv *s, const char *job, const char *name)
{
	struct store_endpoint e;
	struct job_row j = { 0 };
	struct tc_err err = TC_ERR_INIT;
	pthread_mutex_lock(&s->mu);
	int rc = store_endpoint_get(s->st, job, name, &e, &err);
	bool up = !rc && !strcmp(e.state, "running");
	if (!rc)
		store_endpoint_release(&e);
	if (up && !store_job_get(s->st, job, &j, &err)) {
		up = !(j.ended > 0);
		job_row_release(&j);
	}
	pthread_mutex_unlock(&s->mu);
	tc_err_release(&err);
	return up;
}

/* Every REAP_SECONDS: the listeners of endpoints that stopped close, old tickets go. */
static void *reaper(void *arg)
{
	struct eporigin *o = arg;
	pthread_mutex_lock(&o->mu);
	while (!o->stop) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += REAP_SECONDS;
		pthread_cond_timedwait(&o->cv, &o->mu, &ts);
		if (o->stop)
			break;
		double now = now_wall();
		for (size_t i = o->nt; i-- > 0;)
			if (o->t[i].expires < now) {
				ticket_free(&o->t[i]);
				o->t[i] = o->t[--o->nt];
			}
		/* copies of the keys: the store is asked without o->mu */
		size_t n = o->nlis;
		char **keys = xcalloc(2 * n + 1, sizeof(*keys));
		for (size_t i = 0; i < n; i++) {
			keys[2 * i] = xstrdup(o->lis[i]->job);
			keys[2 * i + 1] = xstrdup(o->lis[i]->name);
		}
		pthread_mutex_unlock(&o->mu);
		bool *dead = xcalloc(n + 1, sizeof(*dead));
		for (size_t i = 0; i < n; i++)
			dead[i] = !still_running(o->s, keys[2 * i], keys[2 * i + 1]);
		struct eplis **gone = xcalloc(n + 1, sizeof(*gone));
		size_t ngone = 0;
		pthread_mutex_lock(&o->mu);
		for (size_t i = 0; i < n; i++) {
			if (!dead[i])
				continue;
			for (size_t k = 0; k < o->nlis; k++)
				if (!strcmp(o->lis[k]->job, keys[2 * i]) &&
				    !strcmp(o->lis[k]->name, keys[2 * i + 1])) {
					gone[ngone++] = o->lis[k];
					o->lis[k] = o->lis[--o->nlis];
					break;
				}
		}
		pthread_mutex_unlock(&o->mu);
		for (size_t i = 0; i < ngone; i++)
			lis_stop(gone[i]);
		for (size_t i = 0; i < 2 * n; i++)
			free(keys[i]);
		free(keys);
		free(dead);
		free(gone);
		pthread_mutex_lock(&o->mu);
	}
	pthread_mutex_unlock(&o->mu);
	return NULL;
}

int eporigin_start(struct srv *s, const struct sockaddr_in *addr, struct tc_err *err)
{
	if (s->o.endpoint_port_lo <= 0)
		return 0;
	struct eporigin *o = xcalloc(1, sizeof(*o));
	o->s = s;
	o->lo = s->o.endpoint_port_lo;
	o->hi = s->o.endpoint_port_hi;
	o->addr = *addr;
	o->ticket_seconds = EPORIGIN_TICKET_SECONDS;
	/* tests shorten it to see a ticket expire */
	const char *ts = getenv("TRAINCTL_ENDPOINT_TICKET_SECONDS");
	double v;
	if (ts && parse_double(ts, &v) && v > 0 && v <= 3600)
		o->ticket_seconds = v;
	pthread_mutex_init(&o->mu, NULL);
	pthread_cond_init(&o->cv, NULL);
	s->eporigin = o;
	int rc = random_bytes(o->key, sizeof(o->key), err);
	if (rc)
		return rc;
	if (pthread_create(&o->reaper, NULL, reaper, o))
		return tc_error(err, TC_ESYS, "server: cannot start a thread");
	o->reaping = true;
	return 0;
}

void eporigin_stop(struct srv *s)
{
	struct eporigin *o = s->eporigin;
	if (!o)
		return;
	if (o->reaping) {
		pthread_mutex_lock(&o->mu);
		o->stop = true;
		pthread_cond_signal(&o->cv);
		pthread_mutex_unlock(&o->mu);
		pthread_join(o->reaper, NULL);
	}
	for (size_t i = 0; i < o->nlis; i++)
		lis_stop(o->lis[i]);
	free(o->lis);
	for (size_t i = 0; i < o->nt; i++)
		ticket_free(&o->t[i]);
	free(o->t);
	pthread_mutex_destroy(&o->mu);
	pthread_cond_destroy(&o->cv);
	free(o);
	s->eporigin = NULL;
}

/* ---- the listener of one endpoint ---- */

struct eprq {
	struct reqbody body;  /* kept only for a caller its cookie names (reqbody.h) */
	bool too_big, answered, started;
	bool stranger;        /* no valid cookie on the headers: the body is dropped */
	bool busy;            /* the bodies' memory budget is spent: 503 */
	char *raw_uri;
	struct gconn *gc;
};

static void *ep_on_uri(void *cls, const char *uri, struct MHD_Connection *con)
{
	(void)cls;
	(void)con;
	struct eprq *rq = xcalloc(1, sizeof(*rq));
	rq->body = (struct reqbody)REQBODY_INIT;
	rq->raw_uri = xstrdup(uri ? uri : "");
	return rq;
}

static void ep_on_done(void *cls, struct MHD_Connection *con, void **con_cls,
		       enum MHD_RequestTerminationCode toe)
{
	struct eplis *l = cls;
	(void)con;
	(void)toe;
	struct eprq *rq = *con_cls;
	if (rq) {
		guard_busy(l->o->s->guard, rq->gc, false);
		reqbody_release(&rq->body);
		free(rq->raw_uri);
		free(rq);
		*con_cls = NULL;
	}
}

static void ep_on_connection(void *cls, struct MHD_Connection *con, void **socket_context,
			     enum MHD_ConnectionNotificationCode toe)
{
	struct eplis *l = cls;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		*socket_context = guard_open_con(l->o->s->guard, con, true);
	} else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		guard_close(l->o->s->guard, *socket_context);
		*socket_context = NULL;
	}
}

static bool is_upgrade(struct MHD_Connection *con)
{
	const char *u = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Upgrade");
	return u && !strcasecmp(u, "websocket");
}

/* The checks on headers alone: 0, or the reply is queued in *ret. */
static int ep_precheck(struct eplis *l, struct MHD_Connection *con, const char *method, int *ret)
{
	struct srv *s = l->o->s;
	const char *host = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Host");
	if (!api_host_ok(host, l->port, s->o.host_names)) {
		*ret = reply_err(con, 403, "Host '%s' does not name this server (trainctl server"
				 " --host-name NAME adds a name)", host ? host : "");
		return 403;
	}
	if (!api_method_changes(method) && !is_upgrade(con))
		return 0;
	/* (3): another origin's page (another endpoint's, the UI's) changes nothing here */
	const char *origin = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Origin");
	const char *site = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Sec-Fetch-Site");
	if (!api_origin_ok(origin, host) ||
	    (site && strcmp(site, "same-origin") && strcmp(site, "none"))) {
		*ret = reply_err(con, 403, "a request from another origin (%s) may not change anything"
				 " in this endpoint", origin ? origin : site);
		return 403;
	}
	return 0;
}

static void add_ticket(struct eporigin *o, struct ticket *t)
{
	if (o->nt >= MAX_TICKETS) {
		ticket_free(&o->t[0]); /* the oldest goes: a full table must not lock everyone out */
		o->t[0] = o->t[--o->nt];
	}
	XGROW(o->t, o->nt + 1, o->t_alloc);
	o->t[o->nt++] = *t;
}

/* The ticket of this listener, used up: 0 with *out (the caller frees it), or -1. */
static int take_ticket(struct eplis *l, const char *secret, struct ticket *out)
{
	struct eporigin *o = l->o;
	struct sbuf hash = SBUF_INIT;
	server_token_hash(secret, &hash);
	int rc = -1;
	double now = now_wall();
	pthread_mutex_lock(&o->mu);
	for (size_t i = 0; i < o->nt; i++) {
		if (strcmp(o->t[i].hash, hash.buf))
			continue;
		struct ticket t = o->t[i];
		o->t[i] = o->t[--o->nt]; /* one use, whatever follows */
		if (t.expires >= now && t.port == l->port && !strcmp(t.job, l->job) &&
		    !strcmp(t.name, l->name)) {
			*out = t;
			rc = 0;
		} else {
			ticket_free(&t);
		}
		break;
	}
	pthread_mutex_unlock(&o->mu);
	sbuf_release(&hash);
	return rc;
}

/* GET /.trainctl/enter?ticket=T: the ticket becomes this endpoint's cookie. */
static int ep_enter(struct eplis *l, struct MHD_Connection *con)
{
	const char *site = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Sec-Fetch-Site");
	if (site && !strcmp(site, "cross-site"))
		return reply_err(con, 403, "an endpoint's link must be opened from its server, not"
				 " from another site");
	const char *secret = MHD_lookup_connection_value(con, MHD_GET_ARGUMENT_KIND, "ticket");
	struct ticket t;
	if (!secret || take_ticket(l, secret, &t))
		return reply_err(con, 403, "this endpoint link was used already or has expired: open"
				 " the endpoint again from the server (its job page, or"
				 " /jobs/%s/endpoints/%s/ on the server's own port)", l->job, l->name);
	struct sbuf ck = SBUF_INIT, loc = SBUF_INIT;
	long long expires = (long long)now_wall() + EPORIGIN_COOKIE_SECONDS;
	sbuf_addf(&ck, "%s=", EPORIGIN_COOKIE);
	eporigin_cookie_make(l->o->key, t.user, t.admin, expires, l->job, l->name, l->port, &ck);
	/* no Max-Age beyond the MAC's expiry; the path keeps it to this endpoint */
	sbuf_addf(&ck, "; Path=%s; HttpOnly; SameSite=Strict; Max-Age=%d", l->base,
		  EPORIGIN_COOKIE_SECONDS);
	/* the page asked for; the root is a folder ("" or "?q" gets the slash its links need) */
	sbuf_addf(&loc, "%s%s%s", l->base, t.next[0] == '/' ? "" : "/", t.next);
	ticket_free(&t);
	int ret = MHD_NO;
	struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
	if (r) {
		MHD_add_response_header(r, "Set-Cookie", ck.buf);
		MHD_add_response_header(r, "Location", loc.buf);
		MHD_add_response_header(r, "Cache-Control", "no-store");
		api_page_headers(r);
		ret = MHD_queue_response(con, 303, r);
		MHD_destroy_response(r);
	}
	sbuf_release(&ck);
	sbuf_release(&loc);
	return ret;
}

static int ep_dispatch(struct eplis *l, struct MHD_Connection *con, const char *url,
		       const char *method, struct eprq *rq)
{
	struct srv *s = l->o->s;
	if (!strcmp(url, "/.trainctl/enter")) {
		if (strcmp(method, "GET") && strcmp(method, "HEAD"))
			return reply_err(con, 405, "use GET");
		return ep_enter(l, con);
	}
	size_t bl = strlen(l->base);
	if (strncmp(url, l->base, bl) || (url[bl] && url[bl] != '/'))
		return reply_err(con, 404, "this origin serves endpoint %s of job %s only "
				 "(under %s/)", l->name, l->job, l->base);
	if (rq->too_big)
		return reply_err(con, 413, "the body is over %u bytes", TC_SERVER_MAX_BODY);
	if (rq->busy)
		return reply_err(con, 503, "the server holds as many request bodies as its memory"
				 " budget allows (--body-memory): try again shortly");
	struct who w = { 0 };
	const char *ck = MHD_lookup_connection_value(con, MHD_COOKIE_KIND, EPORIGIN_COOKIE);
	if (eporigin_cookie_check(l->o->key, ck, l->job, l->name, l->port, now_wall(), &w.user,
				  &w.admin))
		return reply_err(con, 401, "open this endpoint from its server (the job page, or "
				 "%s/ on the server's own port): it sends you here with a one-time"
				 " ticket", l->base);
	struct job_row j = { 0 };
	struct tc_err err = TC_ERR_INIT;
	pthread_mutex_lock(&s->mu);
	int rc = store_job_get(s->st, l->job, &j, &err);
	pthread_mutex_unlock(&s->mu);
	int ret;
	if (rc) {
		ret = rc == TC_ENOTFOUND ? reply_err(con, 404, "no job '%s'", l->job) : reply_tc(con, &err);
	} else if (!server_may_see(&w, j.user)) {
		ret = reply_err(con, 403, "job %s belongs to another user", j.id);
	} else {
		struct proxy_req r = { .job = &j, .name = l->name, .raw_uri = rq->raw_uri,
				       .method = method, .body = rq->body.data.buf,
				       .body_len = rq->body.data.len,
				       .gc = rq->gc, .origin_port = l->port };
		ret = proxy_answer(s, con, &r);
	}
	if (!rc)
		job_row_release(&j);
	tc_err_release(&err);
	free(w.user);
	return ret;
}

static enum MHD_Result ep_on_request(void *cls, struct MHD_Connection *con, const char *url,
				     const char *method, const char *version, const char *upload,
				     size_t *upload_size, void **con_cls)
{
	struct eplis *l = cls;
	struct srv *s = l->o->s;
	(void)version;
	struct eprq *rq = *con_cls;
	if (!rq) {
		rq = ep_on_uri(NULL, url, con);
		*con_cls = rq;
	}
	if (!rq->started) {
		rq->started = true;
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(con, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
		rq->gc = ci ? ci->socket_context : NULL;
		guard_busy(s->guard, rq->gc, true);
		int ret = MHD_NO;
		if (guard_full(s->guard, rq->gc)) {
			rq->answered = true;
			return reply_err(con, 503, "the server has too many connections: try again"
					 " shortly") == MHD_YES ? MHD_YES : MHD_NO;
		}
		if (ep_precheck(l, con, method, &ret)) {
			rq->answered = true;
			return ret == MHD_YES ? MHD_YES : MHD_NO;
		}
		const char *cl = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Content-Length");
		long n;
		if (cl && parse_long(cl, 0, 1L << 62, &n) && n > 64L * (long)TC_SERVER_MAX_BODY) {
			rq->answered = true;
			return reply_err(con, 413, "the body is over %u bytes", TC_SERVER_MAX_BODY) ==
					       MHD_YES ? MHD_YES : MHD_NO;
		}
		/* the cookie on the headers: a stranger's body is never kept */
		const char *ck = MHD_lookup_connection_value(con, MHD_COOKIE_KIND, EPORIGIN_COOKIE);
		char *user = NULL;
		bool admin = false;
		rq->stranger = eporigin_cookie_check(l->o->key, ck, l->job, l->name, l->port,
						     now_wall(), &user, &admin) != 0;
		free(user);
		long long declared = reqbody_declared(
			cl, MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Transfer-Encoding"));
		if (rq->stranger && !reqbody_drains(declared)) {
			rq->answered = true; /* its refusal at once, the body unread */
			return ep_dispatch(l, con, url, method, rq) == MHD_YES ? MHD_YES : MHD_NO;
		}
		unsigned st = rq->stranger ? 0 : reqbody_open(&rq->body, TC_SERVER_MAX_BODY, declared);
		rq->too_big = st == 413;
		if (st == 503) {
			rq->busy = rq->answered = true;
			return ep_dispatch(l, con, url, method, rq) == MHD_YES ? MHD_YES : MHD_NO;
		}
		return MHD_YES;
	}
	if (*upload_size) {
		if (!rq->answered && !rq->stranger && !rq->too_big && !rq->busy) {
			unsigned st = reqbody_add(&rq->body, upload, *upload_size);
			rq->too_big = st == 413;
			rq->busy = st == 503;
		}
		*upload_size = 0;
		return MHD_YES;
	}
	if (rq->answered)
		return MHD_YES;
	rq->answered = true;
	return ep_dispatch(l, con, url, method, rq) == MHD_YES ? MHD_YES : MHD_NO;
}

/* A listening socket on a free port of the range that no listener of ours holds; -1 if none. */
static int bind_free(struct eporigin *o, int *port)
{
	for (int p = o->lo; p <= o->hi; p++) {
		bool ours = false;
		for (size_t i = 0; i < o->nlis && !ours; i++)
			ours = o->lis[i]->port == p;
		if (ours)
			continue;
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -1;
		int one = 1;
		if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
			errno = 0;
		struct sockaddr_in sa = o->addr;
		sa.sin_port = htons((uint16_t)p);
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(fd, 64) == 0) {
			*port = p;
			return fd;
		}
		close(fd); /* in use (another program's): the next one */
	}
	return -1;
}

/* The port of job's endpoint name's listener, opened when it has none: 0, or -1 (why in err). */
static int listener_of(struct eporigin *o, const char *job, const char *name, int *port,
		       struct tc_err *err)
{
	pthread_mutex_lock(&o->mu);
	for (size_t i = 0; i < o->nlis; i++)
		if (!strcmp(o->lis[i]->job, job) && !strcmp(o->lis[i]->name, name)) {
			*port = o->lis[i]->port;
			pthread_mutex_unlock(&o->mu);
			return 0;
		}
	int p = 0, fd = bind_free(o, &p);
	if (fd < 0) {
		pthread_mutex_unlock(&o->mu);
		return tc_error(err, TC_EBACKEND, "no free port in --endpoint-ports %d-%d for endpoint"
				" %s (%zu are open): try again when other endpoints have stopped",
				o->lo, o->hi, name, o->nlis);
	}
	struct eplis *l = xcalloc(1, sizeof(*l));
	l->o = o;
	l->job = xstrdup(job);
	l->name = xstrdup(name);
	struct sbuf b = SBUF_INIT;
	sbuf_addf(&b, "/jobs/%s/endpoints/%s", job, name);
	l->base = sbuf_detach(&b);
	l->port = p;
	l->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD |
					MHD_ALLOW_UPGRADE,
				0, NULL, NULL, ep_on_request, l,
				MHD_OPTION_LISTEN_SOCKET, fd,
				MHD_OPTION_NOTIFY_COMPLETED, ep_on_done, l,
				MHD_OPTION_URI_LOG_CALLBACK, ep_on_uri, NULL,
				MHD_OPTION_NOTIFY_CONNECTION, ep_on_connection, l,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)120,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned int)256,
				MHD_OPTION_END);
	if (!l->d) {
		int e = errno;
		close(fd);
		pthread_mutex_unlock(&o->mu);
		free(l->job);
		free(l->name);
		free(l->base);
		free(l);
		errno = e;
		return tc_error_errno(err, TC_ESYS, "server: cannot serve port %d", p);
	}
	XGROW(o->lis, o->nlis + 1, o->lis_alloc);
	o->lis[o->nlis++] = l;
	pthread_mutex_unlock(&o->mu);
	*port = p;
	return 0;
}

/* ---- the API origin's side ---- */

bool eporigin_on(const struct srv *s)
{
	return s->eporigin != NULL;
}

int eporigin_redirect(struct srv *s, struct MHD_Connection *con, const struct who *w,
		      const struct proxy_req *r)
{
	struct eporigin *o = s->eporigin;
	if (strcmp(r->method, "GET") && strcmp(r->method, "HEAD"))
		return reply_err(con, 403, "endpoint %s is served on its own origin: a browser opens"
				 " it with GET %s, and sends the rest there", r->name,
				 "/jobs/JOB/endpoints/NAME/");
	if (is_upgrade(con))
		return reply_err(con, 403, "endpoint %s is served on its own origin: its WebSockets"
				 " go there", r->name);
	int ret;
	if (proxy_endpoint_ready(s, con, r, &ret))
		return ret; /* 404, 503, 502, 400: answered */
	char *rest = NULL;
	if (!r->raw_uri || proxy_split_uri(r->raw_uri, &rest))
		return reply_err(con, 400, "bad endpoint path");
	struct tc_err err = TC_ERR_INIT;
	int port = 0;
	unsigned char raw[32];
	if (listener_of(o, r->job->id, r->name, &port, &err) ||
	    random_bytes(raw, sizeof(raw), &err)) {
		free(rest);
		ret = reply_err(con, 503, "%s", err.msg);
		tc_err_release(&err);
		return ret;
	}
	char secret[2 * sizeof(raw) + 1];
	hex_encode(secret, raw, sizeof(raw));
	struct sbuf hash = SBUF_INIT;
	server_token_hash(secret, &hash);
	struct ticket t = { .user = xstrdup(w->user), .job = xstrdup(r->job->id),
			    .name = xstrdup(r->name), .next = rest, .admin = w->admin, .port = port,
			    .expires = now_wall() + o->ticket_seconds };
	memcpy(t.hash, hash.buf, sizeof(t.hash) - 1);
	t.hash[sizeof(t.hash) - 1] = '\0';
	sbuf_release(&hash);
	pthread_mutex_lock(&o->mu);
	add_ticket(o, &t);
	pthread_mutex_unlock(&o->mu);
	struct sbuf loc = SBUF_INIT;
	eporigin_location(MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Host"), port, secret,
			  &loc);
	ret = MHD_NO;
	struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"",
								     MHD_RESPMEM_PERSISTENT);
	if (resp) {
		MHD_add_response_header(resp, "Location", loc.buf);
		MHD_add_response_header(resp, "Cache-Control", "no-store");
		api_page_headers(resp); /* Referrer-Policy: no-referrer keeps the ticket to itself */
		ret = MHD_queue_response(con, 302, resp);
		MHD_destroy_response(resp);
	}
	sbuf_release(&loc);
	return ret;
}
