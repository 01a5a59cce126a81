/*
 * proxy.c -- /jobs/JOB/endpoints/NAME/... : the server's way into a job's
 * endpoint (endpoint/endpoint.h, docs/endpoints.md).
 *
 * The route runs behind the API's own checks (guard.c: Host, Origin; auth:
 * a token, the session cookie or the Unix socket's peer; find_job: the
 * job's owner or an admin; eporigin_decide: which browsers), or on an
 * endpoint's own origin behind its cookie (eporigin.c).  Then, here:
 *  - the endpoint must be recorded running and its job not ended (a port
 *    a dead endpoint left may be someone else's by now);
 *  - the request goes to 127.0.0.1:PORT, or for an endpoint recorded on
 *    another host (node 0 of a Slurm job) into a connection its node
 *    parked here (gateway/parking.h), with the caller's credentials
 *    taken out (Authorization, the trainctl_session cookie, Origin) and,
 *    for a kind that takes a token, the endpoint's own in their place;
 *  - the answer comes back as it is read (a callback response), less the
 *    hop-by-hop headers and any cookie that would be trainctl's;
 *  - a WebSocket upgrade (Jupyter's kernel channels) that the endpoint
 *    accepts becomes a byte pump between the two sockets, in the
 *    connection's own thread (libmicrohttpd runs one per connection), until
 *    either side closes or the server stops (proxy_stop_all).
 * Plain HTTP goes upstream as HTTP/1.0, so the answer is delimited by its
 * Content-Length or the close, never chunked.
 */
#include "api/api_int.h"
#include "core/lazylib.h"
#include "core/sbuf.h"
#include "core/sock.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "endpoint/endpoint.h"
#include "gateway/parking.h"
#include "store/store.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define HEAD_MAX (64u << 10)     /* the endpoint's answer's headers */
#define READ_SECONDS 300         /* an answer that stalls this long is cut */

/* ---- pure parts (unit-tested) ---- */

int proxy_split_uri(const char *raw, char **rest)
{
	*rest = NULL;
	if (!raw || raw[0] != '/')
		return -1;
	/* "/jobs/J/endpoints/N" then the rest: "" or "/..." or "?..." */
	const char *p = raw;
	for (int seg = 0; seg < 4; seg++) {
		if (*p != '/')
			return -1;
		p++;
		size_t n = strcspn(p, "/?");
		if (!n)
			return -1;
		p += n;
	}
	*rest = xstrdup(p);
	return 0;
}

bool proxy_header_dropped(const char *name)
{
	static const char *const drop[] = {
		"Host", "Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authorization",
		"Proxy-Authenticate", "TE", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length",
		"Authorization", "Cookie", "Origin", "Forwarded", "X-Forwarded-For",
		"X-Forwarded-Host", "X-Forwarded-Proto",
	};
	for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
		if (!strcasecmp(name, drop[i]))
			return true;
	return false;
}

/*
 * Is the cookie "name=value..." (a Cookie pair or a Set-Cookie value) one of
 * trainctl's own, the API's session or an endpoint's?  Its name compared as
 * browsers read it: spaces and TABs around it dropped, case aside (a
 * "trainctl_session\t=x" is the session to a browser, issue #23 L1), with or
 * without the __Host- prefix.
 */
static bool cookie_ours(const char *p, size_t len)
{
	static const char *const ours[] = { API_SESSION_COOKIE, EPORIGIN_COOKIE };
	size_t n = 0;
	while (n < len && p[n] != '=')
		n++;
	if (n == len)
		n = 0; /* a value without a name: a browser takes it as a nameless cookie */
	size_t a = 0, b = n;
	while (a < b && (p[a] == ' ' || p[a] == '\t'))
		a++;
	while (b > a && (p[b - 1] == ' ' || p[b - 1] == '\t'))
		b--;
	if (b - a > 7 && !strncasecmp(p + a, "__Host-", 7))
		a += 7;
	for (size_t i = 0; i < sizeof(ours) / sizeof(ours[0]); i++)
		if (b - a == strlen(ours[i]) && !strncasecmp(p + a, ours[i], b - a))
			return true;
	return false;
}

void proxy_cookie_filter(const char *cookie, struct sbuf *out)
{
	const char *p = cookie;
	while (p && *p) {
		while (*p == ' ' || *p == '\t' || *p == ';')
			p++;
		size_t n = strcspn(p, ";");
		if (!n)
			break;
		/* the caller's session, and the endpoint cookie that let them in here */
		if (!cookie_ours(p, n)) {
			if (out->len)
				sbuf_adds(out, "; ");
			sbuf_add(out, p, n);
		}
		p += n;
	}
}

