/*
 * eporigin.c -- one host name per endpoint (docs/endpoints.md, docs/security.md).
 *
 * A proxied endpoint serves pages the job wrote (Jupyter's, or any
 * command's): served on the API's origin, their JavaScript would run with
 * the session of whoever opens them, an admin's too.  Another port of the
 * API's host is no better: cookies ignore ports, and another port is the
 * same site, so the API's cookie goes wherever such a page sends the
 * browser on that host (a port the job itself listens on, issue #23 C1).
 * With `trainctl server --endpoint-host EPHOST` each endpoint gets a host
 * name of its own, JOB-NAME.EPHOST (JupyterHub's subdomains), served by the
 * API's own listener and told apart by the Host header:
 *
 *   API host, GET /jobs/J/endpoints/N/REST with the session cookie
 *     -> 302 http(s)://J-N.EPHOST[:PORT]/.trainctl/enter?ticket=T
 *        (T: random, one use, EPORIGIN_TICKET_SECONDS, bound to J, N, the
 *        caller and REST; kept here in memory, hashed)
 *   J-N.EPHOST, GET /.trainctl/enter?ticket=T
 *     -> 200, a page that goes on to /jobs/J/endpoints/N/REST (not a
 *        redirect: see ep_enter), Set-Cookie trainctl_endpoint=
 *        HEX(USER).ADMIN.EXPIRES.TOKEN.MAC (host-only, HttpOnly,
 *        SameSite=Strict, Path=/; MAC: HMAC-SHA256 under a key made at
 *        start, over those fields, J, N and the host's label)
 *   J-N.EPHOST, /jobs/J/endpoints/N/... with that cookie
 *     -> proxy.c, as the cookie's user (the owner of J or an admin)
 *
 * INVARIANTS
 *  (1) An endpoint host serves one endpoint of one job: any other path is
 *      404.  It never serves the API or the UI and takes no API credential:
 *      a bearer token or the session cookie proves nothing here (the proxy
 *      strips both before the endpoint).  The API, in turn, answers no
 *      endpoint host (guard.c: the Host must name the API).
 *  (2) The API's cookie is host-only (no Domain), so the browser never sends
 *      it to an endpoint host; the endpoint cookie is host-only too and
 *      names the job, the endpoint and the label in its MAC.
 *  (3) A state-changing request or a WebSocket must come from the endpoint
 *      host's own origin (Origin, Sec-Fetch-Site); the API refuses this
 *      origin's in turn (guard.c: another Origin, Sec-Fetch-Site same-site
 *      or cross-site).  No CORS header is ever added.
 *  (4) A host is forgotten once its endpoint is no longer running (the
 *      reaper, every REAP_SECONDS; its WebSockets are shut), and a cookie
 *      made from a token dies with the token (trainctl token revoke).
 *
 * Locking: o->mu guards the hosts and the tickets.  o->mu is never held
 * while s->mu is taken.
 */
#include "api/api_int.h"
#include "core/enc.h"
#include "core/lazylib.h"
#include "core/reqbody.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "endpoint/endpoint.h"
#include "notify/notify.h"
#include "store/store.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define REAP_SECONDS 2
#define MAX_TICKETS 1024
#define MAX_LABEL 63 /* one DNS label */

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

static bool label_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

bool server_endpoint_host_ok(const char *text)
{
	/* a DNS name in lower case: labels of letters, digits and '-', at least two */
	size_t n = text ? strlen(text) : 0;
	if (!n || n > 200 || !strchr(text, '.'))
		return false;
	size_t len = 0;
	bool letter = false; /* in the last label: an IP literal is no host for names under it */
	for (size_t i = 0; i <= n; i++) {
		char c = text[i];
		if (c == '.' || !c) {
			if (!len || text[i - 1] == '-')
				return false;
			len = 0;
			if (c)
				letter = false;
			continue;
		}
		if (!label_char(c) || (!len && c == '-') || ++len > MAX_LABEL)
			return false;
		letter |= c >= 'a' && c <= 'z';
	}
	return letter;
}

