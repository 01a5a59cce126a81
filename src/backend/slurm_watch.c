/*
 * slurm_watch.c -- the batch driver acts on the hub's verdict (slurm_watch.h):
 * a node cut off from the others does not end srun (its peers hang in a
 * collective, srun waits for a node it cannot reach), but the hub declares
 * it lost once its heartbeats stop (hub/rdzv.h note 4).  A thread of the
 * driver reads that verdict from the status route and ends the step.
 */
#include "backend/slurm_watch.h"
#include "backend/slurm_int.h"
#include "core/err.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "hub/hub.h"
#include "hub/rdzv.h"
#include "launch/launch.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* how often the hub is asked, and how long one answer may take */
#define WATCH_PERIOD_MS 2000
#define WATCH_TIMEOUT_S 5
/*
 * After the step's scancel, how long srun may take to end before it is
 * killed: a node that cannot be reached never tells it its tasks ended.
 */
#define WATCH_SRUN_GRACE_MS 10000

void watch_round_init(struct watch_round *w, long long round)
{
	memset(w, 0, sizeof(*w));
	w->round = round;
	sbuf_init(&w->why, 0);
	sbuf_init(&w->cause, 0);
}

void watch_round_release(struct watch_round *w)
{
	json_decref(w->seen);
	sbuf_release(&w->why);
	sbuf_release(&w->cause);
	free(w->lost);
	w->seen = NULL;
	w->lost = NULL;
	w->nlost = 0;
}

static bool has_node(const json_t *members, const char *node)
{
	size_t i;
	json_t *m;
	json_array_foreach(members, i, m) {
		const char *n = json_string_value(json_object_get(m, "node"));
		if (n && !strcmp(n, node))
			return true;
	}
	return false;
}

/* The hub's reason ("round 0 ended: node c2 (rank 1) lost: no heartbeat for 15 s"): its cause part. */
static void cause_of(const char *why, struct sbuf *out)
{
	const char *p = why, *at = NULL;
	while ((p = strstr(p, " lost: ")) != NULL)
		at = p += 7;
	sbuf_reset(out);
	sbuf_adds(out, at && *at ? at : why);
}

bool watch_round_update(struct watch_round *w, const json_t *rdzv)
{
	json_t *r = json_object_get(rdzv, "round");
	if (w->ended || !json_is_integer(r))
		return false;
	long long round = json_integer_value(r);
	const char *state = json_string_value(json_object_get(rdzv, "state"));
	json_t *members = json_object_get(rdzv, "members");
	if (round == w->round && state && !strcmp(state, "closed") && json_is_array(members)) {
		json_decref(w->seen); /* the members are final once the round is closed (rdzv.h note 3) */
		w->seen = json_deep_copy(members);
		return false;
	}
	if (round <= w->round)
		return false; /* not closed yet, or a hub that has not heard of the round */
	const char *why = json_string_value(json_object_get(rdzv, "why"));
	/*
	 * Only a silent member is ours to act on: a supervisor whose connection
	 * closed is dead, and srun sees its task end by itself, so the attempt
	 * gets one cause whichever of the two comes first.
	 */
	if (!why || !strstr(why, RDZV_WHY_SILENT))
		return false;
	w->ended = true;
	sbuf_adds(&w->why, why && *why ? why : "the hub ended the round");
	cause_of(w->why.buf, &w->cause);
	/* lost: seen in the closed round, and neither a survivor kept for the next nor in it */
	json_t *prev = json_object_get(rdzv, "prev");
	size_t i;
	json_t *m;
	json_array_foreach(w->seen, i, m) {
		const char *node = json_string_value(json_object_get(m, "node"));
		json_t *rank = json_object_get(m, "rank");
		if (!node || !json_is_integer(rank) || has_node(prev, node) || has_node(members, node))
			continue;
		w->lost = xrealloc(w->lost, (w->nlost + 1) * sizeof(*w->lost));
		w->lost[w->nlost++] = (int)json_integer_value(rank);
	}
	return true;
}

/* ---- the thread ---- */

struct slurm_watch {
	char *job, *slurm_job;
	pid_t srun;
	struct watch_round wr; /* the thread's until it is joined */
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop, joined;
};

/* Wait ms or until stopped, the lock held on return; true: stopped. */
static bool wait_locked(struct slurm_watch *w, int ms)
{
	struct timespec ts = mono_deadline(ms); /* the condvar's clock (slurm_watch_start) */
	pthread_mutex_lock(&w->mu);
	while (!w->stop && pthread_cond_timedwait(&w->cv, &w->mu, &ts) == 0)
		;
	return w->stop;
}

