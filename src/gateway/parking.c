/*
 * parking.c -- parked connections from the nodes of a job whose endpoints
 * run elsewhere (parking.h): the pool, and the hub route that fills it.
 */
#include "gateway/parking.h"
#include "api/api_int.h"
#include "core/lazylib.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "hub/hub.h"
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- the pool (pure: sockets and threads, no server) ---- */

enum { PARKED, TAKEN, DONE };

struct entry {
	struct entry *next;
	char *job, *name;
	int fd;
	int state;
};

struct relay_pool {
	pthread_mutex_t mu;
	pthread_cond_t cv; /* any change of state */
	struct entry *head;
	int park_max, job_max;
	bool stopping;
};

struct relay_pool *relay_pool_new(int park_max, int job_max)
{
	struct relay_pool *p = xcalloc(1, sizeof(*p));
	pthread_mutex_init(&p->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cv, &ca);
	pthread_condattr_destroy(&ca);
	p->park_max = park_max;
	p->job_max = job_max;
	return p;
}

void relay_pool_free(struct relay_pool *p)
{
	if (!p)
		return;
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p);
}

static void count_locked(struct relay_pool *p, const char *job, const char *name, int *parked,
			 int *used)
{
	*parked = *used = 0;
	for (struct entry *e = p->head; e; e = e->next) {
		if (strcmp(e->job, job) || (name && strcmp(e->name, name)))
			continue;
		if (e->state == PARKED)
			(*parked)++;
		else if (e->state == TAKEN)
			(*used)++;
	}
}

void relay_pool_count(struct relay_pool *p, const char *job, const char *name, int *parked,
		      int *used)
{
	pthread_mutex_lock(&p->mu);
	count_locked(p, job, name, parked, used);
	pthread_mutex_unlock(&p->mu);
}

static int admit_locked(struct relay_pool *p, const char *job, const char *name)
{
	if (p->stopping)
		return 503;
	int parked, used, jparked, jused;
	count_locked(p, job, name, &parked, &used);
	count_locked(p, job, NULL, &jparked, &jused);
	if (parked >= p->park_max || jparked + jused >= p->job_max)
		return 429;
	return 0;
}

int relay_pool_admit(struct relay_pool *p, const char *job, const char *name)
{
	pthread_mutex_lock(&p->mu);
	int st = admit_locked(p, job, name);
	pthread_mutex_unlock(&p->mu);
	return st;
}

static void unlink_locked(struct relay_pool *p, struct entry *x)
{
	for (struct entry **pp = &p->head; *pp; pp = &(*pp)->next)
		if (*pp == x) {
			*pp = x->next;
			break;
		}
}

int relay_pool_hold(struct relay_pool *p, const char *job, const char *name, int fd,
		    bool (*gone)(void *ctx, const char *job), void *ctx)
{
	pthread_mutex_lock(&p->mu);
	if (admit_locked(p, job, name)) {
		pthread_mutex_unlock(&p->mu);
		return -1;
	}
	struct entry *e = xcalloc(1, sizeof(*e));
	*e = (struct entry){ p->head, xstrdup(job), xstrdup(name), fd, PARKED };
	p->head = e;
	pthread_cond_broadcast(&p->cv);
	int64_t next_check = now_mono_ms() + 1000;
	while (e->state == PARKED) {
		pthread_mutex_unlock(&p->mu);
		/* parked: nothing may come from the node; a byte or its end drops the entry */
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		int r = poll(&pf, 1, 500);
		bool ended = false;
		if (gone && now_mono_ms() >= next_check) {
			ended = gone(ctx, job);
			next_check = now_mono_ms() + 1000;
		}
		pthread_mutex_lock(&p->mu);
		if (e->state != PARKED)
			break; /* taken meanwhile: what poll saw is the taker's */
		if ((r > 0 && pf.revents) || (r < 0 && errno != EINTR) || ended || p->stopping) {
			e->state = DONE;
			shutdown(fd, SHUT_RDWR);
		}
	}
	while (e->state == TAKEN)
		pthread_cond_wait(&p->cv, &p->mu);
	unlink_locked(p, e);
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	free(e->job);
	free(e->name);
	free(e);
	return 0;
}

int relay_pool_take(struct relay_pool *p, const char *job, const char *name, int wait_ms)
{
	struct timespec until = mono_deadline(wait_ms);
	int fd = -1;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		for (struct entry *e = p->head; e; e = e->next)
			if (e->state == PARKED && !strcmp(e->job, job) && !strcmp(e->name, name)) {
				e->state = TAKEN;
				fd = e->fd;
				break;
			}
		if (fd >= 0 || p->stopping)
			break;
		int r = pthread_cond_timedwait(&p->cv, &p->mu, &until);
		if (r == ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&p->mu);
	return fd;
}

bool relay_pool_release(struct relay_pool *p, int fd)
{
	bool found = false;
	pthread_mutex_lock(&p->mu);
	for (struct entry *e = p->head; e; e = e->next)
		if (e->state == TAKEN && e->fd == fd) {
			shutdown(fd, SHUT_RDWR);
			e->state = DONE;
			found = true;
			pthread_cond_broadcast(&p->cv);
			break;
		}
	pthread_mutex_unlock(&p->mu);
	return found;
}