bool proxy_set_cookie_ok(const char *value)
{
	size_t n = strcspn(value, ";");
	const char *eq = memchr(value, '=', n);
	size_t lead = strspn(value, " \t");
	/* a nameless cookie ("=trainctl_session=x", "x"): a browser may send its value alone,
	 * which reads as any name= on our side */
	if (!eq || value + lead == eq || cookie_ours(value, n))
		return false;
	/* a Domain attribute reaches other hosts (the API's, other endpoints'): host-only alone */
	for (const char *a = value + n; *a == ';'; a += strcspn(a + 1, ";") + 1) {
		const char *k = a + 1;
		while (*k == ' ' || *k == '\t')
			k++;
		if (!strncasecmp(k, "domain", 6)) {
			const char *e = k + 6;
			while (*e == ' ' || *e == '\t')
				e++;
			if (*e == '=' || *e == ';' || !*e)
				return false;
		}
	}
	return true;
}

static char *memdup(const char *p, size_t n)
{
	char *c = xmalloc(n);
	memcpy(c, p, n);
	return c;
}

/* ---- the endpoint's socket ---- */

/* ---- the request upstream ---- */

struct hdr_ctx {
	struct sbuf *out;
};

static enum MHD_Result copy_header(void *cls, enum MHD_ValueKind kind, const char *key,
				   const char *value)
{
	struct hdr_ctx *h = cls;
	(void)kind;
	if (!key || !value || proxy_header_dropped(key))
		return MHD_YES;
	/* a header line is one line: CR and LF never reach the endpoint */
	if (strpbrk(key, "\r\n:") || strpbrk(value, "\r\n"))
		return MHD_YES;
	sbuf_addf(h->out, "%s: %s\r\n", key, value);
	return MHD_YES;
}

/* ---- the answer: headers, then the body as it comes ---- */

struct answer {
	int fd;
	struct sbuf head;   /* what was read: the headers, and the body's first bytes after them */
	size_t body_off;    /* where the body starts in head */
	unsigned status;
	long long length;   /* Content-Length, or -1 */
};

