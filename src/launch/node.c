/*
 * node.c -- one node of a multi-node job (launch.h: struct launch_node):
 * the node's part of the rank table, its single attempt, and the outcome
 * it leaves in attempts/<a>/node-<n>.json for the job-level driver
 * (multinode.c), which records the job's states itself.
 */
#include "launch/supervisor_int.h"
#include "launch/nodeckpt_int.h"
#include "core/proc.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "ckpt/ckpt.h"
#include "hub/hub.h"
#include "hub/rdzv.h"
#include "jobs/jobs.h"
#include "jobs/runpath.h"

#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <errno.h>
#include <unistd.h>

/* Node n's part of an npu job's rank table, merged by node 0 (ranktable.c). */
static int node_rank_table(struct sup *sp, char **path, struct tc_err *err)
{
	const struct launch_node *nd = sp->o->node;
	*path = NULL;
	if (strcmp(sp->s->device_type, "npu") != 0)
		return 0;
	struct sbuf conf = SBUF_INIT, dir = SBUF_INIT;
	const char *c = sp->s->hccn_conf ? sp->s->hccn_conf : "/etc/hccn.conf";
	const char *at = strstr(c, "{node}");
	if (at)
		sbuf_addf(&conf, "%.*s%d%s", (int)(at - c), c, nd->node_rank, at + 6);
	else
		sbuf_adds(&conf, c);
	char **ips = xcalloc((size_t)sp->n, sizeof(char *));
	int rc = ranktable_device_ips(conf.buf, sp->s->device_ids, sp->n, ips, err);
	if (!rc) {
		char *server = host_ipv4();
		char *part = ranktable_json(server, sp->s->device_ids, ips, sp->n,
					    nd->node_rank * sp->n);
		sbuf_addf(&dir, "%s/ranktable/attempt-%d", sp->run_dir, nd->attempt);
		rc = ranktable_exchange(dir.buf, nd->node_rank, nd->nnodes, part,
					nd->ranktable_timeout > 0 ? nd->ranktable_timeout : 300, err);
		free(part);
		free(server);
		if (!rc) {
			sbuf_adds(&dir, "/hccl.json");
			*path = sbuf_detach(&dir);
		}
	}
	for (int i = 0; i < sp->n; i++)
		free(ips[i]);
	free(ips);
	sbuf_release(&conf);
	sbuf_release(&dir);
	return rc;
}

/* What a node tells its driver, where its run folder keeps it (launch.h). */
char *launch_node_result_path(const char *run_dir, int attempt, int node_rank)
{
	struct sbuf sb = SBUF_INIT;
	sbuf_addf(&sb, "%s/attempts/%d/node-%d.json", run_dir, attempt, node_rank);
	return sbuf_detach(&sb);
}

char *launch_node_hang_path(const char *run_dir, int attempt, int node_rank)
{
	struct sbuf sb = SBUF_INIT;
	sbuf_addf(&sb, "%s/attempts/%d/hang-node-%d.json", run_dir, attempt, node_rank);
	return sbuf_detach(&sb);
}

/* Who this node is, in what it tells the driver: node, attempt, host, hostname, node_name. */
static void node_identity(struct sup *sp, json_t *o)
{
	const struct launch_node *nd = sp->o->node;
	char *host = host_ipv4();
	char hostname[256] = "";
	if (gethostname(hostname, sizeof(hostname) - 1) < 0)
		hostname[0] = '\0';
	json_object_set_new(o, "node", json_integer(nd->node_rank));
	json_object_set_new(o, "attempt", json_integer(nd->attempt));
	json_object_set_new(o, "host", json_string(host));
	json_object_set_new(o, "hostname", json_string(hostname));
	/* the scheduler's name of this node (several slurmd may share a host) */
	const char *slurm_node = getenv("SLURMD_NODENAME");
	if (slurm_node && *slurm_node)
		json_object_set_new(o, "node_name", json_string(slurm_node));
	free(host);
}

/*
 * o for the driver: at path, and, for a node that reports to a hub (whose
 * run folder may be its own), as one line on stdout (tag not NULL): tag, then o's JSON;
 * the driver, reading its srun's output, writes it at the same path of its
 * run folder.
 */
