/*
 * notify_srv.c -- the server's part of webhooks (notify/notify.h): its
 * default hooks (server --notify-file) written into the specs of jobs whose
 * own spec has no notify:, and the queued event, the one event before a
 * job's supervisor exists.  Everything later is the supervisor's.
 */
#include "server/server_int.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "launch/launch.h"
#include "notify/notify.h"
#include "spec/spec.h"

#include <stdlib.h>

/* The server stops with deliveries in flight: they get this long. */
#define SRV_NOTIFY_END_WAIT_MS 2000

static void on_record(void *ctx, const struct notify_delivery *d)
{
	struct srv *s = ctx;
	struct tc_err err = TC_ERR_INIT;
	if (d->job_id && launch_record_delivery(s->home, d->job_id, d, &err)) {
		struct sbuf msg = SBUF_INIT;
		sbuf_addf(&msg, "warning: notify: cannot record a delivery: %s", err.msg);
		srv_say(s, msg.buf);
		sbuf_release(&msg);
	}
	tc_err_release(&err);
}

static void on_warn(void *ctx, const char *msg)
{
	srv_say(ctx, msg);
}

void srv_notify_start(struct srv *s)
{
	struct notify_opts no = { .record = on_record, .warn = on_warn, .ctx = s };
	s->nf = notify_pool(&no);
}

void srv_notify_end(struct srv *s)
{
	notify_finish(s->nf, SRV_NOTIFY_END_WAIT_MS);
	s->nf = NULL;
}

void srv_notify_defaults(struct srv *s, struct spec *sp)
{
	if (sp->notify_given || !s->o.nnotify)
		return;
	sp->notify = xcalloc(s->o.nnotify, sizeof(*sp->notify));
	for (size_t i = 0; i < s->o.nnotify; i++)
		notify_hook_copy(&sp->notify[i], &s->o.notify[i]);
	sp->nnotify = s->o.nnotify;
	sp->notify_given = true;
}

void srv_notify_queued(struct srv *s, const struct spec *sp, const char *id, const char *user)
{
	struct notify_msg m = { .event = NOTIFY_QUEUED, .job_id = id, .job_name = sp->name,
				.state = "queued", .reason = "submitted to the server", .user = user,
				.attempt = -1, .exit_code = -1, .time = now_wall() };
	struct tc_err err = TC_ERR_INIT;
	if (notify_post_hooks(s->nf, sp->notify, sp->nnotify, &m, &err)) {
		struct sbuf msg = SBUF_INIT;
		sbuf_addf(&msg, "warning: job %s: %s", id, err.msg);
		srv_say(s, msg.buf);
		sbuf_release(&msg);
	}
	tc_err_release(&err);
}
