/*
 * notify_int.h -- private to src/launch/: a job's webhooks (notify/notify.h)
 * as the supervisor of a one-node job and the driver of a multi-node job
 * send them (notify_hook.c).  The struct is the caller's from open to close;
 * every delivery is written down through the job's sink.
 */
#ifndef TC_LAUNCH_NOTIFY_INT_H
#define TC_LAUNCH_NOTIFY_INT_H

#include "hub/sink.h"
#include "notify/notify.h"
#include "spec/spec.h"

struct launch_notify;

/*
 * The job's hooks (spec notify:) started, or NULL when it has none.  Their
 * deliveries are recorded through k, the job's sink (borrowed; the
 * delivery thread opens its own door to it: sink_thread_open with home).
 * say gets warnings (a secret that cannot be read turns the hooks off with
 * one); it is called from the delivery thread too.
 */
struct launch_notify *launch_notify_open(const struct spec *s, const char *home,
					 const char *job_id, struct sink *k,
					 void (*say)(void *ctx, const char *msg), void *ctx);
/* One event, queued (never blocks); state: the job's state word after it, or NULL. */
void launch_notify(struct launch_notify *ln, enum notify_event e, const char *state,
		   const char *reason, int attempt, int exit_code);
/* The job's end: what is still being delivered gets a few seconds. NULL: no-op. */
void launch_notify_close(struct launch_notify *ln);

#endif
