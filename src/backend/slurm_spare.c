/*
 * slurm_spare.c -- a Slurm job's hot spares (slurm_spare.h): the spare's
 * side under srun (`trainctl supervise-spare`), and the batch driver's:
 * the spare step started and ended around each attempt, its lines read
 * by a thread into each spare's newest health.
 */
#include "backend/slurm_spare.h"
#include "backend/slurm_int.h"
#include "core/proc.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "jobs/state.h"
#include "launch/launch.h"
#include "launch/spare.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- on a spare ---- */

static volatile sig_atomic_t spare_stop;

static void on_spare_signal(int sig)
{
	spare_stop = sig;
}

/* "gpu:0,1" into its type (heap) and ids (heap). */
static int parse_devices(const char *spec, char **type, int **ids, int *n, struct tc_err *err)
{
	const char *colon = spec ? strchr(spec, ':') : NULL;
	*type = NULL;
	*ids = NULL;
	*n = 0;
	if (!colon || colon == spec)
		return tc_error(err, TC_EUSAGE, "supervise-spare: --devices takes TYPE:ID,ID,...");
	*type = xstrndup(spec, (size_t)(colon - spec));
	*ids = xcalloc(strlen(colon) + 1, sizeof(int));
	for (const char *p = colon + 1; *p;) {
		const char *c = strchr(p, ',');
		char *item = xstrndup(p, c ? (size_t)(c - p) : strlen(p));
		long v;
		bool ok = parse_long(item, 0, 1 << 20, &v);
		free(item);
		if (!ok)
			return tc_error(err, TC_EUSAGE, "supervise-spare: --devices %s: not a list of "
					"device ids", spec);
		(*ids)[(*n)++] = (int)v;
		p = c ? c + 1 : p + strlen(p);
	}
	return 0;
}

int slurm_spare_main(const struct slurm_spare_args *a, struct tc_err *err)
{
	const char *me = getenv("SLURMD_NODENAME");
	if (!me || !*me)
		return tc_error(err, TC_EUSAGE, "supervise-spare: $SLURMD_NODENAME is not set (srun "
				"starts it on a job's spare nodes)");
	char *type = NULL;
	int *ids = NULL, n = 0;
	int rc = parse_devices(a->devices, &type, &ids, &n, err);
	if (!rc) {
		/* srun passes a stop on as SIGTERM; no SA_RESTART: the nap sees it at once */
		static const int sigs[] = { SIGTERM, SIGINT, SIGHUP };
		struct sigaction sa = { .sa_handler = on_spare_signal };
		sigemptyset(&sa.sa_mask);
		for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
			sigaction(sigs[i], &sa, NULL);
		struct launch_spare_watch w = { .node_name = me, .type = type, .ids = ids, .n = n,
						.interval = a->interval, .tell = a->tell,
						.tell_ctx = a->tell_ctx, .stop = &spare_stop };
		rc = launch_spare_watch(&w, err);
	}
	free(type);
	free(ids);
	return rc;
}

/* ---- in the batch driver ---- */

/* One spare's newest health, as the step's lines told it. */
struct spare_state {
	char *host;
	bool known, ok;
	bool said;    /* its failure is in the job's events (once, until it passes again) */
	char *reason; /* of the newest failed check */
};

struct slurm_spares {
	char *exe, *home, *job_id, *devices;
	struct sink *sink;
	int (*alloc)(void *ctx, struct strvec *out);
	pthread_mutex_t lock; /* guards states: the reader thread writes, the driver reads */
	struct spare_state *states;
	size_t nr;
	/* the step now running, or none */
	struct proc p;
	char *hosts; /* "n3,n4": its hosts; NULL: no step */
	pthread_t reader;
	bool eof; /* its output ended: srun is gone or going (under lock) */
};

struct slurm_spares *slurm_spares_new(const char *exe, const char *home, const char *job_id,
				      const struct spec *s, struct sink *sink,
				      int (*alloc)(void *ctx, struct strvec *out))
{
	struct slurm_spares *sp = xcalloc(1, sizeof(*sp));
	struct proc init = PROC_INIT;
	sp->exe = xstrdup(exe);
	sp->home = xstrdup(home);
	sp->job_id = xstrdup(job_id);
	sp->sink = sink;
	sp->alloc = alloc;
	sp->p = init;
	struct sbuf d = SBUF_INIT;
	sbuf_addf(&d, "%s:", s->device_type);
	for (int i = 0; i < s->per_node; i++)
		sbuf_addf(&d, "%s%d", i ? "," : "", s->device_ids ? s->device_ids[i] : i);
	sp->devices = sbuf_detach(&d);
	pthread_mutex_init(&sp->lock, NULL);
	return sp;
}