int eporigin_label(const char *job, const char *name, struct sbuf *out)
{
	/* JOB-NAME: a job id is digits, hex and '-'; a name that is no DNS label cannot be one */
	size_t n = strlen(job) + 1 + strlen(name);
	if (!*job || !*name || n > MAX_LABEL || job[0] == '-' || name[strlen(name) - 1] == '-')
		return -1;
	for (const char *c = job; *c; c++)
		if (!label_char(*c))
			return -1;
	for (const char *c = name; *c; c++)
		if (!label_char(*c))
			return -1;
	sbuf_addf(out, "%s-%s", job, name);
	return 0;
}

int eporigin_host_label(const char *host_header, const char *ephost, struct sbuf *label)
{
	if (!host_header || !ephost)
		return 0;
	/* the name without its port, in lower case */
	size_t n = strcspn(host_header, ":");
	size_t el = strlen(ephost);
	if (n <= el + 1 || host_header[n - el - 1] != '.' ||
	    strncasecmp(host_header + n - el, ephost, el))
		return 0;
	size_t ll = n - el - 1;
	if (host_header[n] == ':') {
		long port;
		if (!parse_long(host_header + n + 1, 1, 65535, &port))
			return -1;
	}
	if (ll > MAX_LABEL)
		return -1;
	for (size_t i = 0; i < ll; i++) {
		char c = (char)tolower((unsigned char)host_header[i]);
		if (!label_char(c))
			return -1; /* a dot: a name below a label, or junk */
		sbuf_addch(label, c);
	}
	return 1;
}

/* What the MAC covers: the cookie's fields, then what it opens. */
static void mac_of(const unsigned char *key, const char *user_hex, bool admin, long long expires,
		   const char *tok, const char *job, const char *name, const char *label,
		   char out[65])
{
	struct sbuf msg = SBUF_INIT;
	sbuf_addf(&msg, "trainctl-endpoint\n%s\n%d\n%lld\n%s\n%s\n%s\n%s", user_hex, admin ? 1 : 0,
		  expires, tok, job, name, label);
	unsigned char md[32];
	notify_hmac_sha256(key, EPORIGIN_KEY_BYTES, msg.buf, msg.len, md);
	hex_encode(out, md, sizeof(md));
	sbuf_release(&msg);
}

void eporigin_cookie_make(const unsigned char *key, const struct who *w, long long expires,
			  const char *job, const char *name, const char *label, struct sbuf *out)
{
	/* hex: an account's name may hold what a cookie may not */
	size_t n = strlen(w->user);
	char *uh = xmalloc(2 * n + 1);
	hex_encode(uh, w->user, n);
	const char *tok = w->token_hash[0] ? w->token_hash : "-";
	char mac[65];
	mac_of(key, uh, w->admin, expires, tok, job, name, label, mac);
	sbuf_addf(out, "%s.%d.%lld.%s.%s", uh, w->admin ? 1 : 0, expires, tok, mac);
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

static bool all_hex(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (hex_digit(p[i]) < 0)
			return false;
	return true;
}

int eporigin_cookie_check(const unsigned char *key, const char *value, const char *job,
			  const char *name, const char *label, double now, struct who *w)
{
	memset(w, 0, sizeof(*w));
	if (!value)
		return -1;
	const char *d1 = strchr(value, '.');
	const char *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
	const char *d3 = d2 ? strchr(d2 + 1, '.') : NULL;
	const char *d4 = d3 ? strchr(d3 + 1, '.') : NULL;
	if (!d4 || d1 == value || (d1 - value) % 2 || (d1 - value) > 256 || d2 != d1 + 2 ||
	    (d1[1] != '0' && d1[1] != '1') || strlen(d4 + 1) != 64)
		return -1;
	size_t tl = (size_t)(d4 - d3 - 1);
	if (!(tl == 1 && d3[1] == '-') && !(tl == 64 && all_hex(d3 + 1, 64)))
		return -1;
	char *uh = xstrndup(value, (size_t)(d1 - value));
	char *ex = xstrndup(d2 + 1, (size_t)(d3 - d2 - 1));
	char *tok = xstrndup(d3 + 1, tl);
	long v;
	int rc = -1;
	if (parse_long(ex, 1, 1L << 40, &v) && (double)v > now) {
		char mac[65];
		bool adm = d1[1] == '1';
		mac_of(key, uh, adm, v, tok, job, name, label, mac);
		if (same(mac, d4 + 1, 64)) {
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
				w->user = u;
				w->admin = adm;
				w->via = AUTH_VIA_SESSION;
				if (tl == 64)
					memcpy(w->token_hash, tok, 65);
				rc = 0;
			} else {
				free(u);
			}
		}
	}
	free(uh);
	free(ex);
	free(tok);
	return rc;
}

