/*
 * notify_hook.c -- the job's webhooks (notify/notify.h) from the supervisor
 * and the multi-node driver (notify_int.h), and launch_record_delivery()
 * for the server's own hooks: every delivery is written down through a sink.
 */
#include "launch/notify_int.h"
#include "launch/supervisor_int.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "store/store.h"

#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* At the job's end, what is still being delivered gets this long (after the end is recorded). */
#define NOTIFY_END_WAIT_MS 5000

struct launch_notify {
	struct notifier *nf;
	const struct spec *s;
	char *home, *job_id;
	void (*say)(void *ctx, const char *msg);
	void *ctx;
	struct sink *sink;  /* where the job's records go (borrowed) */
	struct sink *tsink; /* the delivery thread's door to them (sink_thread_open), or NULL */
	unsigned relay;    /* events of the server's own hooks, sent to its hub (NOTIFY_SERVER_ENV) */
};

/* d as the sink records it (every delivery goes through sink_delivery) */
static int record_through(struct sink *k, const char *job_id, const struct notify_delivery *d,
			  struct tc_err *err)
{
	struct store_delivery row = {
		.time = d->time, .event = (char *)notify_event_name(d->event), .url = (char *)d->url,
		.ok = d->ok, .tries = d->tries, .status = d->status, .error = (char *)d->error,
	};
	return sink_delivery(k, job_id, &row, err);
}

int launch_record_delivery(const char *home, const char *job_id,
			   const struct notify_delivery *d, struct tc_err *err)
{
	struct store *st = NULL;
	int rc = store_open(home, &st, err);
	if (rc)
		return rc;
	struct sink *k = sink_direct(st);
	rc = record_through(k, job_id, d, err);
	sink_close(k);
	store_close(st);
	return rc;
}

/* From the notifier's thread. */
static void on_record(void *ctx, const struct notify_delivery *d)
{
	struct launch_notify *ln = ctx;
	struct tc_err err = TC_ERR_INIT;
	/* opened here, in the thread that uses it; after notify_finish joined it, by its caller */
	if ((!ln->tsink && sink_thread_open(ln->sink, ln->home, &ln->tsink, &err)) ||
	    record_through(ln->tsink, ln->job_id, d, &err)) {
		struct sbuf msg = SBUF_INIT;
		sbuf_addf(&msg, "warning: notify: cannot record a delivery: %s", err.msg);
		ln->say(ln->ctx, msg.buf);
		sbuf_release(&msg);
	}
	tc_err_release(&err);
}

static void on_warn(void *ctx, const char *msg)
{
	struct launch_notify *ln = ctx;
	ln->say(ln->ctx, msg);
}

struct launch_notify *launch_notify_open(const struct spec *s, const char *home,
					 const char *job_id, struct sink *k,
					 void (*say)(void *ctx, const char *msg), void *ctx)
{
	/*
	 * A server's job: the server's own hooks are the server's to sign and
	 * send (their secrets never reach us), and the spec's may not read our
	 * environment, which is the server's allowlist, not the user's.
	 */
	const char *srv = getenv(NOTIFY_SERVER_ENV);
	long mask = 0;
	if (srv && !s->notify_given && !parse_long(srv, 0, NOTIFY_ALL, &mask))
		mask = 0;
	if (!s->nnotify && !mask)
		return NULL;
	struct launch_notify *ln = xcalloc(1, sizeof(*ln));
	*ln = (struct launch_notify){ .s = s, .home = home ? xstrdup(home) : NULL, .job_id = xstrdup(job_id),
				      .sink = k, .say = say, .ctx = ctx, .relay = (unsigned)mask };
	struct notify_opts no = { .record = on_record, .warn = on_warn, .ctx = ln,
				  .flags = srv ? NOTIFY_NO_ENV : 0 };
	struct tc_err err = TC_ERR_INIT;
	/* a webhook never fails the job: without its secret it is a warning */
	if (s->nnotify && notify_start(s->notify, s->nnotify, &no, &ln->nf, &err)) {
		struct sbuf msg = SBUF_INIT;
		sbuf_addf(&msg, "warning: webhooks off: %s", err.msg);
		say(ctx, msg.buf);
		sbuf_release(&msg);
	}
	tc_err_release(&err);
	return ln;
}

void launch_notify(struct launch_notify *ln, enum notify_event e, const char *state,
		   const char *reason, int attempt, int exit_code)
{
	if (!ln)
		return;
	/* (a direct sink has no server to relay to: sink_notify does nothing) */
	bool own = notify_wants(ln->nf, e), relay = ln->relay & (1u << e);
	if (!own && !relay)
		return;
	char host[256];
	if (gethostname(host, sizeof(host)) != 0)
		host[0] = '\0';
	host[sizeof(host) - 1] = '\0';
	struct passwd *pw = getpwuid(getuid());
	struct notify_msg m = {
		.event = e, .job_id = ln->job_id, .job_name = ln->s->name, .state = state,
		.reason = reason, .user = pw ? pw->pw_name : NULL, .host = host[0] ? host : NULL,
		.attempt = attempt, .exit_code = exit_code, .time = now_wall(),
	};
	if (own)
		notify_post(ln->nf, &m);
	struct tc_err err = TC_ERR_INIT;
	if (relay && sink_notify(ln->sink, ln->job_id, &m, &err)) {
		struct sbuf msg = SBUF_INIT;
		sbuf_addf(&msg, "warning: notify: cannot hand %s to the server: %s",
			  notify_event_name(e), err.msg);
		ln->say(ln->ctx, msg.buf);
		sbuf_release(&msg);
	}
	tc_err_release(&err);
}

void launch_notify_close(struct launch_notify *ln)
{
	if (!ln)
		return;
	notify_finish(ln->nf, NOTIFY_END_WAIT_MS);
	sink_close(ln->tsink);
	free(ln->home);
	free(ln->job_id);
	free(ln);
}

/* ---- the supervisor's side (supervisor_int.h) ---- */

static void sup_warn(void *ctx, const char *msg)
{
	sup_say(ctx, "%s", msg); /* sup_say writes each line at once: safe from the thread */
}

void sup_notify_begin(struct sup *sp)
{
	if (!sp->ln)
		sp->ln = launch_notify_open(sp->s, sp->o->home, sp->job_id, sp->sink, sup_warn, sp);
}

void sup_notify(struct sup *sp, enum notify_event e, const char *state, const char *reason,
		int exit_code)
{
	launch_notify(sp->ln, e, state, reason, sp->attempt, exit_code);
}

void sup_notify_end(struct sup *sp)
{
	launch_notify_close(sp->ln);
	sp->ln = NULL;
}