/* The job's steps that run now ("123.0"; not its batch or extern step), scancelled. */
static void cancel_steps(const char *slurm_job)
{
	const char *list[] = { "squeue", "--steps", "--noheader", "--format=%i", "--jobs", slurm_job,
			       NULL };
	struct sbuf out = SBUF_INIT, eout = SBUF_INIT;
	struct tc_err e = TC_ERR_INIT;
	int status = 0;
	if (slurm_command(list, NULL, &out, &eout, &status, &e) || !slurm_exited_ok(status)) {
		launch_say("warning: cannot list Slurm job %s's steps to end them: %s", slurm_job,
			   e.msg ? e.msg : eout.buf ? eout.buf : "squeue failed");
		goto out;
	}
	char *save = NULL;
	for (char *id = strtok_r(out.buf, " \n", &save); id; id = strtok_r(NULL, " \n", &save)) {
		const char *dot = strchr(id, '.');
		if (!dot || !dot[1] || strspn(dot + 1, "0123456789") != strlen(dot + 1))
			continue;
		const char *cancel[] = { "scancel", "--quiet", id, NULL };
		sbuf_reset(&eout);
		tc_err_release(&e);
		if (slurm_command(cancel, NULL, NULL, &eout, &status, &e) || !slurm_exited_ok(status))
			launch_say("warning: scancel %s: %s", id,
				   e.msg ? e.msg : eout.buf ? eout.buf : "it did not exit 0");
	}
out:
	tc_err_release(&e);
	sbuf_release(&out);
	sbuf_release(&eout);
}

/* The verdict: end the step, then srun itself if it does not end in time. */
static void end_attempt(struct slurm_watch *w)
{
	launch_say("the hub ended rendezvous round %lld (%s): ending attempt %lld's srun step",
		   w->wr.round, w->wr.why.buf, w->wr.round);
	if (w->slurm_job)
		cancel_steps(w->slurm_job);
	bool stopped = wait_locked(w, w->slurm_job ? WATCH_SRUN_GRACE_MS : 0);
	/* under the lock: the driver waits for srun (reaps its pid) only after stop */
	if (!stopped) {
		launch_say("srun did not end %d s after its step was cancelled (a node it cannot "
			   "reach): killing it", WATCH_SRUN_GRACE_MS / 1000);
		kill(w->srun, SIGKILL);
	}
	pthread_mutex_unlock(&w->mu);
}

static void *watch_main(void *arg)
{
	struct slurm_watch *w = arg;
	for (;;) {
		bool stop = wait_locked(w, WATCH_PERIOD_MS);
		pthread_mutex_unlock(&w->mu);
		if (stop)
			break;
		json_t *o = NULL;
		struct tc_err e = TC_ERR_INIT;
		/* a hub that does not answer (restarting, a cut): asked again next time */
		bool ended = hub_job_status_json(w->job, WATCH_TIMEOUT_S, &o, &e) == 0 &&
			     watch_round_update(&w->wr, json_object_get(o, "rdzv"));
		json_decref(o);
		tc_err_release(&e);
		if (ended) {
			end_attempt(w);
			break;
		}
	}
	return NULL;
}

struct slurm_watch *slurm_watch_start(const char *job, int round, pid_t srun,
				      const char *slurm_job)
{
	struct slurm_watch *w = xcalloc(1, sizeof(*w));
	w->job = xstrdup(job);
	w->slurm_job = slurm_job && *slurm_job ? xstrdup(slurm_job) : NULL;
	w->srun = srun;
	watch_round_init(&w->wr, round);
	pthread_mutex_init(&w->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&w->th, NULL, watch_main, w) != 0) {
		launch_say("warning: cannot start the thread that reads the hub's verdict on lost "
			   "nodes: a node cut off ends the attempt only when srun ends");
		w->joined = true;
		slurm_watch_free(w);
		return NULL;
	}
	return w;
}

void slurm_watch_stop(struct slurm_watch *w)
{
	if (!w || w->joined)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->th, NULL);
	w->joined = true;
}

void slurm_watch_free(struct slurm_watch *w)
{
	if (!w)
		return;
	slurm_watch_stop(w);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	watch_round_release(&w->wr);
	free(w->job);
	free(w->slurm_job);
	free(w);
}

bool slurm_watch_ended(const struct slurm_watch *w)
{
	return w && w->joined && w->wr.ended;
}

static bool named(const struct slurm_watch *w, int n)
{
	for (size_t i = 0; i < w->wr.nlost; i++)
		if (w->wr.lost[i] == n)
			return true;
	return false;
}

bool slurm_watch_lost(const struct slurm_watch *w, int n, bool missing)
{
	if (!slurm_watch_ended(w) || !w->wr.nlost)
		return missing;
	return named(w, n);
}

const char *slurm_watch_cause(const struct slurm_watch *w, int n)
{
	return slurm_watch_ended(w) && named(w, n) ? w->wr.cause.buf : NULL;
}
