/*
 * guard.c -- what the server checks before it reads a request's body or
 * asks who sent it (docs/security.md):
 *  - the Host a request names (DNS rebinding: only the listen address, IP
 *    literals, localhost and the names given with --host-name);
 *  - the Origin of a state-changing request (cross-site forgery);
 *  - a JSON Content-Type on every body (an HTML form cannot send one);
 *  - connections: per client address and in total, and a deadline for a
 *    request's headers that bytes trickled in cannot extend (slowloris).
 * The checks on headers are pure functions, for the unit tests.
 */
#include "api/api_int.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- Host, Origin, Content-Type (pure) ---- */

/* host[:port] split; false when malformed.  "[v6]:port" keeps the brackets off. */
static bool split_host(const char *hp, char *host, size_t hostsz, long *port)
{
	const char *end;
	*port = -1;
	if (!*hp)
		return false;
	if (hp[0] == '[') {
		end = strchr(hp, ']');
		if (!end || (size_t)(end - hp - 1) >= hostsz)
			return false;
		memcpy(host, hp + 1, (size_t)(end - hp - 1));
		host[end - hp - 1] = '\0';
		end++;
	} else {
		end = strchr(hp, ':');
		if (!end)
			end = hp + strlen(hp);
		if ((size_t)(end - hp) >= hostsz)
			return false;
		memcpy(host, hp, (size_t)(end - hp));
		host[end - hp] = '\0';
	}
	if (*end == ':')
		return parse_long(end + 1, 1, 65535, port);
	return *end == '\0' && *host;
}

bool api_host_ok(const char *host_header, long listen_port, const char *const *names)
{
	char host[256];
	long port;
	if (!host_header || !split_host(host_header, host, sizeof(host), &port))
		return false;
	for (char *c = host; *c; c++)
		*c = (char)tolower((unsigned char)*c);
	for (size_t i = 0; names && names[i]; i++)
		if (!strcasecmp(host, names[i]))
			return true; /* a configured name: any port (a reverse proxy may drop it) */
	if (port != -1 && port != listen_port)
		return false;
	/* a rebinding attack needs a name it controls: an IP literal is never one */
	unsigned char buf[sizeof(struct in6_addr)];
	if (inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1)
		return true;
	/* browsers resolve localhost to loopback themselves (never through DNS) */
	return !strcmp(host, "localhost");
}

bool api_origin_ok(const char *origin, const char *host_header)
{
	if (!origin)
		return true; /* not a browser (curl, the CLI): they prove who they are with a token */
	if (!host_header)
		return false;
	const char *rest = !strncasecmp(origin, "http://", 7) ? origin + 7
			   : !strncasecmp(origin, "https://", 8) ? origin + 8 : NULL;
	/* "null" (a sandboxed frame, a file:// page) is never same-origin */
	return rest && !strcasecmp(rest, host_header);
}

bool api_fetch_site_ok(const char *site)
{
	/* another port of this host, or a job endpoint's host name on our site, is "same-site":
	 * as foreign as cross-site (state changes here, and /login: api.c) */
	return !site || !strcmp(site, "same-origin") || !strcmp(site, "none");
}

/* application/json, or the hub's application/x-ndjson: no HTML form can send either */
bool api_json_type_ok(const char *ctype)
{
	static const char *const ok[] = { "application/json", "application/x-ndjson" };
	if (!ctype)
		return false;
	while (*ctype == ' ')
		ctype++;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		size_t n = strlen(ok[i]);
		if (!strncasecmp(ctype, ok[i], n) &&
		    (ctype[n] == '\0' || ctype[n] == ';' || ctype[n] == ' '))
			return true;
	}
	return false;
}

bool api_method_changes(const char *method)
{
	return strcmp(method, "GET") && strcmp(method, "HEAD") && strcmp(method, "OPTIONS");
}

/* ---- connections ---- */

static double now_mono_s(void)
{
	return (double)now_mono_ms() / 1000.0;
}


struct gconn {
	struct gconn *next, *prev;
	int fd;
	char client[INET6_ADDRSTRLEN]; /* "" for the Unix socket: not counted */
	double since;                  /* waiting for headers since; 0 while a request runs */
};