void eporigin_location(bool https, const char *label, const char *ephost, const char *host_header,
		       const char *ticket, struct sbuf *out)
{
	/* the port the browser named us by (checked by guard.c), if it named one */
	const char *h = host_header ? host_header : "";
	const char *colon = h[0] == '[' ? (strchr(h, ']') ? strchr(h, ']') + 1 : NULL) : strchr(h, ':');
	sbuf_addf(out, "%s://%s.%s", https ? "https" : "http", label, ephost);
	if (colon && *colon == ':')
		sbuf_adds(out, colon);
	sbuf_addf(out, "/.trainctl/enter?ticket=%s", ticket);
}

/* ---- the state ---- */

struct ephost {
	char *job, *name;    /* the one endpoint it serves */
	char *base;          /* "/jobs/J/endpoints/N" */
	char *label;         /* "J-N": the host is LABEL.EPHOST */
	int id;              /* its WebSockets' mark (proxy_stop_origin) */
};

struct ticket {
	char hash[65];
	struct who w;        /* w.user heap */
	char *job, *name, *next;
	double expires;
};

struct eporigin {
	struct srv *s;
	unsigned char key[EPORIGIN_KEY_BYTES];
	char *host;          /* --endpoint-host */
	bool https;          /* --behind-https: links and cookies for https */
	double ticket_seconds;
	pthread_mutex_t mu;
	struct ephost **hosts;
	size_t nhosts, hosts_alloc;
	int next_id;
	struct ticket *t;
	size_t nt, t_alloc;
	pthread_t reaper;
	bool reaping, stop;
	pthread_cond_t cv;
};

/* One request on an endpoint host, its checks on the headers passed (api.c keeps it). */
struct epreq {
	bool enter;          /* GET /.trainctl/enter */
	struct who w;        /* the cookie's user */
	char *job, *name, *base, *label;
	int id;
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
	free(t->w.user);
	free(t->job);
	free(t->name);
	free(t->next);
}

static void host_free(struct ephost *h)
{
	free(h->job);
	free(h->name);
	free(h->base);
	free(h->label);
	free(h);
}

void eporigin_req_free(struct epreq *q)
{
	if (!q)
		return;
	free(q->w.user);
	free(q->job);
	free(q->name);
	free(q->base);
	free(q->label);
	free(q);
}

