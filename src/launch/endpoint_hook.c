/*
 * endpoint_hook.c -- the job's endpoints (endpoint/endpoint.h) in the
 * supervisor: started with the first attempt's workers, as their user,
 * with their environment and cwd; reaped by the attempt loop; watched by
 * the supervisor's watchdog; stopped when the job ends.  A node of a
 * multi-node job runs them on node 0 only.
 */
#include "launch/supervisor_int.h"
#include "core/proc.h"
#include "core/xalloc.h"
#include "endpoint/endpoint.h"

#include <stdlib.h>

static void ep_say(void *ctx, const char *msg)
{
	sup_say(ctx, "%s", msg);
}

static void ep_watch(void *ctx, pid_t pgid)
{
	sup_watchdog_tell(ctx, (int32_t)pgid);
}

void sup_endpoints_start(struct sup *sp, const struct env_plan *plan)
{
	if (sp->eps_started || !sp->s->nendpoints)
		return;
	sp->eps_started = true;
	if (sp->o->node && sp->o->node->node_rank != 0)
		return;
	/* the workers' environment without what is one rank's */
	struct strvec env = STRVEC_INIT;
	proc_env_inherit(&env);
	env_drop_supervisor_only(&env);
	env_common(plan, &env);
	struct endpoint_opts o = {
		.s = sp->s, .job_id = sp->job_id, .run_dir = sp->run_dir, .log_dir = sp->log_dir,
		.tb_dir = sp->tb_dir, .env = &env, .sink = sp->sink,
		.say = ep_say, .say_ctx = sp, .watch = ep_watch, .watch_ctx = sp,
	};
	struct tc_err err = TC_ERR_INIT;
	if (endpoint_start_all(&o, &sp->eps, &err))
		sup_say(sp, "warning: endpoints: %s", err.msg);
	tc_err_release(&err);
	strvec_clear(&env);
}

bool sup_endpoints_reaped(struct sup *sp, pid_t pid, int status)
{
	return endpoint_reaped(sp->eps, pid, status);
}

void sup_endpoints_watch(struct sup *sp)
{
	pid_t g[64];
	size_t n = endpoint_groups(sp->eps, g, 64);
	for (size_t i = 0; i < n; i++)
		sup_watchdog_tell(sp, (int32_t)g[i]);
}

void sup_endpoints_stop(struct sup *sp)
{
	endpoint_stop_all(sp->eps, sp->s->grace_seconds);
	sp->eps = NULL;
}
