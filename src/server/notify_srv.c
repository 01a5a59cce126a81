/*
 * notify_srv.c -- the server's part of webhooks (notify/notify.h):
 *  - its own hooks (server --notify-file) for jobs whose spec has no
 *    notify:, sent by the server alone: their secrets are the server's and
 *    never reach a job (rule: a job's environment holds no secret that is
 *    not its own).  The queued event is the server's; the later ones are
 *    the supervisors', relayed through the hub (hub_notify_relay);
 *  - the queued event of a spec's own hooks, the one event before the
 *    job's supervisor exists, whose secret_file is read with the job's
 *    account's file ids and whose secret_env is refused: the server's
 *    environment is not the user's.  Everything later is the supervisor's.
 */
#include "server/server_int.h"
#include "server/admit.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "hub/hub.h"
#include "launch/launch.h"
#include "notify/notify.h"
#include "spec/spec.h"

#include <pwd.h>
#include <stdlib.h>
#include <unistd.h>

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

static void warn_job(struct srv *s, const char *id, const struct tc_err *err)
{
	struct sbuf msg = SBUF_INIT;
	sbuf_addf(&msg, "warning: job %s: %s", id, err->msg);
	srv_say(s, msg.buf);
	sbuf_release(&msg);
}

/* A supervisor's event for the server's own hooks (the hub calls it; never blocks). */
static void on_relay(void *ctx, const struct notify_msg *m)
{
	struct srv *s = ctx;
	struct tc_err err = TC_ERR_INIT;
	if (notify_post_hooks(s->nf, s->o.notify, s->o.nnotify, m, 0, &err))
		warn_job(s, m->job_id, &err);
	tc_err_release(&err);
}

void srv_notify_start(struct srv *s)
{
	struct notify_opts no = { .record = on_record, .warn = on_warn, .ctx = s };
	s->nf = notify_pool(&no);
	if (s->o.nnotify)
		hub_notify_relay(on_relay, s);
}

void srv_notify_end(struct srv *s)
{
	hub_notify_relay(NULL, NULL);
	notify_finish(s->nf, SRV_NOTIFY_END_WAIT_MS);
	s->nf = NULL;
}

int srv_notify_check(const struct spec *sp, struct tc_err *err)
{
	for (size_t i = 0; i < sp->nnotify; i++)
		if (sp->notify[i].secret_env)
			return tc_error(err, TC_EUSAGE,
					"notify[%zu].secret_env: a job of the server cannot read a variable "
					"of the server's environment; give secret_file (read as your account)",
					i);
	return 0;
}

/*
 * The spec's own hooks, their secret files read as user's account (a root
 * server; this thread's file ids only) and never from our environment.
 */
static int post_as(struct srv *s, const struct spec *sp, const struct notify_msg *m,
		   const char *user, struct tc_err *err)
{
	bool files = false;
	for (size_t i = 0; i < sp->nnotify; i++)
		files |= sp->notify[i].secret_file != NULL && (sp->notify[i].events & (1u << m->event));
	if (!files || geteuid() != 0)
		return notify_post_hooks(s->nf, sp->notify, sp->nnotify, m, NOTIFY_NO_ENV, err);
	struct passwd pw, *res = NULL;
	char buf[4096];
	if (!user || getpwnam_r(user, &pw, buf, sizeof(buf), &res) != 0 || !res)
		return tc_error(err, TC_EUSAGE, "notify: user '%s' has no account to read the secret "
				"file as", user ? user : "");
	/* the one switch of file ids (admit.c), as the admission door reads a spec's files */
	struct fs_ids ids;
	int rc;
	if (!proc_fs_as(pw.pw_uid, pw.pw_gid, &ids))
		rc = tc_error(err, TC_ESYS, "notify: cannot take the file ids of %s", user);
	else
		rc = notify_post_hooks(s->nf, sp->notify, sp->nnotify, m, NOTIFY_NO_ENV, err);
	proc_fs_restore(&ids);
	return rc;
}

void srv_notify_queued(struct srv *s, const struct spec *sp, const char *id, const char *user)
{
	struct notify_msg m = { .event = NOTIFY_QUEUED, .job_id = id, .job_name = sp->name,
				.state = job_state_name(JOB_QUEUED), .reason = "submitted to the server", .user = user,
				.attempt = -1, .exit_code = -1, .time = now_wall() };
	struct tc_err err = TC_ERR_INIT;
	int rc = sp->notify_given ? post_as(s, sp, &m, user, &err)
				  : notify_post_hooks(s->nf, s->o.notify, s->o.nnotify, &m, 0, &err);
	if (rc)
		warn_job(s, id, &err);
	tc_err_release(&err);
}