/* Is job's endpoint name still running here?  (s->mu taken alone) */
static bool still_running(struct srv *s, const char *job, const char *name)
{
	struct store_endpoint e;
	struct job_row j = { 0 };
	struct tc_err err = TC_ERR_INIT;
	pthread_mutex_lock(&s->mu);
	int rc = store_endpoint_get(s->st, job, name, &e, &err);
	bool up = !rc && endpoint_state_is(e.state, ENDPOINT_RUNNING);
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

/* Every REAP_SECONDS: the hosts of endpoints that stopped go, and old tickets. */
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
		size_t n = o->nhosts;
		char **keys = xcalloc(2 * n + 1, sizeof(*keys));
		for (size_t i = 0; i < n; i++) {
			keys[2 * i] = xstrdup(o->hosts[i]->job);
			keys[2 * i + 1] = xstrdup(o->hosts[i]->name);
		}
		pthread_mutex_unlock(&o->mu);
		bool *dead = xcalloc(n + 1, sizeof(*dead));
		for (size_t i = 0; i < n; i++)
			dead[i] = !still_running(o->s, keys[2 * i], keys[2 * i + 1]);
		struct ephost **gone = xcalloc(n + 1, sizeof(*gone));
		size_t ngone = 0;
		pthread_mutex_lock(&o->mu);
		for (size_t i = 0; i < n; i++) {
			if (!dead[i])
				continue;
			for (size_t k = 0; k < o->nhosts; k++)
				if (!strcmp(o->hosts[k]->job, keys[2 * i]) &&
				    !strcmp(o->hosts[k]->name, keys[2 * i + 1])) {
					gone[ngone++] = o->hosts[k];
					o->hosts[k] = o->hosts[--o->nhosts];
					break;
				}
		}
		pthread_mutex_unlock(&o->mu);
		for (size_t i = 0; i < ngone; i++) {
			proxy_stop_origin(gone[i]->id); /* a pumped WebSocket outlives its request */
			host_free(gone[i]);
		}
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

int eporigin_start(struct srv *s, struct tc_err *err)
{
	const char *eh = s->o.endpoint_host;
	if (!eh)
		return 0;
	if (!server_endpoint_host_ok(eh))
		return tc_error(err, TC_EUSAGE, "server: --endpoint-host '%s' is not a host name in"
				" lower case (letters, digits, '-' and dots, e.g. ep.example.org)", eh);
	/* the API's names and the endpoints' apart: else the API's cookie reaches a job's page */
	for (size_t i = 0; s->o.host_names && s->o.host_names[i]; i++) {
		const char *hn = s->o.host_names[i];
		size_t hl = strlen(hn), el = strlen(eh);
		if (!strcasecmp(hn, eh) || (hl > el && hn[hl - el - 1] == '.' && !strcasecmp(hn + hl - el, eh)))
			return tc_error(err, TC_EUSAGE, "server: --host-name %s is under --endpoint-host"
					" %s: the API needs a name of its own, outside the endpoints'", hn, eh);
	}
	struct eporigin *o = xcalloc(1, sizeof(*o));
	o->s = s;
	o->host = xstrdup(eh);
	o->https = s->o.behind_https;
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
	for (size_t i = 0; i < o->nhosts; i++)
		host_free(o->hosts[i]);
	free(o->hosts);
	for (size_t i = 0; i < o->nt; i++)
		ticket_free(&o->t[i]);
	free(o->t);
	free(o->host);
	pthread_mutex_destroy(&o->mu);
	pthread_cond_destroy(&o->cv);
	free(o);
	s->eporigin = NULL;
}

static bool is_upgrade(struct MHD_Connection *con)
{
	const char *u = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Upgrade");
	return u && !strcasecmp(u, "websocket");
}

static const char *cookie_name(const struct eporigin *o)
{
	/* over https the __Host- prefix: the browser keeps it host-only and Secure */
	return o->https ? "__Host-" EPORIGIN_COOKIE : EPORIGIN_COOKIE;
}

/* ---- an endpoint host's requests ---- */

static int refuse(struct MHD_Connection *con, int *ret, unsigned status, const char *msg)
{
	*ret = reply_err(con, status, "%s", msg);
	return 1;
}

int eporigin_claim(struct srv *s, struct MHD_Connection *con, const char *url, const char *method,
		   struct epreq **out, int *ret)
{
	struct eporigin *o = s->eporigin;
	*out = NULL;
	if (!o)
		return 0;
	const char *host = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Host");
	struct sbuf label = SBUF_INIT;
	int m = eporigin_host_label(host, o->host, &label);
	if (m <= 0) {
		sbuf_release(&label);
		if (!m)
			return 0; /* the API's: guard.c checks its Host */
		*ret = reply_err(con, 404, "'%s' names no endpoint (JOB-NAME.%s)", host, o->host);
		return 1;
	}
	struct epreq *q = xcalloc(1, sizeof(*q));
	pthread_mutex_lock(&o->mu);
	for (size_t i = 0; i < o->nhosts; i++)
		if (!strcmp(o->hosts[i]->label, label.buf)) {
			q->job = xstrdup(o->hosts[i]->job);
			q->name = xstrdup(o->hosts[i]->name);
			q->base = xstrdup(o->hosts[i]->base);
			q->id = o->hosts[i]->id;
			break;
		}
	pthread_mutex_unlock(&o->mu);
	q->label = sbuf_detach(&label);
	int r = 0;
	if (!q->job) {
		r = refuse(con, ret, 404, "no endpoint is open at this name: open it from the server"
			   " (the job page, or /jobs/JOB/endpoints/NAME/ on the server's own name)");
		goto out;
	}
	/* (3): another origin's page (another endpoint's, the API's) changes nothing here */
	if (api_method_changes(method) || is_upgrade(con)) {
		const char *origin = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Origin");
		const char *site = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Sec-Fetch-Site");
		if (!api_origin_ok(origin, host) || !api_fetch_site_ok(site)) {
			*ret = reply_err(con, 403, "a request from another origin (%s) may not change"
					 " anything in this endpoint", origin ? origin : site);
			r = 1;
			goto out;
		}
	}
	if (!strcmp(url, "/.trainctl/enter")) {
		if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
			r = refuse(con, ret, 405, "use GET");
			goto out;
		}
		q->enter = true;
		*out = q;
		return 0;
	}
	size_t bl = strlen(q->base);
	if (strncmp(url, q->base, bl) || (url[bl] && url[bl] != '/')) {
		*ret = reply_err(con, 404, "this host serves endpoint %s of job %s only (under %s/)",
				 q->name, q->job, q->base);
		r = 1;
		goto out;
	}
	/* (1) the credential, on the headers, before any body is read */
	const char *ck = MHD_lookup_connection_value(con, MHD_COOKIE_KIND, cookie_name(o));
	if (eporigin_cookie_check(o->key, ck, q->job, q->name, q->label, now_wall(), &q->w) ||
	    !srv_token_alive(s, &q->w)) {
		*ret = reply_err(con, 401, "open this endpoint from its server (the job page, or %s/"
				 " on the server's own name): it sends you here with a one-time"
				 " ticket", q->base);
		r = 1;
		goto out;
	}
	*out = q;
	return 0;
out:
	eporigin_req_free(q);
	return r;
}

