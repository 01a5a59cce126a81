/*
 * idle.c -- limits.idle_minutes (supervisor_int.h): an interactive job
 * nobody uses is stopped, with a warning first.
 *
 * A thread of its own asks the job's endpoints whose activity is seen
 * (endpoint.h note 5: Jupyter's REST API, the sshd's open connections)
 * every thirtieth of the limit (1 s to 30 s), so that a slow answer never
 * holds the attempt loop, and keeps the newest time of use.  The loop's
 * tick (sup_idle_tick) decides on it: once the job has been idle for the
 * limit less the warning's lead (a tenth of the limit, at most 5 min) it
 * notes the warning (the job's events, stderr); use after it calls the
 * stop off, noted too; idle for the whole limit, and at least the lead
 * after the warning, the workers get the usual stop (stop file, SIGTERM,
 * SIGKILL after the grace period) and the job ends killed, not failed:
 * nobody's job broke (supervisor.c: attempt_outcome).
 *
 * The clock starts when an endpoint first answers (a Jupyter that takes
 * its time to start is not idle yet) and goes on across restarts.  A
 * hook: it calls only say.c and stop.c.
 */
#include "launch/supervisor_int.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "endpoint/endpoint.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_PROBES 16
#define LEAD_MAX_S 300.0

struct sup_idle {
	/* the thread's: the probes, then what it saw, under mu */
	struct endpoint_probe pr[MAX_PROBES];
	size_t npr;
	int every_ms;
	pthread_t th;
	bool running;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool quit;
	double last;   /* wall seconds of the newest use seen; 0 until an endpoint answers */
	/*
	 * wall seconds of the newest answer: idleness is counted up to it, not to
	 * now, so that an endpoint slow to answer (a loaded machine) never looks
	 * idle for want of an answer; one that stops answering is not stopped
	 * (the log says why)
	 */
	double answered;
	char *trouble; /* the newest probe failure not yet said, or NULL */
	/* the attempt loop's */
	bool begun;
	double limit_s, lead_s;
	double warned_at; /* wall seconds of the warning in force, 0: none */
	char *said;       /* the last trouble said, once per text */
};

/* One round of asking: the newest use of any endpoint, and the first failure. */
static void ask(struct sup_idle *d)
{
	double now = now_wall(), newest = 0;
	char *trouble = NULL;
	bool answered = false;
	for (size_t i = 0; i < d->npr; i++) {
		struct tc_err err = TC_ERR_INIT;
		double t = 0;
		if (endpoint_activity(&d->pr[i], now, &t, &err) == 0)
			answered = true;
		else if (!trouble)
			trouble = xstrdup(err.msg);
		tc_err_release(&err);
		if (t > newest)
			newest = t;
	}
	double done = now_wall();
	if (newest >= now)
		newest = done; /* a busy kernel: in use until the answer came */
	pthread_mutex_lock(&d->mu);
	if (answered)
		d->answered = done;
	if (answered && !d->last)
		d->last = now; /* the clock starts */
	if (d->last && newest > d->last)
		d->last = newest;
	if (trouble) {
		free(d->trouble);
		d->trouble = trouble;
	}
	pthread_mutex_unlock(&d->mu);
}