void relay_pool_stop(struct relay_pool *p)
{
	pthread_mutex_lock(&p->mu);
	p->stopping = true;
	for (struct entry *e = p->head; e; e = e->next)
		if (e->state == PARKED) {
			e->state = DONE;
			shutdown(e->fd, SHUT_RDWR);
		}
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

/* ---- the server's pool ---- */

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static struct relay_pool *pool; /* made on first use, lives as long as the process */

static struct relay_pool *the_pool(void)
{
	pthread_mutex_lock(&pool_mu);
	if (!pool)
		pool = relay_pool_new(RELAY_PARK_MAX, RELAY_JOB_MAX);
	struct relay_pool *p = pool;
	pthread_mutex_unlock(&pool_mu);
	return p;
}

int relay_take(const char *job, const char *name)
{
	return relay_pool_take(the_pool(), job, name, RELAY_WAIT_MS);
}

void relay_close(int fd)
{
	if (fd < 0)
		return;
	pthread_mutex_lock(&pool_mu);
	struct relay_pool *p = pool;
	pthread_mutex_unlock(&pool_mu);
	if (!p || !relay_pool_release(p, fd))
		close(fd);
}

void relay_stop_all(void)
{
	pthread_mutex_lock(&pool_mu);
	struct relay_pool *p = pool;
	pthread_mutex_unlock(&pool_mu);
	if (p)
		relay_pool_stop(p);
}

struct parked {
	struct srv *s;
	struct gconn *gc;
	char *job, *name;
};

/* Has the job ended (or gone)?  Its parked connections go with it. */
static bool job_gone(void *ctx, const char *job)
{
	struct srv *s = ctx;
	struct job_row r = { 0 };
	struct tc_err err = TC_ERR_INIT;
	pthread_mutex_lock(&s->mu);
	int rc = store_job_get(s->st, job, &r, &err);
	pthread_mutex_unlock(&s->mu);
	bool gone = rc == TC_ENOTFOUND || (!rc && r.ended > 0);
	job_row_release(&r);
	tc_err_release(&err);
	return gone;
}

static void on_parked(void *cls, struct MHD_Connection *con, void *con_cls, const char *extra_in,
		      size_t extra_in_size, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	struct parked *pk = cls;
	(void)con;
	(void)con_cls;
	(void)extra_in;
	/* a stream now: the guard's header deadline is for requests */
	guard_forget(pk->s->guard, pk->gc);
	int fl = fcntl(sock, F_GETFL);
	/* the proxy reads and writes it as it does a socket of its own: blocking */
	if (!extra_in_size && fl >= 0 && fcntl(sock, F_SETFL, fl & ~O_NONBLOCK) == 0)
		relay_pool_hold(the_pool(), pk->job, pk->name, sock, job_gone, pk->s);
	free(pk->job);
	free(pk->name);
	free(pk);
	MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
}

static bool name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	if (!n || n > 64)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == '.'))
			return false;
	}
	return true;
}

int relay_answer(struct srv *s, struct MHD_Connection *con, const char *job, const char *name,
		 struct gconn *gc)
{
	const char *up = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Upgrade");
	const char *secret = MHD_lookup_connection_value(con, MHD_HEADER_KIND,
							 "X-Trainctl-Hub-Secret");
	if (!up || strcasecmp(up, RELAY_UPGRADE))
		return reply_err(con, 400, "a relay connection asks for Upgrade: " RELAY_UPGRADE);
	if (!name_ok(name))
		return reply_err(con, 400, "bad endpoint name");
	struct tc_err err = TC_ERR_INIT;
	struct hub *h = srv_hub(s, &err);
	int status = 503;
	if (h && hub_check_secret(h, job, secret, &status, &err) == 0)
		status = job_gone(s, job) ? 410 : 0;
	else if (status == 404)
		status = 410; /* a job the hub no longer knows: the node stops asking (404: no route) */
	if (!status)
		status = relay_pool_admit(the_pool(), job, name);
	int ret;
	if (status) {
		ret = reply_err(con, (unsigned)status, "%s",
				status == 410 ? "the job has ended"
				: status == 429 ? "this job's relay connections are at their limit"
				: err.msg ? err.msg : "the server is stopping");
		tc_err_release(&err);
		return ret;
	}
	tc_err_release(&err);
	struct parked *pk = xcalloc(1, sizeof(*pk));
	*pk = (struct parked){ s, gc, xstrdup(job), xstrdup(name) };
	struct MHD_Response *resp = MHD_create_response_for_upgrade(on_parked, pk);
	if (!resp) {
		free(pk->job);
		free(pk->name);
		free(pk);
		return reply_err(con, 500, "cannot answer");
	}
	MHD_add_response_header(resp, "Connection", "Upgrade");
	MHD_add_response_header(resp, "Upgrade", RELAY_UPGRADE);
	ret = MHD_queue_response(con, 101, resp);
	MHD_destroy_response(resp);
	return ret;
}