/* host's state (made when new); under sp->lock. */
static struct spare_state *state_of(struct slurm_spares *sp, const char *host)
{
	for (size_t i = 0; i < sp->nr; i++)
		if (!strcmp(sp->states[i].host, host))
			return &sp->states[i];
	sp->states = xrealloc(sp->states, (sp->nr + 1) * sizeof(*sp->states));
	struct spare_state *st = &sp->states[sp->nr++];
	memset(st, 0, sizeof(*st));
	st->host = xstrdup(host);
	return st;
}

/* The job's `unhealthy` event for a waiting spare, through this thread's own sink. */
static void note_unhealthy(struct slurm_spares *sp, struct sink **ts, const char *host,
			   const char *reason)
{
	struct sbuf t = SBUF_INIT;
	sbuf_addf(&t, "spare %s failed its health check: %s; it takes no node's place while it "
		      "fails", host, reason);
	launch_say("%s", t.buf);
	struct tc_err e = TC_ERR_INIT;
	if (!*ts && sink_thread_open(sp->sink, sp->home, ts, &e))
		launch_say("warning: %s", e.msg);
	else if (sink_note(*ts, sp->job_id, JOB_NOTE_UNHEALTHY, t.buf, &e))
		launch_say("warning: %s", e.msg);
	tc_err_release(&e);
	sbuf_release(&t);
}

/* One line of the step: a spare's check kept as its newest, its failure said once. */
static void take_line(struct slurm_spares *sp, struct sink **ts, const char *line, size_t len)
{
	struct launch_spare_health h;
	if (!launch_spare_parse(line, len, &h)) {
		if (len)
			launch_say("spare step: %.*s", (int)len, line); /* srun's or the spare's own words */
		return;
	}
	pthread_mutex_lock(&sp->lock);
	struct spare_state *st = state_of(sp, h.node_name);
	bool tell = !h.ok && !st->said, again = h.ok && st->known && !st->ok;
	st->known = true;
	st->ok = h.ok;
	st->said = !h.ok;
	free(st->reason);
	st->reason = h.reason ? xstrdup(h.reason) : NULL;
	pthread_mutex_unlock(&sp->lock);
	if (tell)
		note_unhealthy(sp, ts, h.node_name, h.reason);
	else if (again)
		launch_say("spare %s passes its health check again", h.node_name);
	launch_spare_health_release(&h);
}