static void *asker(void *arg)
{
	struct sup_idle *d = arg;
	pthread_mutex_lock(&d->mu);
	while (!d->quit) {
		pthread_mutex_unlock(&d->mu);
		ask(d);
		pthread_mutex_lock(&d->mu);
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		long long ns = until.tv_nsec + (long long)d->every_ms * 1000000LL;
		until.tv_sec += (time_t)(ns / 1000000000LL);
		until.tv_nsec = (long)(ns % 1000000000LL);
		while (!d->quit && pthread_cond_timedwait(&d->cv, &d->mu, &until) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

/* The watch starts with the endpoints: false when there is nothing to watch. */
static bool begin(struct sup *sp, struct sup_idle *d)
{
	d->begun = true;
	d->limit_s = sp->s->idle_minutes * 60;
	d->lead_s = fmin(LEAD_MAX_S, d->limit_s / 10);
	/* a third of the lead: use seen after the warning calls the stop off in time */
	d->every_ms = (int)fmax(1000, fmin(30000, d->limit_s * 1000 / 30));
	d->npr = endpoint_probes(sp->eps, d->pr, MAX_PROBES);
	if (!d->npr) {
		sup_say(sp, "warning: limits.idle_minutes: no %s endpoint runs: the job is not "
			"stopped when idle", endpoint_idle_kind_names());
		return false;
	}
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	int e = pthread_create(&d->th, NULL, asker, d);
	if (e) {
		sup_say(sp, "warning: limits.idle_minutes: cannot start its thread: %s: the job is not "
			"stopped when idle", strerror(e));
		pthread_mutex_destroy(&d->mu);
		pthread_cond_destroy(&d->cv);
		return false;
	}
	d->running = true;
	sup_log(sp, "limits.idle_minutes %g: asking %zu endpoint%s every %d ms", sp->s->idle_minutes,
		d->npr, plural_s((long)d->npr), d->every_ms);
	return true;
}

static void note(struct sup *sp, const char *text)
{
	struct tc_err e = TC_ERR_INIT;
	if (sink_note(sp->sink, sp->job_id, JOB_NOTE_IDLE, text, &e))
		sup_say(sp, "warning: %s", e.msg);
	tc_err_release(&e);
	sup_event(sp, "job %s: %s: %s", sp->job_id, job_note_name(JOB_NOTE_IDLE), text);
}

/* "30 minutes", "0.1 minutes", "1 minute" */
static void add_minutes(struct sbuf *sb, double m)
{
	sbuf_addf(sb, "%g minute%s", m, m == 1 ? "" : "s");
}

static void stop(struct sup *sp)
{
	sp->idle_stop = true;
	sbuf_reset(&sp->fail_why);
	sbuf_adds(&sp->fail_why, "stopped: idle for ");
	add_minutes(&sp->fail_why, sp->s->idle_minutes);
	sbuf_adds(&sp->fail_why, " (limits.idle_minutes)");
	sup_stop_for_limit(sp);
}

int sup_idle_tick(struct sup *sp, int64_t now_ms)
{
	(void)now_ms; /* Jupyter says wall times: the watch runs on the wall clock */
	if (sp->s->idle_minutes <= 0 || sp->o->node || !sp->eps_started || sp->stopping ||
	    sp->failed || sp->user_signal)
		return -1;
	if (!sp->idle)
		sp->idle = xcalloc(1, sizeof(*sp->idle));
	struct sup_idle *d = sp->idle;
	if (!d->begun && !begin(sp, d))
		return -1;
	if (!d->running)
		return -1;
	pthread_mutex_lock(&d->mu);
	double last = d->last, answered = d->answered;
	char *trouble = d->trouble;
	d->trouble = NULL;
	pthread_mutex_unlock(&d->mu);
	if (trouble && (!d->said || strcmp(d->said, trouble) != 0)) {
		/* an endpoint that does not answer shows no use; the log says why */
		sup_log(sp, "limits.idle_minutes: %s", trouble);
		free(d->said);
		d->said = trouble;
	} else {
		free(trouble);
	}
	if (!last)
		return 1000; /* no endpoint has answered yet */
	double now = now_wall(), idle = answered - last;
	if (d->warned_at && idle < d->limit_s - d->lead_s) {
		d->warned_at = 0;
		note(sp, "in use again: the stop is called off");
	} else if (!d->warned_at && idle >= d->limit_s - d->lead_s) {
		d->warned_at = now;
		struct sbuf t = SBUF_INIT, in = SBUF_INIT;
		sbuf_adds(&t, "no use for ");
		format_duration(&t, idle < 1 ? 1 : lround(idle));
		format_duration(&in, (long)ceil(d->limit_s - idle > d->lead_s ? d->limit_s - idle
									      : d->lead_s));
		sbuf_addf(&t, ": stopping in %s unless it is used (limits.idle_minutes %g)", in.buf,
			  sp->s->idle_minutes);
		note(sp, t.buf);
		/* the owner hears of it where the job's hooks send (notify.h: "idle") */
		struct sbuf r = SBUF_INIT;
		sbuf_addf(&r, "%s: %s", job_note_name(JOB_NOTE_IDLE), t.buf);
		sup_notify(sp, NOTIFY_IDLE, job_state_name(JOB_RUNNING), r.buf, -1);
		sbuf_release(&r);
		sbuf_release(&t);
		sbuf_release(&in);
	} else if (d->warned_at && idle >= d->limit_s && now >= d->warned_at + d->lead_s) {
		stop(sp);
		return -1;
	}
	/* the warning and the stop come within a second of their time */
	return 1000;
}

void sup_idle_end(struct sup *sp)
{
	struct sup_idle *d = sp->idle;
	if (!d)
		return;
	if (d->running) {
		pthread_mutex_lock(&d->mu);
		d->quit = true;
		pthread_cond_signal(&d->cv);
		pthread_mutex_unlock(&d->mu);
		pthread_join(d->th, NULL);
		pthread_mutex_destroy(&d->mu);
		pthread_cond_destroy(&d->cv);
	}
	for (size_t i = 0; i < d->npr; i++)
		endpoint_probe_release(&d->pr[i]);
	free(d->trouble);
	free(d->said);
	free(d);
	sp->idle = NULL;
}