/* The ticket of this host, used up: 0 with *out (the caller frees it), or -1. */
static int take_ticket(struct eporigin *o, const struct epreq *q, const char *secret,
		       struct ticket *out)
{
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
		if (t.expires >= now && !strcmp(t.job, q->job) && !strcmp(t.name, q->name)) {
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

/* text for an HTML attribute: the page asked for may hold anything a client sent */
static void add_html(struct sbuf *out, const char *t)
{
	for (; *t; t++) {
		switch (*t) {
		case '&': sbuf_adds(out, "&amp;"); break;
		case '<': sbuf_adds(out, "&lt;"); break;
		case '>': sbuf_adds(out, "&gt;"); break;
		case '"': sbuf_adds(out, "&quot;"); break;
		case '\'': sbuf_adds(out, "&#39;"); break;
		default: sbuf_addch(out, *t);
		}
	}
}

/*
 * GET /.trainctl/enter?ticket=T: the ticket becomes this host's cookie, and
 * a page that goes on to the endpoint.  Not a redirect: a browser counts a
 * chain of redirects as started by the page that started it (the UI, on the
 * API's host), so an endpoint's own redirect at its end to another port of
 * the API's host would take the API's SameSite=Strict cookie along.  The
 * page's navigation is this host's own: from here on, every request the
 * endpoint makes the browser send is this host's, another site to the API.
 */
static int ep_enter(struct eporigin *o, struct MHD_Connection *con, const struct epreq *q)
{
	const char *secret = MHD_lookup_connection_value(con, MHD_GET_ARGUMENT_KIND, "ticket");
	struct ticket t;
	if (!secret || take_ticket(o, q, secret, &t))
		return reply_err(con, 403, "this endpoint link was used already or has expired: open"
				 " the endpoint again from the server (its job page, or"
				 " /jobs/%s/endpoints/%s/ on the server's own name)", q->job, q->name);
	struct sbuf ck = SBUF_INIT, loc = SBUF_INIT, page = SBUF_INIT;
	long long expires = (long long)now_wall() + EPORIGIN_COOKIE_SECONDS;
	sbuf_addf(&ck, "%s=", cookie_name(o));
	eporigin_cookie_make(o->key, &t.w, expires, q->job, q->name, q->label, &ck);
	/* no Domain: this host alone; Strict: sent on this host's own navigations only */
	sbuf_addf(&ck, "; Path=/; HttpOnly; SameSite=Strict; Max-Age=%d%s", EPORIGIN_COOKIE_SECONDS,
		  o->https ? "; Secure" : "");
	/* the page asked for; the root is a folder ("" or "?q" gets the slash its links need) */
	sbuf_addf(&loc, "%s%s%s", q->base, t.next[0] == '/' ? "" : "/", t.next);
	ticket_free(&t);
	sbuf_adds(&page, "<!doctype html><meta http-equiv=\"refresh\" content=\"0;url=");
	add_html(&page, loc.buf);
	sbuf_adds(&page, "\"><title>endpoint</title><a href=\"");
	add_html(&page, loc.buf);
	sbuf_addf(&page, "\">endpoint %s of job %s</a>\n", q->name, q->job);
	int ret = MHD_NO;
	struct MHD_Response *r = MHD_create_response_from_buffer(page.len, page.buf,
								  MHD_RESPMEM_MUST_COPY);
	if (r) {
		MHD_add_response_header(r, "Set-Cookie", ck.buf);
		MHD_add_response_header(r, "Content-Type", "text/html; charset=utf-8");
		MHD_add_response_header(r, "Cache-Control", "no-store");
		api_page_headers(r);
		ret = MHD_queue_response(con, 200, r);
		MHD_destroy_response(r);
	}
	sbuf_release(&ck);
	sbuf_release(&loc);
	sbuf_release(&page);
	return ret;
}

int eporigin_answer(struct srv *s, struct MHD_Connection *con, const struct epreq *q,
		    const char *method, const char *raw_uri, const char *body, size_t body_len,
		    bool too_big, struct gconn *gc)
{
	if (q->enter)
		return ep_enter(s->eporigin, con, q);
	if (too_big)
		return reply_err(con, 413, "the body is over %u bytes", TC_SERVER_MAX_BODY);
	struct job_row j = { 0 };
	struct tc_err err = TC_ERR_INIT;
	pthread_mutex_lock(&s->mu);
	int rc = store_job_get(s->st, q->job, &j, &err);
	pthread_mutex_unlock(&s->mu);
	int ret;
	if (rc) {
		ret = rc == TC_ENOTFOUND ? reply_err(con, 404, "no job '%s'", q->job) : reply_tc(con, &err);
	} else if (!server_may_see(&q->w, j.user)) {
		ret = reply_err(con, 403, "job %s belongs to another user", j.id);
	} else {
		struct proxy_req r = { .job = &j, .name = q->name, .raw_uri = raw_uri,
				       .method = method, .body = body, .body_len = body_len,
				       .gc = gc, .origin_id = q->id };
		ret = proxy_answer(s, con, &r);
	}
	if (!rc)
		job_row_release(&j);
	tc_err_release(&err);
	return ret;
}

/* ---- the API's side ---- */

bool eporigin_on(const struct srv *s)
{
	return s->eporigin != NULL;
}

/* The host of job's endpoint name, made when it has none: 0, or an HTTP status (why in err). */
static unsigned host_of(struct eporigin *o, const char *job, const char *name, const char *label,
			struct tc_err *err)
{
	unsigned st = 0;
	pthread_mutex_lock(&o->mu);
	for (size_t i = 0; i < o->nhosts; i++) {
		if (strcmp(o->hosts[i]->label, label))
			continue;
		if (strcmp(o->hosts[i]->job, job) || strcmp(o->hosts[i]->name, name)) {
			/* job a-b's endpoint c and job a's b-c: the first keeps the name */
			tc_error(err, TC_EBUSY, "the host name %s.%s is endpoint %s's of job %s"
				 " now: try again when it has stopped", label, o->host,
				 o->hosts[i]->name, o->hosts[i]->job);
			st = 409;
		}
		pthread_mutex_unlock(&o->mu);
		return st;
	}
	struct ephost *h = xcalloc(1, sizeof(*h));
	h->job = xstrdup(job);
	h->name = xstrdup(name);
	h->label = xstrdup(label);
	struct sbuf b = SBUF_INIT;
	sbuf_addf(&b, "/jobs/%s/endpoints/%s", job, name);
	h->base = sbuf_detach(&b);
	h->id = ++o->next_id;
	XGROW(o->hosts, o->nhosts + 1, o->hosts_alloc);
	o->hosts[o->nhosts++] = h;
	pthread_mutex_unlock(&o->mu);
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

int eporigin_redirect(struct srv *s, struct MHD_Connection *con, const struct who *w,
		      const struct proxy_req *r)
{
	struct eporigin *o = s->eporigin;
	if (strcmp(r->method, "GET") && strcmp(r->method, "HEAD"))
		return reply_err(con, 403, "endpoint %s is served on its own host name: a browser"
				 " opens it with GET %s, and sends the rest there", r->name,
				 "/jobs/JOB/endpoints/NAME/");
	if (is_upgrade(con))
		return reply_err(con, 403, "endpoint %s is served on its own host name: its"
				 " WebSockets go there", r->name);
	int ret;
	if (proxy_endpoint_ready(s, con, r, &ret))
		return ret; /* 404, 503, 502, 400: answered */
	struct sbuf label = SBUF_INIT;
	if (eporigin_label(r->job->id, r->name, &label)) {
		sbuf_release(&label);
		return reply_err(con, 400, "endpoint %s of job %s has no host name: JOB-NAME must be"
				 " one DNS label (at most 63 lower-case letters, digits and '-'), so"
				 " a browser opens only endpoints named so (rename it in the spec)",
				 r->name, r->job->id);
	}
	char *rest = NULL;
	if (!r->raw_uri || proxy_split_uri(r->raw_uri, &rest)) {
		sbuf_release(&label);
		return reply_err(con, 400, "bad endpoint path");
	}
	struct tc_err err = TC_ERR_INIT;
	unsigned char raw[32];
	unsigned st = host_of(o, r->job->id, r->name, label.buf, &err);
	if (st || random_bytes(raw, sizeof(raw), &err)) {
		free(rest);
		sbuf_release(&label);
		ret = reply_err(con, st ? st : 503, "%s", err.msg);
		tc_err_release(&err);
		return ret;
	}
	char secret[2 * sizeof(raw) + 1];
	hex_encode(secret, raw, sizeof(raw));
	struct sbuf hash = SBUF_INIT;
	server_token_hash(secret, &hash);
	struct ticket t = { .w = *w, .job = xstrdup(r->job->id), .name = xstrdup(r->name),
			    .next = rest, .expires = now_wall() + o->ticket_seconds };
	t.w.user = xstrdup(w->user);
	memcpy(t.hash, hash.buf, sizeof(t.hash) - 1);
	t.hash[sizeof(t.hash) - 1] = '\0';
	sbuf_release(&hash);
	pthread_mutex_lock(&o->mu);
	add_ticket(o, &t);
	pthread_mutex_unlock(&o->mu);
	struct sbuf loc = SBUF_INIT;
	eporigin_location(o->https, label.buf, o->host,
			  MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Host"), secret, &loc);
	sbuf_release(&label);
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