static int node_tell(struct sup *sp, json_t *o, const char *tag, const char *path,
		     struct tc_err *err)
{
	if (sp->o->sink && tag) {
		char *line = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
		struct sbuf sb = SBUF_INIT;
		sbuf_addf(&sb, "%s%s\n", tag, line ? line : "{}");
		if (write_all(STDOUT_FILENO, sb.buf, sb.len) < 0)
			sup_say(sp, "warning: cannot tell the driver: %s", strerror(errno));
		sbuf_release(&sb);
		free(line);
	}
	char *text = json_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS);
	char *dir = path_dirname(path);
	int rc = mkdir_p(dir, err);
	if (!rc)
		rc = write_file_atomic(path, text, strlen(text), err);
	free(dir);
	free(text);
	return rc;
}

/*
 * o on stdout in lines of less than 1 KiB (launch.h: LAUNCH_NODE_HANG_TAG):
 * Slurm passes a longer line on in pieces, and every node reports its hang
 * at about the same moment, so another node's pieces could come between.
 */
static void node_tell_parts(struct sup *sp, json_t *o)
{
	const struct launch_node *nd = sp->o->node;
	char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
	size_t len = text ? strlen(text) : 0;
	size_t parts = len ? (len + LAUNCH_NODE_PART - 1) / LAUNCH_NODE_PART : 0;
	struct sbuf sb = SBUF_INIT;
	for (size_t i = 0; i < parts; i++) {
		size_t n = len - i * LAUNCH_NODE_PART;
		json_t *p = json_pack("{s:i, s:i, s:I, s:I, s:s%}", "node", nd->node_rank, "attempt",
				      nd->attempt, "part", (json_int_t)i, "parts", (json_int_t)parts,
				      "text", text + i * LAUNCH_NODE_PART,
				      n < LAUNCH_NODE_PART ? n : (size_t)LAUNCH_NODE_PART);
		char *line = json_dumps(p, JSON_COMPACT | JSON_ENSURE_ASCII);
		sbuf_addf(&sb, "%s%s\n", LAUNCH_NODE_HANG_TAG, line ? line : "{}");
		free(line);
		json_decref(p);
	}
	if (sb.len && write_all(STDOUT_FILENO, sb.buf, sb.len) < 0)
		sup_say(sp, "warning: cannot tell the driver of the hang: %s", strerror(errno));
	sbuf_release(&sb);
	free(text);
}

static void node_hang(struct sup *sp, json_t *h)
{
	const struct launch_node *nd = sp->o->node;
	node_identity(sp, h);
	if (sp->o->sink)
		node_tell_parts(sp, h);
	char *path = launch_node_hang_path(sp->run_dir, nd->attempt, nd->node_rank);
	struct tc_err e = TC_ERR_INIT;
	if (node_tell(sp, h, NULL, path, &e))
		sup_say(sp, "warning: %s", e.msg);
	tc_err_release(&e);
	free(path);
}

/* The complete checkpoints of a node's folder (one the driver's host shares). */
static void scan_ckpts(const char *dir, struct strvec *names)
{
	struct ckpt_set set;
	struct tc_err e2 = TC_ERR_INIT;
	if (ckpt_scan(dir, 0, true, &set, &e2) == 0) {
		for (size_t i = 0; i < set.nr; i++)
			if (set.v[i].complete)
				strvec_push(names, set.v[i].name);
		ckpt_set_release(&set);
	}
	tc_err_release(&e2);
}

/*
 * The attempt's outcome for the driver: attempts/<a>/node-<n>.json.  nck:
 * the watch on this node's own checkpoints (NULL: none), consumed here.
 */
