/*
 * ship.c -- files of a run folder that is not shared, sent to the hub as
 * they grow (hub.h: hub_ship_*): the node's rank logs while they are
 * written, and what else the caller names, once more at the end.
 */
#include "hub/hub.h"
#include "hub/hub_int.h"
#include "core/strvec.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (1u << 20)

struct shipped {
	char *rel;
	char *src;     /* where it is read from: NULL = run_dir/rel */
	long long off; /* bytes sent */
};

struct hub_ship {
	struct sink *k;
	char *job, *run_dir;
	int period_ms;
	pthread_mutex_t mu;
	pthread_cond_t wake;
	bool stop, on;
	pthread_t thread;
	struct shipped *f;
	size_t nf, af;
};

/* Send what file i gained since the last pass; caller holds mu. */
static void ship_one(struct hub_ship *s, struct shipped *f)
{
	struct sbuf path = SBUF_INIT;
	if (f->src)
		sbuf_adds(&path, f->src);
	else
		sbuf_addf(&path, "%s/%s", s->run_dir, f->rel);
	int fd = open(path.buf, O_RDONLY | O_CLOEXEC);
	sbuf_release(&path);
	if (fd < 0)
		return;
	struct stat sb;
	if (fstat(fd, &sb) == 0 && sb.st_size < f->off)
		f->off = 0; /* truncated: from the start again */
	char *buf = xmalloc(CHUNK);
	for (;;) {
		ssize_t n = pread(fd, buf, CHUNK, f->off);
		if (n <= 0)
			break;
		struct tc_err err = TC_ERR_INIT;
		int rc = sink_file(s->k, s->job, f->rel, f->off, buf, (size_t)n, &err);
		tc_err_release(&err);
		if (rc)
			break;
		f->off += n;
	}
	free(buf);
	close(fd);
}

static void ship_all(struct hub_ship *s)
{
	for (size_t i = 0; i < s->nf; i++)
		ship_one(s, &s->f[i]);
}

static void *ship_main(void *arg)
{
	struct hub_ship *s = arg;
	pthread_mutex_lock(&s->mu);
	while (!s->stop) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		long long ns = ts.tv_nsec + (long long)s->period_ms * 1000000LL;
		ts.tv_sec += (time_t)(ns / 1000000000LL);
		ts.tv_nsec = (long)(ns % 1000000000LL);
		pthread_cond_timedwait(&s->wake, &s->mu, &ts);
		ship_all(s);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

struct hub_ship *hub_ship_start(struct sink *k, const char *job, const char *run_dir,
				int period_ms)
{
	struct hub_ship *s = xcalloc(1, sizeof(*s));
	s->k = k;
	s->job = xstrdup(job);
	s->run_dir = xstrdup(run_dir);
	s->period_ms = period_ms > 0 ? period_ms : 1000;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->wake, NULL);
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old); /* signals are the supervisor's */
	s->on = pthread_create(&s->thread, NULL, ship_main, s) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return s;
}

void hub_ship_add(struct hub_ship *s, const char *rel)
{
	hub_ship_add_from(s, rel, NULL);
}

void hub_ship_add_from(struct hub_ship *s, const char *rel, const char *src)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	bool known = false;
	for (size_t i = 0; i < s->nf && !known; i++)
		known = !strcmp(s->f[i].rel, rel);
	if (!known) {
		XGROW(s->f, s->nf + 1, s->af);
		s->f[s->nf++] = (struct shipped){ xstrdup(rel), src ? xstrdup(src) : NULL, 0 };
	}
	pthread_mutex_unlock(&s->mu);
}

void hub_ship_now(struct hub_ship *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	ship_all(s);
	pthread_mutex_unlock(&s->mu);
}

void hub_ship_stop(struct hub_ship *s)
{
	if (!s)
		return;
	if (s->on) {
		pthread_mutex_lock(&s->mu);
		s->stop = true;
		pthread_cond_signal(&s->wake);
		pthread_mutex_unlock(&s->mu);
		pthread_join(s->thread, NULL);
	}
	ship_all(s); /* the last of every file */
	for (size_t i = 0; i < s->nf; i++) {
		free(s->f[i].rel);
		free(s->f[i].src);
	}
	free(s->f);
	free(s->job);
	free(s->run_dir);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->wake);
	free(s);
}

bool hub_run_dir_shared(const char *run_dir)
{
	/* the submit host writes job.sbatch there; a folder of this host's own has none */
	struct sbuf p = SBUF_INIT;
	sbuf_addf(&p, "%s/job.sbatch", run_dir);
	bool shared = path_exists(p.buf);
	sbuf_release(&p);
	return shared;
}