struct guard {
	pthread_mutex_t mu;
	struct gconn head;             /* a ring */
	unsigned total, max_total, max_client;
	double deadline;
	pthread_t reaper;
	bool reaping, stop;
	pthread_cond_t cv;
};

struct guard *guard_new(unsigned max_total, unsigned max_client, double header_deadline)
{
	struct guard *g = xcalloc(1, sizeof(*g));
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->cv, NULL);
	g->head.next = g->head.prev = &g->head;
	g->max_total = max_total;
	g->max_client = max_client;
	g->deadline = header_deadline;
	return g;
}

static unsigned client_count(struct guard *g, const char *client)
{
	unsigned n = 0;
	for (struct gconn *c = g->head.next; c != &g->head; c = c->next)
		n += !strcmp(c->client, client);
	return n;
}

struct gconn *guard_open(struct guard *g, int fd, const struct sockaddr *sa)
{
	struct gconn *c = xcalloc(1, sizeof(*c));
	c->fd = fd;
	if (sa && sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, c->client, sizeof(c->client));
	else if (sa && sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, c->client,
			  sizeof(c->client));
	c->since = now_mono_s();
	pthread_mutex_lock(&g->mu);
	c->next = &g->head;
	c->prev = g->head.prev;
	c->prev->next = c;
	g->head.prev = c;
	if (c->client[0])
		g->total++;
	pthread_mutex_unlock(&g->mu);
	return c;
}

void guard_close(struct guard *g, struct gconn *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&g->mu);
	c->prev->next = c->next;
	c->next->prev = c->prev;
	if (c->client[0])
		g->total--;
	pthread_mutex_unlock(&g->mu);
	free(c);
}

void guard_busy(struct guard *g, struct gconn *c, bool busy)
{
	if (!c)
		return;
	pthread_mutex_lock(&g->mu);
	c->since = busy ? 0 : now_mono_s();
	pthread_mutex_unlock(&g->mu);
}

void guard_forget(struct guard *g, struct gconn *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&g->mu);
	c->fd = -1; /* the reaper shuts down only connections with an fd */
	pthread_mutex_unlock(&g->mu);
}

bool guard_full(struct guard *g, struct gconn *c)
{
	if (!c || !c->client[0])
		return false; /* the Unix socket: local accounts, never refused */
	pthread_mutex_lock(&g->mu);
	bool full = g->total > g->max_total || client_count(g, c->client) > g->max_client;
	pthread_mutex_unlock(&g->mu);
	return full;
}

/*
 * Every 250 ms: a connection that has waited for a request's headers for
 * longer than the deadline is shut down, however many bytes it trickled
 * in (libmicrohttpd's own timeout restarts with every byte).  Its thread
 * sees the end of the stream and closes it.
 */
static void *reaper(void *arg)
{
	struct guard *g = arg;
	pthread_mutex_lock(&g->mu);
	while (!g->stop) {
		double now = now_mono_s();
		for (struct gconn *c = g->head.next; c != &g->head; c = c->next)
			if (c->since > 0 && now - c->since > g->deadline && c->fd >= 0) {
				shutdown(c->fd, SHUT_RDWR);
				c->fd = -1; /* once: the fd may be reused after its close */
			}
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 250 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&g->cv, &g->mu, &ts);
	}
	pthread_mutex_unlock(&g->mu);
	return NULL;
}

int guard_start(struct guard *g)
{
	int rc = pthread_create(&g->reaper, NULL, reaper, g);
	g->reaping = rc == 0;
	return rc;
}

void guard_free(struct guard *g)
{
	if (!g)
		return;
	if (g->reaping) {
		pthread_mutex_lock(&g->mu);
		g->stop = true;
		pthread_cond_signal(&g->cv);
		pthread_mutex_unlock(&g->mu);
		pthread_join(g->reaper, NULL);
	}
	while (g->head.next != &g->head) {
		struct gconn *c = g->head.next;
		c->prev->next = c->next;
		c->next->prev = c->prev;
		free(c);
	}
	pthread_mutex_destroy(&g->mu);
	pthread_cond_destroy(&g->cv);
	free(g);
}