/* The reader thread: the step's stdout to its end (the pipe is its own until then). */
static void *reader_main(void *arg)
{
	struct slurm_spares *sp = arg;
	struct sink *ts = NULL;
	FILE *f = fdopen(sp->p.out.fd, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	if (!f)
		launch_say("warning: the spares' step: cannot read its output: %s", strerror(errno));
	while (f && (n = getline(&line, &cap, f)) > 0)
		take_line(sp, &ts, line, (size_t)n - (line[n - 1] == '\n'));
	free(line);
	if (f) {
		fclose(f); /* closes the pipe: proc_clear must not again */
		sp->p.out.fd = -1;
	}
	sink_close(ts);
	pthread_mutex_lock(&sp->lock);
	sp->eof = true;
	pthread_mutex_unlock(&sp->lock);
	return NULL;
}

/* End the running step, if any: srun signalled (SIGKILL after 10 s) and reaped, its reader joined. */
static void step_end(struct slurm_spares *sp)
{
	if (!sp->hosts)
		return;
	int status = 0;
	if (sp->p.pid > 0)
		proc_stop(&sp->p, 10000, &status);
	pthread_join(sp->reader, NULL);
	proc_clear(&sp->p);
	struct proc init = PROC_INIT;
	sp->p = init;
	free(sp->hosts);
	sp->hosts = NULL;
}

static void step_start(struct slurm_spares *sp, const char *hosts, int n)
{
	struct tc_err err = TC_ERR_INIT;
	struct proc *p = &sp->p;
	strvec_push(&p->args, "srun");
	strvec_push(&p->args, "--quiet");
	strvec_pushf(&p->args, "--nodes=%d", n);
	strvec_pushf(&p->args, "--nodelist=%s", hosts);
	strvec_pushf(&p->args, "--ntasks=%d", n);
	strvec_push(&p->args, "--ntasks-per-node=1");
	strvec_push(&p->args, "--cpus-per-task=1"); /* idle: it only checks the devices */
	strvec_push(&p->args, "--export=ALL");
	strvec_push(&p->args, sp->exe);
	strvec_push(&p->args, "supervise-spare");
	strvec_push(&p->args, sp->job_id);
	strvec_pushf(&p->args, "--devices=%s", sp->devices);
	strvec_pushf(&p->args, "--interval=%d", LAUNCH_SPARE_INTERVAL);
	proc_env_inherit(&p->env);
	p->default_sigs = PROC_SIG(SIGTERM) | PROC_SIG(SIGINT) | PROC_SIG(SIGUSR1) | PROC_SIG(SIGUSR2);
	p->out.how = PROC_IO_PIPE;
	sp->eof = false; /* no reader runs now */
	if (proc_start(p, &err)) {
		launch_say("warning: the spares' step on %s did not start: %s", hosts, err.msg);
	} else if (pthread_create(&sp->reader, NULL, reader_main, sp) != 0) {
		launch_say("warning: the spares' step on %s: no thread to read it", hosts);
		int status = 0;
		proc_stop(p, 10000, &status);
	} else {
		sp->hosts = xstrdup(hosts);
		tc_err_release(&err);
		return;
	}
	tc_err_release(&err);
	proc_clear(p);
	struct proc init = PROC_INIT;
	*p = init;
}

void slurm_spares_release(struct slurm_spares *sp, const char *members)
{
	if (!sp || !sp->hosts || !members)
		return;
	struct strvec v = STRVEC_INIT;
	for (const char *c = members; *c;) {
		const char *e = strchr(c, ',');
		char *h = xstrndup(c, e ? (size_t)(e - c) : strlen(c));
		strvec_push_nodup(&v, h);
		c = e ? e + 1 : c + strlen(c);
	}
	bool called = false;
	for (size_t i = 0; i < v.nr && !called; i++)
		called = launch_host_listed(sp->hosts, v.v[i]);
	strvec_clear(&v);
	if (called)
		step_end(sp);
}

void slurm_spares_end(struct slurm_spares *sp)
{
	if (sp && sp->hosts)
		step_end(sp);
}

void slurm_spares_watch(struct slurm_spares *sp, const char *members, const char *exclude)
{
	if (!sp || !members || !sp->alloc)
		return;
	struct strvec all = STRVEC_INIT;
	struct sbuf want = SBUF_INIT;
	int n = 0;
	if (!sp->alloc(NULL, &all))
		for (size_t i = 0; i < all.nr; i++)
			if (!launch_host_listed(members, all.v[i]) &&
			    !launch_host_listed(exclude, all.v[i])) {
				sbuf_addf(&want, "%s%s", n ? "," : "", all.v[i]);
				n++;
			}
	strvec_clear(&all);
	/* a step that ended on its own (a spare lost, srun refused) is reaped and started again */
	pthread_mutex_lock(&sp->lock);
	bool alive = sp->hosts && !sp->eof;
	pthread_mutex_unlock(&sp->lock);
	if (!sp->hosts || !alive || strcmp(sp->hosts, want.buf) != 0) {
		step_end(sp);
		if (n)
			step_start(sp, want.buf, n);
	}
	sbuf_release(&want);
}

bool slurm_spares_usable(void *ctx, const char *host, struct sbuf *why)
{
	struct slurm_spares *sp = ctx;
	bool ok = true;
	if (!sp)
		return true;
	pthread_mutex_lock(&sp->lock);
	for (size_t i = 0; i < sp->nr; i++)
		if (!strcmp(sp->states[i].host, host) && sp->states[i].known && !sp->states[i].ok) {
			ok = false;
			sbuf_adds(why, sp->states[i].reason ? sp->states[i].reason : "no reason given");
		}
	pthread_mutex_unlock(&sp->lock);
	return ok;
}

void slurm_spares_free(struct slurm_spares *sp)
{
	if (!sp)
		return;
	step_end(sp);
	for (size_t i = 0; i < sp->nr; i++) {
		free(sp->states[i].host);
		free(sp->states[i].reason);
	}
	free(sp->states);
	pthread_mutex_destroy(&sp->lock);
	free(sp->exe);
	free(sp->home);
	free(sp->job_id);
	free(sp->devices);
	free(sp);
}