static int node_result(struct sup *sp, enum job_state state, const char *cause,
		       const char *detail, bool unhealthy, struct node_ckpts *nck,
		       struct tc_err *err)
{
	const struct launch_node *nd = sp->o->node;
	char *path = launch_node_result_path(sp->run_dir, nd->attempt, nd->node_rank);
	json_t *o = json_pack("{s:s, s:f}", "state", job_state_name(state), "time", now_wall());
	node_identity(sp, o);
	if (cause)
		json_object_set_new(o, "cause", json_string(cause));
	if (detail)
		json_object_set_new(o, "detail", json_string(detail));
	if (sp->failed)
		json_object_set_new(o, "rank", json_integer(sp->fail_rank));
	if (unhealthy) /* a device failed its health check: the driver may exclude this node */
		json_object_set_new(o, "unhealthy", json_true());
	/* the watchdog's: what the driver decides the job's restart and diagnostics from */
	int action = sup_watch_log_action(sp);
	if (state == JOB_FAILED && action >= 0)
		json_object_set_new(o, "on_log",
				    json_string(spec_log_action_name((enum spec_log_action)action)));
	if (state == JOB_FAILED && sp->fail_final && action < 0)
		json_object_set_new(o, "final", json_true());
	json_t *diag = sup_watch_summary(sp);
	if (diag)
		json_object_set_new(o, "diagnostics", diag);
	if (sp->o->sink) {
		/*
		 * The complete checkpoints this node has (on its own disk: those
		 * still whole as recorded), and whether it writes any: a restart
		 * resumes from the newest one every node that writes them has
		 * (multinode.c).
		 */
		struct strvec names = STRVEC_INIT;
		bool wrote = false;
		if (nck)
			node_ckpts_stop(nck, &names, &wrote);
		else
			scan_ckpts(sp->ckpt_dir, &names);
		json_t *a = json_array();
		for (size_t i = 0; i < names.nr; i++)
			json_array_append_new(a, json_string(names.v[i]));
		json_object_set_new(o, "ckpts", a);
		json_object_set_new(o, "ckpt_writer", json_boolean(wrote || names.nr));
		strvec_clear(&names);
	} else {
		node_ckpts_stop(nck, NULL, NULL);
	}
	/* LAUNCH_NODE_RESULT_TAG: a node that reports to a hub may have a run folder of its own */
	int rc = node_tell(sp, o, LAUNCH_NODE_RESULT_TAG, path, err);
	json_decref(o);
	free(path);
	return rc;
}

/* The hub ended this node's round (the heartbeat thread's call): said; the driver reads why. */
static void node_rdzv_lost(void *ctx, const char *why)
{
	struct sup *sp = ctx;
	sup_say(sp, "warning: node %d: the hub ended this node's rendezvous round: %s",
		sp->o->node->node_rank, why);
}

/*
 * A node that reports to a hub joins the attempt's rendezvous round (the
 * driver opened it: hub/rdzv.h), waits until it is closed and heartbeats
 * until the attempt ends (*keeper; the client is the keeper's until it
 * stops).  The hub then fences this node's stream once it is no member
 * of the job's current round.  Trouble (no hub route, no round open, too
 * few nodes in time) is said, and the attempt goes on as without one.
 */
static void node_rdzv(struct sup *sp, struct rdzv_client **cp, struct rdzv_keeper **keeper)
{
	const struct launch_node *nd = sp->o->node;
	*cp = NULL;
	*keeper = NULL;
	if (!sp->o->sink)
		return;
	char hostname[256] = "";
	const char *name = getenv("SLURMD_NODENAME");
	if ((!name || !*name) && gethostname(hostname, sizeof(hostname) - 1) == 0)
		name = hostname;
	char *host = host_ipv4();
	struct rdzv_reply a = { .why = SBUF_INIT };
	struct tc_err e = TC_ERR_INIT;
	int timeout = nd->ranktable_timeout > 0 ? (int)nd->ranktable_timeout : 300;
	int rc = rdzv_client_from_env(sp->job_id, name && *name ? name : "node", host,
				      sink_remote_stream(sp->o->sink), nd->node_rank, cp, &e);
	if (!rc && *cp)
		rc = rdzv_client_rendezvous(*cp, nd->attempt, timeout, &a, &e);
	if (rc) {
		sup_say(sp, "warning: node %d: rendezvous round %d: %s", nd->node_rank, nd->attempt,
			e.msg);
		rdzv_client_free(*cp);
		*cp = NULL;
	} else if (*cp) {
		sup_say(sp, "node %d: rendezvous round %d closed: node rank %d of %d", nd->node_rank,
			nd->attempt, a.rank, a.world);
		*keeper = rdzv_keep_start(*cp, nd->attempt, a.poll_ms, node_rdzv_lost, sp);
	}
	rdzv_reply_release(&a);
	tc_err_release(&e);
	free(host);
}

