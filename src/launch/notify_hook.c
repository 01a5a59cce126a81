/*
 * notify_hook.c -- the job's webhooks (notify/notify.h) from the
 * supervisor: sup_notify() is the one call every event goes through, and
 * launch_record_delivery() the one place a delivery is written down.
 */
#include "launch/supervisor_int.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "notify/notify.h"
#include "store/store.h"

#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* At the job's end, what is still being delivered gets this long (after the end is recorded). */
#define NOTIFY_END_WAIT_MS 5000

int launch_record_delivery(const char *home, const char *job_id,
			   const struct notify_delivery *d, struct tc_err *err)
{
	struct store *st = NULL;
	int rc = store_open(home, &st, err);
	if (rc)
		return rc;
	struct store_delivery row = {
		.time = d->time, .event = (char *)notify_event_name(d->event), .url = (char *)d->url,
		.ok = d->ok, .tries = d->tries, .status = d->status, .error = (char *)d->error,
	};
	rc = store_delivery_add(st, job_id, &row, err);
	store_close(st);
	return rc;
}

/* From the notifier's thread: sup_say writes each line at once (as jobio's thread does). */
static void on_record(void *ctx, const struct notify_delivery *d)
{
	struct sup *sp = ctx;
	struct tc_err err = TC_ERR_INIT;
	if (launch_record_delivery(sp->o->home, sp->job_id, d, &err))
		sup_say(sp, "warning: notify: cannot record a delivery: %s", err.msg);
	tc_err_release(&err);
}

static void on_warn(void *ctx, const char *msg)
{
	sup_say(ctx, "%s", msg);
}

void sup_notify_begin(struct sup *sp)
{
	const struct spec *s = sp->s;
	if (!s->nnotify || sp->nf)
		return;
	struct notify_opts no = { .record = on_record, .warn = on_warn, .ctx = sp };
	struct tc_err err = TC_ERR_INIT;
	/* a webhook never fails the job: without its secret it is a warning */
	if (notify_start(s->notify, s->nnotify, &no, &sp->nf, &err))
		sup_say(sp, "warning: webhooks off: %s", err.msg);
	tc_err_release(&err);
}

void sup_notify(struct sup *sp, enum notify_event e, const char *state, const char *reason,
		int exit_code)
{
	if (!notify_wants(sp->nf, e))
		return;
	char host[256];
	if (gethostname(host, sizeof(host)) != 0)
		host[0] = '\0';
	host[sizeof(host) - 1] = '\0';
	struct passwd *pw = getpwuid(getuid());
	struct notify_msg m = {
		.event = e, .job_id = sp->job_id, .job_name = sp->s->name, .state = state,
		.reason = reason, .user = pw ? pw->pw_name : NULL, .host = host[0] ? host : NULL,
		.attempt = sp->attempt, .exit_code = exit_code, .time = now_wall(),
	};
	notify_post(sp->nf, &m);
}

void sup_notify_end(struct sup *sp)
{
	notify_finish(sp->nf, NOTIFY_END_WAIT_MS);
	sp->nf = NULL;
}
