/*
 * endpoint_hook.c -- the job's endpoints (endpoint/endpoint.h) in the
 * supervisor: started with the first attempt's workers, as their user,
 * with their environment and cwd, in the job's image when it has one
 * (container_hook.c); reaped by the attempt loop; watched by the
 * supervisor's watchdog; stopped when the job ends.  A node of a
 * multi-node job runs them on node 0 only; when that node reports to a
 * `trainctl server` over TCP (a Slurm job), the rows name the node and the
 * server reaches them through node 0's relay (endpoint/relay.h).
 */
#include "launch/supervisor_int.h"
#include "core/proc.h"
#include "core/xalloc.h"
#include "endpoint/endpoint.h"
#include "endpoint/relay.h"
#include "hub/hub.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void ep_say(void *ctx, const char *msg)
{
	sup_say(ctx, "%s", msg);
}

static void ep_watch(void *ctx, pid_t pgid)
{
	sup_watchdog_tell(ctx, (int32_t)pgid);
}

/*
 * A node of a multi-node job whose hub is reached over TCP (not the Unix
 * socket of a server on this host): its endpoints are relayed.
 */
static bool relayed(const struct sup *sp)
{
	const char *url = getenv("TRAINCTL_HUB_URL");
	const char *sock = getenv("TRAINCTL_HUB_SOCKET");
	return sp->o->node && url && !strncmp(url, "http://", 7) && !(sock && *sock);
}

static void relay_start(struct sup *sp)
{
	const char *names[64];
	int ports[64];
	struct ep_relay_target t[64];
	size_t n = endpoint_http_running(sp->eps, names, ports, 64);
	if (!n)
		return;
	for (size_t i = 0; i < n; i++)
		t[i] = (struct ep_relay_target){ names[i], ports[i] };
	struct tc_err err = TC_ERR_INIT;
	char *secret = hub_env_secret(&err);
	struct ep_relay_opts o = { .url = getenv("TRAINCTL_HUB_URL"), .secret = secret,
				   .job_id = sp->job_id, .targets = t, .ntargets = n,
				   .say = ep_say, .say_ctx = sp };
	if (!secret || ep_relay_start(&o, &sp->eprelay, &err))
		sup_say(sp, "warning: endpoints: the server cannot reach them: %s", err.msg);
	if (secret) {
		memset(secret, 0, strlen(secret));
		free(secret);
	}
	tc_err_release(&err);
}

static int ep_wrap(void *ctx, const char *name, struct proc *p, struct tc_err *err)
{
	return sup_container_wrap_endpoint(ctx, name, p, err);
}

static void ep_gone(void *ctx, const char *name, bool killed)
{
	sup_container_endpoint_gone(ctx, name, killed);
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
	bool relay = relayed(sp);
	char host[256] = "";
	if (relay && gethostname(host, sizeof(host) - 1) < 0)
		snprintf(host, sizeof(host), "node0");
	struct endpoint_opts o = {
		.s = sp->s, .job_id = sp->job_id, .run_dir = sp->run_dir, .log_dir = sp->log_dir,
		.tb_dir = sp->tb_dir, .env = &env, .sink = sp->sink,
		.host = relay ? host : NULL,
		.say = ep_say, .say_ctx = sp, .watch = ep_watch, .watch_ctx = sp,
	};
	if (sup_container_endpoints_in_image(sp)) {
		/* an image job's endpoints run in its image, each in its own container */
		o.image = sp->s->container.image;
		o.wrap = ep_wrap;
		o.gone = ep_gone;
		o.wrap_ctx = sp;
	} else if (sp->ctr) {
		sup_say(sp, "warning: endpoints: container.runtime pyxis does not run them in image "
			"%s yet: they run on the host", sp->s->container.image);
	}
	struct tc_err err = TC_ERR_INIT;
	if (endpoint_start_all(&o, &sp->eps, &err))
		sup_say(sp, "warning: endpoints: %s", err.msg);
	tc_err_release(&err);
	if (relay)
		relay_start(sp);
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
	/* the connections first: no request reaches an endpoint that is stopping */
	ep_relay_stop(sp->eprelay);
	sp->eprelay = NULL;
	endpoint_stop_all(sp->eps, sp->s->grace_seconds);
	sp->eps = NULL;
}