/* nodeckpt.c's lines (from its thread too: sup_say() writes each line at once) */
static void node_say(void *ctx, const char *msg)
{
	sup_say(ctx, "%s", msg);
}

/*
 * Slurm signals every process of a step, workers included: a worker killed
 * by SIGTERM may be reaped before the supervisor's own SIGTERM is read.
 * Wait a moment for it, so a stop is not taken for a failure.
 */
static int late_stop_signal(struct sup *sp, int ms)
{
	int64_t until = now_mono_ms() + ms;
	for (;;) {
		int64_t left = until - now_mono_ms();
		struct pollfd pf = { sp->sigfd, POLLIN, 0 };
		if (left <= 0 || poll(&pf, 1, (int)left) <= 0)
			return 0;
		struct signalfd_siginfo si;
		while (read(sp->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
			if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT || si.ssi_signo == SIGHUP)
				return (int)si.ssi_signo;
	}
}

/* How the attempt ended, for the driver (node_result) and our exit status. */
static int node_outcome(struct sup *sp, int *exit_status, struct node_ckpts *nck,
			struct tc_err *err)
{
	const struct launch_node *nd = sp->o->node;
	if (!sp->user_signal && sp->failed && WIFSIGNALED(sp->fail_status) &&
	    WTERMSIG(sp->fail_status) == SIGTERM)
		sp->user_signal = late_stop_signal(sp, 1000);
	struct sbuf cause = SBUF_INIT, detail = SBUF_INIT;
	enum job_state state = JOB_SUCCEEDED;
	if (sp->user_signal) {
		state = JOB_KILLED;
		sbuf_addf(&cause, "node %d stopped by ", nd->node_rank);
		proc_describe_stop_signal(&cause, sp->user_signal);
		*exit_status = 128 + sp->user_signal;
	} else if (sp->failed) {
		state = JOB_FAILED;
		/* final (the driver must not restart) tells it as "final" in node-<n>.json */
		if (sup_failure_cause(sp, &cause) != ATTEMPT_MAY_RESTART)
			sp->fail_final = true;
		sup_failure_detail(sp, &detail, sp->fail_rank);
		*exit_status = 1;
	} else {
		*exit_status = 0;
	}
	sup_say(sp, "node %d: %s%s%s", nd->node_rank, job_state_name(state), cause.len ? ": " : "",
		cause.buf);
	int rc = node_result(sp, state, cause.len ? cause.buf : NULL, detail.len ? detail.buf : NULL,
			     false, nck, err);
	sbuf_release(&cause);
	sbuf_release(&detail);
	return rc;
}

int sup_node_attempt(struct sup *sp, int *exit_status, struct tc_err *err)
{
	const struct launch_node *nd = sp->o->node;
	char *rank_table = NULL;
	int rc;
	sp->attempt = nd->attempt;
	sp->node_hang = node_hang;
	/* this node's devices, before its workers (health_hook.c) */
	bool changed = false;
	if ((rc = sup_health_check(sp, true, &changed, err))) {
		struct tc_err e2 = TC_ERR_INIT;
		sup_say(sp, "node %d: %s", nd->node_rank, err->msg);
		node_result(sp, JOB_FAILED, err->msg, NULL, true, NULL, &e2);
		tc_err_release(&e2);
		*exit_status = 1;
		return 0; /* the driver decides: the attempt failed on this node */
	}
	struct rdzv_client *rzc = NULL;
	struct rdzv_keeper *rzk = NULL;
	node_rdzv(sp, &rzc, &rzk);
	if ((rc = node_rank_table(sp, &rank_table, err))) {
		struct tc_err e2 = TC_ERR_INIT;
		node_result(sp, JOB_FAILED, err->msg, NULL, false, NULL, &e2);
		tc_err_release(&e2);
		rdzv_keep_stop(rzk);
		rdzv_client_free(rzc);
		return rc;
	}
	int *ports = sup_rank_ports(sp);
	struct env_plan plan = {
		.spec = sp->s, .job_id = sp->job_id, .output_dir = sp->output_dir,
		.ckpt_dir = sp->ckpt_dir, .data_dir = sp->data_dir, .log_dir = sp->log_dir,
		.tb_dir = sp->tb_dir, .resume_from = nd->resume_from, .master_addr = nd->master_addr,
		.master_port = nd->master_port, .node_rank = nd->node_rank, .nnodes = nd->nnodes,
		.restart_count = nd->attempt, .rank_table = rank_table, .extra_ports = ports,
		.secret_env = &sp->secrets.env, .stop_file = sp->stop_file, .metrics_channel = sp->mi != NULL,
	};
	struct sbuf envname = SBUF_INIT;
	if (nd->node_rank)
		sbuf_addf(&envname, "job-node%d.env", nd->node_rank);
	else
		sbuf_adds(&envname, "job.env");
	/* this node's ranks are watched here (watch.c); the driver decides for the job */
	rc = sup_watch_attempt(sp, nd->resume_from, &plan, err);
	if (!rc)
		rc = sup_start_workers(sp, &plan, envname.buf, err);
	/*
	 * A run folder of this host's own: its files reach the hub's copy as
	 * they grow (rank logs live, for logs -f) and at the end of the attempt.
	 */
	struct hub_ship *ship = NULL;
	struct node_ckpts *nck = NULL;
	if (!rc && sp->o->sink && !hub_run_dir_shared(sp->run_dir)) {
		/* and its checkpoints, on this disk only, reach the hub with the node's index */
		/*
		 * checkpoint.keep here too, unless the driver shares this host's
		 * folder (its attempts/<k>/master is here): it rotates it itself
		 */
		struct sbuf drv = SBUF_INIT;
		sbuf_addf(&drv, "%s/attempts/%d/master", sp->run_dir, nd->attempt);
		int keep = path_exists(drv.buf) ? 0 : sp->s->ckpt_keep;
		sbuf_release(&drv);
		nck = node_ckpts_start(sp->o->sink, sp->job_id, nd->node_rank, sp->ckpt_dir, keep,
				       node_say, sp);
		ship = hub_ship_start(sp->o->sink, sp->job_id, sp->run_dir, 1000);
		struct sbuf rel = SBUF_INIT;
		for (int i = 0; i < sp->n; i++) {
			sbuf_reset(&rel);
			run_rel(&rel, RUN_RANK_LOG, sp->w[i].rank);
			hub_ship_add(ship, rel.buf);
		}
		sbuf_reset(&rel);
		run_rel(&rel, RUN_LOGS, 0);
		sbuf_addf(&rel, "/supervisor-node%d.log", nd->node_rank);
		hub_ship_add(ship, rel.buf);
		hub_ship_add(ship, envname.buf);
		sbuf_release(&rel);
	}
	sbuf_release(&envname);
	if (!rc) {
		struct tc_err e2 = TC_ERR_INIT;
		if (sup_record_started(sp, NULL, &e2))
			sup_say(sp, "warning: %s", e2.msg);
		tc_err_release(&e2);
		sup_workers_up(sp, &e2); /* no jobio on a node: nothing to fail */
		tc_err_release(&e2);
		sup_endpoints_start(sp, &plan);
		sup_say(sp, "job %s node %d of %d, attempt %d: ranks %d-%d started (master %s:%d)%s%s",
			sp->job_id, nd->node_rank, nd->nnodes, nd->attempt, sp->w[0].rank,
			sp->w[sp->n - 1].rank, nd->master_addr, nd->master_port,
			nd->resume_from ? ", resuming from " : "",
			nd->resume_from ? nd->resume_from : "");
		sup_attempt_loop(sp);
		rc = node_outcome(sp, exit_status, nck, err);
		nck = NULL;
	}
	node_ckpts_stop(nck, NULL, NULL); /* workers that never started: nothing to say */
	hub_ship_stop(ship); /* the last of the attempt's files */
	rdzv_keep_stop(rzk); /* its heartbeats end with the attempt */
	rdzv_client_free(rzc);
	free(ports);
	free(rank_table);
	return rc;
}