/* Read until the end of the headers; 0, or -1 (no answer, or not HTTP). */
static int read_head(struct answer *a)
{
	char buf[8192];
	for (;;) {
		char *end = a->head.len ? strstr(a->head.buf, "\r\n\r\n") : NULL;
		if (end) {
			a->body_off = (size_t)(end - a->head.buf) + 4;
			break;
		}
		if (a->head.len > HEAD_MAX)
			return -1;
		ssize_t r = recv(a->fd, buf, sizeof(buf), 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		/* a NUL in the headers would hide the rest from strstr: refused */
		if (memchr(buf, '\0', (size_t)r))
			return -1;
		sbuf_add(&a->head, buf, (size_t)r);
	}
	unsigned maj, min, st;
	if (sscanf(a->head.buf, "HTTP/%u.%u %u", &maj, &min, &st) != 3 || st < 100 || st > 999)
		return -1;
	a->status = st;
	return 0;
}

/* Call fn(name, value) for each header line of the answer. */
static void each_header(const struct answer *a,
			void (*fn)(void *ctx, const char *name, const char *value), void *ctx)
{
	const char *p = strstr(a->head.buf, "\r\n");
	const char *end = a->head.buf + a->body_off - 2;
	while (p && p + 2 < end) {
		p += 2;
		const char *eol = strstr(p, "\r\n");
		if (!eol || eol > end)
			break;
		const char *colon = memchr(p, ':', (size_t)(eol - p));
		if (colon) {
			char *name = xstrndup(p, (size_t)(colon - p));
			const char *v = colon + 1;
			while (*v == ' ' || *v == '\t')
				v++;
			char *value = xstrndup(v, (size_t)(eol - v));
			fn(ctx, name, value);
			free(name);
			free(value);
		}
		p = eol;
	}
}

static void note_length(void *ctx, const char *name, const char *value)
{
	struct answer *a = ctx;
	long n;
	if (!strcasecmp(name, "Content-Length") && parse_long(value, 0, 1L << 62, &n))
		a->length = n;
}

/* The endpoint's headers onto our response, less the hop-by-hop ones and our cookie. */
static void add_header(void *ctx, const char *name, const char *value)
{
	struct MHD_Response *r = ctx;
	static const char *const skip[] = { "Connection", "Keep-Alive", "Transfer-Encoding",
					    "Content-Length", "Proxy-Connection", "Trailer", "Date",
					    "Server" };
	for (size_t i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
		if (!strcasecmp(name, skip[i]))
			return;
	/* an endpoint may not set (or end) trainctl's cookies, nor one beyond its own host */
	if (!strcasecmp(name, "Set-Cookie") && !proxy_set_cookie_ok(value))
		return;
	if (MHD_add_response_header(r, name, value) != MHD_YES)
		errno = 0; /* one header libmicrohttpd refuses is not the answer's end */
}

struct body_src {
	int fd;
	char *pre;       /* the body's bytes read with the headers */
	size_t npre, off;
};

static ssize_t read_body(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct body_src *b = cls;
	(void)pos;
	if (b->off < b->npre) {
		size_t n = b->npre - b->off < max ? b->npre - b->off : max;
		memcpy(buf, b->pre + b->off, n);
		b->off += n;
		return (ssize_t)n;
	}
	for (;;) {
		ssize_t r = recv(b->fd, buf, max, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r > 0)
			return r;
		return r == 0 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
	}
}

static void free_body(void *cls)
{
	struct body_src *b = cls;
	relay_close(b->fd);
	free(b->pre);
	free(b);
}

/* ---- WebSocket: a byte pump between the caller and the endpoint ---- */

struct pump {
	struct pump *next, *prev;
	int up;          /* the endpoint's socket (ours) */
	int down;        /* the caller's (libmicrohttpd's: shut down, never closed here) */
	char *pre;       /* the endpoint's bytes read after its 101 */
	size_t npre;
	int origin_id;   /* the endpoint host it came in on (proxy_stop_origin), 0: the API's */
	struct gconn *gc;
	struct guard *guard;
};

static pthread_mutex_t pumps_mu = PTHREAD_MUTEX_INITIALIZER;
static struct pump pumps = { &pumps, &pumps, -1, -1, NULL, 0, 0, NULL, NULL };

void proxy_stop_all(void)
{
	pthread_mutex_lock(&pumps_mu);
	for (struct pump *p = pumps.next; p != &pumps; p = p->next) {
		shutdown(p->up, SHUT_RDWR);
		shutdown(p->down, SHUT_RDWR);
	}
	pthread_mutex_unlock(&pumps_mu);
}

void proxy_stop_origin(int id)
{
	pthread_mutex_lock(&pumps_mu);
	for (struct pump *p = pumps.next; p != &pumps; p = p->next)
		if (id && p->origin_id == id) {
			shutdown(p->up, SHUT_RDWR);
			shutdown(p->down, SHUT_RDWR);
		}
	pthread_mutex_unlock(&pumps_mu);
}

static void on_upgrade(void *cls, struct MHD_Connection *con, void *con_cls, const char *extra_in,
		       size_t extra_in_size, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	struct pump *p = cls;
	(void)con;
	(void)con_cls;
	p->down = sock;
	/* the guard's header deadline is for requests; this is a stream now */
	guard_forget(p->guard, p->gc);
	pthread_mutex_lock(&pumps_mu);
	p->next = &pumps;
	p->prev = pumps.prev;
	p->prev->next = p;
	pumps.prev = p;
	pthread_mutex_unlock(&pumps_mu);
	bool ok = (!p->npre || sock_send_all(sock, p->pre, p->npre) == 0) &&
		  (!extra_in_size || sock_send_all(p->up, extra_in, extra_in_size) == 0);
	if (ok)
		sock_pump(sock, p->up);
	pthread_mutex_lock(&pumps_mu);
	p->prev->next = p->next;
	p->next->prev = p->prev;
	pthread_mutex_unlock(&pumps_mu);
	shutdown(p->up, SHUT_RDWR);
	relay_close(p->up);
	free(p->pre);
	free(p);
	MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
}

/* ---- the list ---- */

int proxy_list(struct srv *s, struct MHD_Connection *con, const struct job_row *job)
{
	struct store_endpoint *v = NULL;
	size_t n = 0;
	struct tc_err err = TC_ERR_INIT;
	pthread_mutex_lock(&s->mu);
	int rc = store_endpoints(s->st, job->id, &v, &n, &err);
	pthread_mutex_unlock(&s->mu);
	int ret;
	if (rc) {
		ret = reply_tc(con, &err);
	} else {
		/* paths only: the client knows the server's address better than we do */
		json_t *a = endpoint_list_json(job->id, v, n, NULL, false);
		size_t i;
		json_t *o;
		json_array_foreach(a, i, o) {
			json_t *path = json_object_get(o, "path");
			if (json_is_string(path))
				json_object_set(o, "url", path);
			else
				json_object_del(o, "url");
		}
		/* where a browser sees the pages: their own origins, or ours (owner only) */
		ret = reply_jsont(con, 200, json_pack("{s:s, s:o, s:s}", "job", job->id, "endpoints", a,
						      "origin", eporigin_on(s) ? "own" : "server"));
	}
	store_endpoints_free(v, n);
	tc_err_release(&err);
	return ret;
}

/* ---- the route ---- */

static bool is_upgrade(struct MHD_Connection *con)
{
	const char *u = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Upgrade");
	return u && !strcasecmp(u, "websocket");
}

/* 0 with e filled, or the reply queued in *ret. */
static int find_endpoint(struct srv *s, struct MHD_Connection *con, const struct proxy_req *r,
			 struct store_endpoint *e, int *ret)
{
	struct tc_err err = TC_ERR_INIT;
	pthread_mutex_lock(&s->mu);
	int rc = store_endpoint_get(s->st, r->job->id, r->name, e, &err);
	pthread_mutex_unlock(&s->mu);
	if (rc) {
		*ret = rc == TC_ENOTFOUND ? reply_err(con, 404, "job %s has no endpoint '%s'",
						      r->job->id, r->name)
					  : reply_tc(con, &err);
		tc_err_release(&err);
		return -1;
	}
	tc_err_release(&err);
	const struct endpoint_kind *k = endpoint_kind_find(e->kind);
	if (!k || !k->http)
		*ret = reply_err(con, 400, "endpoint %s (%s) is not a web service%s", e->name, e->kind,
				 k && !strcmp(k->name, "ssh") ? ": use `trainctl ssh`" : "");
	else if (r->job->ended > 0 || !endpoint_state_is(e->state, ENDPOINT_RUNNING))
		*ret = reply_err(con, 503, "endpoint %s is %s%s%s", e->name,
				 r->job->ended > 0 ? "gone: its job has ended" : e->state,
				 e->note ? ": " : "", e->note && !(r->job->ended > 0) ? e->note : "");
	else if (!e->host || e->port <= 0)
		*ret = reply_err(con, 502, "endpoint %s has no address", e->name);
	else
		return 0;
	store_endpoint_release(e);
	return -1;
}

int proxy_endpoint_ready(struct srv *s, struct MHD_Connection *con, const struct proxy_req *r,
			 int *ret)
{
	struct store_endpoint e;
	if (find_endpoint(s, con, r, &e, ret))
		return -1;
	store_endpoint_release(&e);
	return 0;
}

/* "/jobs/J/endpoints/N/rest?q" for the endpoint: its own path, or the rest alone (strip_prefix). */
static void upstream_path(const struct endpoint_kind *k, const char *job_id, const char *name,
			  const char *rest, struct sbuf *out)
{
	if (!k->strip_prefix)
		sbuf_addf(out, "/jobs/%s/endpoints/%s", job_id, name);
	if (!out->len && rest[0] != '/')
		sbuf_addch(out, '/');
	sbuf_adds(out, rest);
}

int proxy_answer(struct srv *s, struct MHD_Connection *con, const struct proxy_req *r)
{
	int ret;
	char *rest = NULL;
	if (!r->raw_uri || proxy_split_uri(r->raw_uri, &rest))
		return reply_err(con, 400, "bad endpoint path");
	if (!rest[0] || rest[0] == '?') {
		/* the endpoint's root is a folder: its relative links need the slash */
		struct sbuf loc = SBUF_INIT;
		sbuf_addf(&loc, "/jobs/%s/endpoints/%s/%s", r->job->id, r->name, rest);
		struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"",
									     MHD_RESPMEM_PERSISTENT);
		ret = MHD_NO;
		if (resp) {
			MHD_add_response_header(resp, "Location", loc.buf);
			ret = MHD_queue_response(con, 302, resp);
			MHD_destroy_response(resp);
		}
		sbuf_release(&loc);
		free(rest);
		return ret;
	}
	bool up = is_upgrade(con);
	if (up) {
		/* a page elsewhere may not open a socket into a job (no Origin check covers GET) */
		const char *origin = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Origin");
		const char *host = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Host");
		if (!api_origin_ok(origin, host)) {
			free(rest);
			return reply_err(con, 403, "a WebSocket from another origin (%s) is refused",
					 origin);
		}
	}
	struct store_endpoint e;
	if (find_endpoint(s, con, r, &e, &ret)) {
		free(rest);
		return ret;
	}
	const struct endpoint_kind *k = endpoint_kind_find(e.kind);
	struct sbuf req = SBUF_INIT, path = SBUF_INIT;
	upstream_path(k, r->job->id, r->name, rest, &path);
	free(rest);
	sbuf_addf(&req, "%s %s HTTP/%s\r\nHost: 127.0.0.1:%d\r\n", r->method, path.buf,
		  up ? "1.1" : "1.0", e.port);
	sbuf_release(&path);
	struct hdr_ctx hc = { &req };
	MHD_get_connection_values(con, MHD_HEADER_KIND, copy_header, &hc);
	const char *cookie = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Cookie");
	if (cookie) {
		struct sbuf kept = SBUF_INIT;
		proxy_cookie_filter(cookie, &kept);
		if (kept.len && !strpbrk(kept.buf, "\r\n"))
			sbuf_addf(&req, "Cookie: %s\r\n", kept.buf);
		sbuf_release(&kept);
	}
	if (k->auth_header && e.secret) {
		sbuf_addf(&req, "%s: ", k->auth_header);
		sbuf_addf(&req, k->auth_value, e.secret);
		sbuf_adds(&req, "\r\n");
	}
	sbuf_adds(&req, "X-Forwarded-Proto: http\r\n");
	if (up)
		sbuf_adds(&req, "Connection: Upgrade\r\nUpgrade: websocket\r\n");
	else
		sbuf_addf(&req, "Connection: close\r\nContent-Length: %zu\r\n", r->body_len);
	sbuf_adds(&req, "\r\n");
	/* on another host: a connection its node parked here (gateway/parking.h), else none in time */
	bool remote = strcmp(e.host, "127.0.0.1") != 0;
	struct answer a = { .fd = remote ? relay_take(r->job->id, e.name) : sock_connect_local(e.port),
			    .length = -1 };
	sbuf_init(&a.head, 0);
	if (a.fd < 0 && remote) {
		ret = reply_err(con, 502, "endpoint %s runs on %s: its node has no relay connection"
				" to this server within %d s (is the job's supervisor there running,"
				" and does it reach this server?)", e.name, e.host, RELAY_WAIT_MS / 1000);
		goto out;
	}
	if (a.fd < 0) {
		ret = reply_err(con, 502, "endpoint %s does not answer on its port yet (%s)", e.name,
				strerror(errno));
		goto out;
	}
	struct timeval tv = { READ_SECONDS, 0 };
	if (setsockopt(a.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0)
		errno = 0;
	if (sock_send_all(a.fd, req.buf, req.len) || (r->body_len && sock_send_all(a.fd, r->body, r->body_len)) ||
	    read_head(&a)) {
		ret = reply_err(con, 502, "endpoint %s gave no answer", e.name);
		goto out;
	}
	each_header(&a, note_length, &a);
	struct MHD_Response *resp;
	if (up && a.status == 101) {
		struct pump *p = xcalloc(1, sizeof(*p));
		p->up = a.fd;
		p->down = -1;
		p->npre = a.head.len - a.body_off;
		p->pre = p->npre ? memdup(a.head.buf + a.body_off, p->npre) : NULL;
		p->gc = r->gc;
		p->guard = s->guard;
		p->origin_id = r->origin_id;
		resp = MHD_create_response_for_upgrade(on_upgrade, p);
		if (!resp) {
			free(p->pre);
			free(p);
		} else {
			a.fd = -1; /* the pump's */
		}
	} else {
		struct body_src *b = xcalloc(1, sizeof(*b));
		b->fd = a.fd;
		b->npre = a.head.len - a.body_off;
		b->pre = b->npre ? memdup(a.head.buf + a.body_off, b->npre) : NULL;
		resp = MHD_create_response_from_callback(
			a.length >= 0 ? (uint64_t)a.length : MHD_SIZE_UNKNOWN, 16384, read_body, b,
			free_body);
		if (!resp) {
			free(b->pre);
			free(b);
		} else {
			a.fd = -1; /* the body's */
		}
	}
	if (!resp) {
		ret = reply_err(con, 500, "cannot answer");
		goto out;
	}
	each_header(&a, add_header, resp);
	if (a.status == 101)
		MHD_add_response_header(resp, "Connection", "Upgrade");
	ret = MHD_queue_response(con, a.status, resp);
	MHD_destroy_response(resp);
out:
	relay_close(a.fd);
	sbuf_release(&a.head);
	sbuf_release(&req);
	store_endpoint_release(&e);
	return ret;
}
