/*
 * supervisor.c -- one job on this node (launch.h: launch_run): its record,
 * run folder, watchdog, signals, metrics, attempts and root cause.  The
 * workers of each attempt are workers.c's, a node of a multi-node job runs
 * its one attempt in node.c (supervisor_int.h).  The invariants are listed
 * in launch.h.
 */
#include "launch/supervisor_int.h"
#include "launch/rounds.h"
#include "launch/attempt.h"
#include "launch/jobio_int.h"
#include "launch/console_int.h"
#include "core/proc.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "devices/devices.h"
#include "diag/diag.h"
#include "hub/hub.h"
#include "jobs/jobs.h"
#include "jobs/runpath.h"
#include "metrics/ingest.h"
#include "report/report.h"
#include "storage/storage.h"
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- run folder ---- */

/* what in the run folder run_dir (runpath.h), on the heap */
static char *run_path_dup(const char *run_dir, enum run_what what)
{
	struct sbuf sb = SBUF_INIT;
	run_path(&sb, run_dir, NULL, what, 0);
	return sbuf_detach(&sb);
}

static int make_run_folder(struct sup *sp, struct tc_err *err)
{
	int rc;
	if (sp->o->run_dir) {
		sp->run_dir = xstrdup(sp->o->run_dir);
	} else {
		struct sbuf rd = SBUF_INIT;
		run_path(&rd, sp->o->home, sp->job_id, RUN_DIR, 0);
		sp->run_dir = sbuf_detach(&rd);
	}
	sp->log_dir = run_path_dup(sp->run_dir, RUN_LOGS);
	sp->output_dir = run_path_dup(sp->run_dir, RUN_OUTPUT);
	sp->data_dir = run_path_dup(sp->run_dir, RUN_DATA);
	sp->tb_dir = sup_join(sp->output_dir, "tensorboard");
	struct sbuf stop = SBUF_INIT;
	if (sp->o->node)
		sbuf_addf(&stop, "%s/stop-node%d", sp->run_dir, sp->o->node->node_rank);
	else
		sbuf_addf(&stop, "%s/stop", sp->run_dir);
	sp->stop_file = sbuf_detach(&stop);
	sp->ckpt_dir = sp->s->ckpt_dir[0] == '/' ? xstrdup(sp->s->ckpt_dir)
						  : sup_join(sp->output_dir, sp->s->ckpt_dir);
	if ((rc = mkdir_p(sp->run_dir, err)))
		return rc;
	size_t rl = strlen(sp->run_dir);
	const char *inside = !strncmp(sp->ckpt_dir, sp->run_dir, rl) && sp->ckpt_dir[rl] == '/'
				     ? sp->ckpt_dir + rl + 1
				     : NULL;
	const char *rels[] = { "logs", "output", "data", "output/tensorboard", inside };
	for (size_t i = 0; i < sizeof(rels) / sizeof(rels[0]); i++)
		if (rels[i] && (rc = sup_user_dir(sp, sp->run_dir, rels[i], err)))
			return rc;
	/* a server's job, already its account's: its logs and outputs are its alone */
	for (size_t i = 0; sp->o->run_dir && i < 3; i++) {
		char *d = sup_join(sp->run_dir, rels[i]);
		int bad = chmod(d, 0700);
		free(d);
		if (bad < 0)
			return tc_error_errno(err, TC_ESYS, "cannot set the mode of %s/%s", sp->run_dir,
					      rels[i]);
	}
	if (!inside && (rc = sup_user_dir_outside(sp, sp->ckpt_dir, err)))
		return rc;
	/* a node of a multi-node job runs the job.yaml its submitter wrote */
	char *yaml = sp->o->node ? NULL : spec_to_yaml(sp->s);
	struct sbuf spec = SBUF_INIT;
	run_leaf(&spec, RUN_SPEC, 0);
	rc = yaml ? sup_write_private(sp->run_dir, spec.buf, yaml, err) : 0; /* its env: secrets */
	sbuf_release(&spec);
	free(yaml);
	if (rc)
		return rc;
	struct sbuf sln = SBUF_INIT;
	if (sp->o->node)
		sbuf_addf(&sln, "supervisor-node%d.log", sp->o->node->node_rank);
	else
		run_leaf(&sln, RUN_SUPERVISOR_LOG, 0);
	char *sl = sup_join(sp->log_dir, sln.buf);
	sbuf_release(&sln);
	/* logs/ belongs to the job's user: never follow what it put there */
	sp->suplog_fd = open_regular_nofollow(sl, O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (sp->suplog_fd < 0)
		rc = tc_error_errno(err, TC_ESYS, "cannot open the supervisor log '%s'", sl);
	free(sl);
	return rc;
}

/* ---- the job ---- */

static int setup_signals(struct sup *sp, struct tc_err *err)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	if (sigprocmask(SIG_BLOCK, &set, &sp->old_mask) < 0)
		return tc_error_errno(err, TC_ESYS, "sigprocmask");
	sp->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (sp->sigfd < 0)
		return tc_error_errno(err, TC_ESYS, "signalfd");
	signal(SIGPIPE, SIG_IGN); /* a closed console must not kill the supervisor */
	return 0;
}

static int prepare_rank_table(struct sup *sp, char **path, struct tc_err *err)
{
	*path = NULL;
	if (strcmp(sp->s->device_type, "npu") != 0)
		return 0;
	const char *conf = sp->s->hccn_conf ? sp->s->hccn_conf : "/etc/hccn.conf";
	char **ips = xcalloc((size_t)sp->n, sizeof(char *));
	int rc = ranktable_device_ips(conf, sp->s->device_ids, sp->n, ips, err);
	if (!rc) {
		char *server = host_ipv4();
		char *text = ranktable_json(server, sp->s->device_ids, ips, sp->n, 0);
		rc = sup_write_text(sp->run_dir, "hccl.json", text, err);
		free(text);
		free(server);
		if (!rc)
			*path = sup_join(sp->run_dir, "hccl.json");
	}
	for (int i = 0; i < sp->n; i++)
		free(ips[i]);
	free(ips);
	return rc;
}

/* What the attempts of a one-node job carry from one to the next. */
struct attempts {
	char *resume;     /* TRAINCTL_RESUME_FROM of the next attempt, or NULL */
	char *rank_table; /* npu: the path of hccl.json, else NULL */
	int *ports;       /* one endpoint port per rank, or NULL (sup_rank_ports) */
};

/* Start attempt sp->attempt, record it running and run it to its end. */
static int run_one_attempt(struct sup *sp, struct attempts *a, struct tc_err *err)
{
	int port = sp->s->master_port ? sp->s->master_port : launch_free_port();
	if (port < 0)
		return tc_error_errno(err, TC_ESYS, "cannot find a free port");
	free(a->ports);
	a->ports = sup_rank_ports(sp);
	struct env_plan plan = {
		.spec = sp->s, .job_id = sp->job_id, .output_dir = sp->output_dir,
		.ckpt_dir = sp->ckpt_dir, .data_dir = sp->data_dir, .log_dir = sp->log_dir,
		.tb_dir = sp->tb_dir, .resume_from = a->resume, .master_addr = "127.0.0.1",
		.master_port = port, .node_rank = 0, .nnodes = 1,
		.restart_count = sp->attempt, .rank_table = a->rank_table, .extra_ports = a->ports,
		.secret_env = &sp->secrets.env, .stop_file = sp->stop_file, .metrics_channel = sp->mi != NULL,
	};
	int rc = sup_watch_attempt(sp, a->resume, &plan, err);
	if (!rc)
		rc = sup_start_workers(sp, &plan, "job.env", err);
	if (rc)
		return rc;
	struct sbuf why = SBUF_INIT;
	if (sp->attempt == 0)
		sbuf_addf(&why, "%d worker%s started", sp->n, sp->n == 1 ? "" : "s");
	else
		sbuf_addf(&why, "restart %d of %d: %d worker%s started%s%s", sp->attempt,
			  sp->s->max_restarts, sp->n, sp->n == 1 ? "" : "s",
			  a->resume ? ", resuming from " : "", a->resume ? a->resume : "");
	if (sp->attempt == 0)
		sup_say(sp, "job %s: %s", sp->job_id, why.buf);
	else /* a restart is news even under run -q */
		sup_event(sp, "job %s: %s", sp->job_id, why.buf);
	rc = sup_record_started(sp, why.buf, err);
	if (!rc && sp->attempt == 0)
		sup_notify(sp, NOTIFY_STARTED, job_state_name(JOB_RUNNING), why.buf, -1);
	if (!rc && sp->attempt == 0) /* spares: on one machine (rounds.h) */
		launch_spares_ignored(sp->s, sp->sink, sp->job_id);
	sbuf_release(&why);
	if (!rc)
		rc = sup_workers_up(sp, err);
	if (!rc)
		sup_endpoints_start(sp, &plan); /* once: they live as long as the job */
	if (rc)
		sup_begin_stop(sp);
	sup_attempt_loop(sp);
	return rc;
}

static int record_verdict(struct sup *sp, const struct attempt_outcome *o, bool *again,
			  struct tc_err *err)
{
	struct attempt_verdict v;
	attempt_decide(o, &v);
	/*
	 * The job's last metric records are stored before its end is: a reader
	 * that sees the end (a sweep reading its trial's objective) sees them all.
	 */
	if (v.ends && sp->mi)
		metrics_ingest_finish(sp->mi);
	struct attempt_ctl c = { .sink = sp->sink, .ln = sp->ln, .job_id = sp->job_id,
				 .attempt = sp->attempt, .say = sup_event_cb, .say_ctx = sp,
				 .result = &sp->result };
	struct sbuf detail = SBUF_INIT;
	/* the rank's error file and log tail, for a failure that ends the job */
	if (o->end == ATTEMPT_FAILED && v.ends)
		sup_failure_detail(sp, &detail, sp->fail_rank);
	int rc = attempt_record(&c, &v, detail.len ? detail.buf : NULL, err);
	*again = v.again && !rc;
	sbuf_release(&detail);
	attempt_verdict_release(&v);
	return rc;
}

/* What a server asked of its job that a signal stopped (its hub says, without a store). */
static enum job_stop stop_asked(struct sup *sp)
{
	enum job_stop asked = JOB_STOP_NONE;
	struct tc_err e3 = TC_ERR_INIT;
	if (sp->o->job_id && sink_stop_reason(sp->sink, sp->job_id, &asked, &e3))
		sup_say(sp, "warning: %s", e3.msg);
	tc_err_release(&e3);
	return asked;
}

/* Record how the attempt ended; *again: run the next one (resuming from a->resume). */
static int attempt_outcome(struct sup *sp, struct attempts *a, int *exit_status, bool *again,
			   struct tc_err *err)
{
	struct attempt_outcome o = { .scope = ATTEMPT_ONE_NODE, .restarts = sp->attempt,
				     .max_restarts = sp->s->max_restarts };
	struct sbuf cause = SBUF_INIT;
	*again = false;
	*exit_status = 1;
	if (sp->idle_stop) {
		/* limits.idle_minutes: an unused job is stopped, and nothing failed */
		o.end = ATTEMPT_STOPPED;
		o.signal = SIGTERM;
		sbuf_add(&cause, sp->fail_why.buf, sp->fail_why.len);
	} else if (sp->user_signal) {
		o.end = ATTEMPT_STOPPED;
		o.signal = sp->user_signal;
		o.asked = stop_asked(sp);
	} else if (sp->failed) {
		o.end = ATTEMPT_FAILED;
		o.final = sup_failure_cause(sp, &cause);
		if (attempt_again(&o)) {
			free(a->resume);
			a->resume = jobio_resume(sp->io, false, err);
		}
	} else if (jobio_final_upload(sp->io, &cause)) {
		o.end = ATTEMPT_UPLOAD_FAILED;
	} else {
		o.end = ATTEMPT_OK;
		*exit_status = 0;
	}
	o.cause = cause.buf;
	int rc = record_verdict(sp, &o, again, err);
	sbuf_release(&cause);
	return rc;
}

static int run_attempts(struct sup *sp, int *exit_status, struct tc_err *err)
{
	if (sp->o->node)
		return sup_node_attempt(sp, exit_status, err);
	struct attempts a = { 0 };
	a.resume = jobio_resume(sp->io, !sp->o->resume_newest, err);
	if (!a.resume && err->code)
		return err->code;
	int rc = prepare_rank_table(sp, &a.rank_table, err);
	/* wall time from the first start, restarts included (stop.c: sup_limit_tick) */
	if (sp->s->max_runtime > 0)
		sp->limit_at = now_mono_ms() + (int64_t)sp->s->max_runtime * 1000;
	for (sp->attempt = 0; !rc; sp->attempt++) {
		bool again = false;
		rc = run_one_attempt(sp, &a, err);
		if (!rc)
			rc = attempt_outcome(sp, &a, exit_status, &again, err);
		if (!again)
			break;
		/* between attempts too: a device that broke is not handed to the restart */
		bool changed = false;
		if ((rc = sup_health_check(sp, false, &changed, err)))
			break;
		if (changed && a.rank_table) {
			free(a.rank_table);
			a.rank_table = NULL;
			rc = prepare_rank_table(sp, &a.rank_table, err);
		}
	}
	free(a.ports);
	free(a.rank_table);
	free(a.resume);
	return rc;
}

/*
 * A server's job that ran before (preempted, paused, lost, restarted): the
 * checkpoints its earlier supervisors recorded, from the hub, so that the
 * resume rule (jobio_resume) chooses among them as it would from the store.
 */
static int known_checkpoints(struct sup *sp, struct tc_err *err)
{
	if (!sp->o->resume_newest)
		return 0;
	json_t *o = NULL;
	int rc = hub_job_status_json(sp->job_id, 30, &o, err);
	if (rc) {
		tc_error_prefix(err, "cannot ask the hub for the job's checkpoints");
		return rc;
	}
	json_t *a = json_object_get(o, "ckpts"), *c;
	size_t i;
	json_array_foreach(a, i, c) {
		struct store_ckpt row = {
			.name = (char *)json_string_value(json_object_get(c, "name")),
			.dir = (char *)json_string_value(json_object_get(c, "dir")),
			.step = json_integer_value(json_object_get(c, "step")),
			.epoch = json_integer_value(json_object_get(c, "epoch")),
			.layout = (int)json_integer_value(json_object_get(c, "layout")),
			.nfiles = json_integer_value(json_object_get(c, "nfiles")),
			.bytes = json_integer_value(json_object_get(c, "bytes")),
			.checksum = (char *)json_string_value(json_object_get(c, "checksum")),
			.files_json = (char *)json_string_value(json_object_get(c, "files")),
			.created = json_number_value(json_object_get(c, "created")),
			.state = (char *)json_string_value(json_object_get(c, "state")),
		};
		if (row.name && row.dir && row.state)
			jobio_known(sp->io, &row);
	}
	json_decref(o);
	return 0;
}

/*
 * A server's supervisor is the job's account and stages, watches and
 * uploads with the job's storage credentials, never the server's
 * (docs/security.md): the spec's env: values of AWS_* and OBS_* (a
 * {secret:} or {file:} one resolved), else the account's own
 * ~/.trainctl/storage.conf, which the storage code reads by itself.
 */
static int storage_credentials(struct sup *sp, struct tc_err *err)
{
	const struct spec *s = sp->s;
	struct strvec set = STRVEC_INIT;
	for (size_t i = 0; i < s->nenv; i++)
		if (s->env[i].val && s->env[i].from == ENV_FROM_VALUE)
			env_set(&set, s->env[i].key, s->env[i].val);
	for (size_t i = 0; i < sp->secrets.env.nr; i++)
		strvec_push(&set, sp->secrets.env.v[i]);
	int rc = 0;
	for (size_t i = 0; !rc && i < set.nr; i++) {
		const char *kv = set.v[i], *eq = strchr(kv, '=');
		if (!eq || (strncmp(kv, "AWS_", 4) && strncmp(kv, "OBS_", 4)))
			continue;
		char *key = xstrndup(kv, (size_t)(eq - kv));
		if (setenv(key, eq + 1, 1) < 0)
			rc = tc_error_errno(err, TC_ESYS, "setenv %s", key);
		free(key);
	}
	strvec_clear(&set);
	return rc;
}

/* More than one node is the slurm backend's (backend.h), never one supervisor's. */
static int one_node_only(struct sup *sp, struct tc_err *err)
{
	if (sp->o->node || sp->s->nodes <= 1)
		return 0;
	return tc_error(err, TC_EUSAGE,
			"%d nodes need backend: slurm, started by `trainctl run` (docs/slurm.md)",
			sp->s->nodes);
}

static void sup_release(struct sup *sp)
{
	sup_idle_end(sp); /* its thread asks the endpoints: it goes first */
	sup_endpoints_stop(sp);
	sup_notify_end(sp);
	sup_watch_end(sp); /* its last diagnostics.json names the workers' ranks */
	sup_lease_end(sp);
	sup_health_end(sp);
	sup_watchdog_stop(sp);
	sup_container_end(sp);
	sup_disk_end(sp);
	if (sp->sigfd >= 0) {
		close(sp->sigfd);
		sigprocmask(SIG_SETMASK, &sp->old_mask, NULL);
	}
	for (int i = 0; sp->w && i < sp->n; i++) {
		sbuf_release(&sp->w[i].out.partial);
		sbuf_release(&sp->w[i].err.partial);
	}
	free(sp->w);
	if (sp->suplog_fd >= 0)
		close(sp->suplog_fd);
	sbuf_release(&sp->fail_why);
	secret_vals_release(&sp->secrets);
	sbuf_release(&sp->console);
	sbuf_release(&sp->result);
	if (sp->late) {
		job_row_release(sp->late);
		free(sp->late);
	}
	if (sp->own_sink)
		sink_close(sp->sink);
	free(sp->job_id);
	free(sp->run_dir);
	free(sp->log_dir);
	free(sp->output_dir);
	free(sp->ckpt_dir);
	free(sp->data_dir);
	free(sp->tb_dir);
	free(sp->stop_file);
}

int launch_run(const struct spec *s, const struct launch_opts *o, char **job_id,
	       int *exit_status, struct tc_err *err)
{
	struct sup sp = { 0 };
	int rc;
	sp.s = s;
	sp.o = o;
	sp.suplog_fd = sp.sigfd = sp.watchdog_fd = -1;
	sp.watchdog_pid = -1;
	sp.n = s->per_node;
	*exit_status = 1;
	*job_id = NULL;
	sbuf_init(&sp.console, 0);
	sbuf_init(&sp.result, 0);
	sbuf_init(&sp.fail_why, 0);

	if (o->sink && o->job_id) {
		sp.sink = o->sink; /* a node or a server's job reporting to its hub: no database here */
	} else {
		if ((rc = sink_direct_open(o->home, &sp.sink, err)))
			goto out;
		sp.own_sink = true;
		sink_keep_when_full(sp.sink); /* and waits to write it (diskfull.c) */
	}
	sp.job_id = o->job_id ? xstrdup(o->job_id) : store_new_job_id();
	*job_id = xstrdup(sp.job_id);
	/* a device that fails its health check is not handed to the job (health_hook.c) */
	bool changed = false;
	/* (a node of a multi-node job checks in its attempt, so that its driver hears why) */
	if (!o->node && (rc = sup_health_check(&sp, true, &changed, err))) {
		struct tc_err e2 = TC_ERR_INIT;
		/* the server's job exists: it ends here; a run's is refused before it exists */
		if (o->job_id && !o->node)
			sink_finish(sp.sink, sp.job_id, JOB_FAILED, tc_exit_status(rc), err->msg, err->msg,
				    &e2);
		tc_err_release(&e2);
		goto out;
	}
	/* devices another job holds: refused before anything of this one exists */
	if ((rc = sup_lease_devices(&sp, err)))
		goto out;
	s = sp.s; /* the ids leased */
	if ((rc = make_run_folder(&sp, err)))
		goto out;
	if (!o->node && sp.own_sink)
		sup_disk_reserve(&sp); /* the job's end, should a full disk keep it from the database */
	sp.w = xcalloc((size_t)sp.n, sizeof(*sp.w));
	for (int i = 0; i < sp.n; i++) {
		sp.w[i].local_rank = i;
		sp.w[i].rank = (o->node ? o->node->node_rank * sp.n : 0) + i;
		sp.w[i].out.fd = sp.w[i].err.fd = -1;
		sp.w[i].log = (struct logcap)LOGCAP_CLOSED;
		sp.w[i].reaped = true;
	}
	if ((rc = sup_record_job(&sp, err)))
		goto out;
	sup_say(&sp, "job %s (%s): %d %s worker%s, run folder %s", sp.job_id, s->name, sp.n,
	    s->device_type, sp.n == 1 ? "" : "s", sp.run_dir);
	if ((rc = one_node_only(&sp, err)) || (rc = setup_signals(&sp, err)) ||
	    (rc = sup_watchdog_start(&sp, err)) || (rc = sup_container_begin(&sp, err)) ||
	    (rc = sup_watch_begin(&sp, err)) || (rc = sup_resolve_secrets(&sp, err))) {
		struct tc_err e2 = TC_ERR_INIT;
		if (!o->node && !sup_record_late(&sp, &e2))
			sink_finish(sp.sink, sp.job_id, JOB_FAILED, 3, err->msg, err->msg, &e2);
		tc_err_release(&e2);
		goto out;
	}
	/*
	 * Before any worker: a followed file's lines from before the job are
	 * not the job's (note where they end now), and what a worker writes to
	 * its metrics channel from its first instant is.
	 */
	sup_metrics_start(&sp);
	if (o->run_dir && (rc = storage_credentials(&sp, err)))
		goto out;
	struct jobio_ctx ioc = {
		.s = s, .home = o->home, .job_id = sp.job_id, .run_dir = sp.run_dir,
		.data_dir = sp.data_dir, .output_dir = sp.output_dir, .ckpt_dir = sp.ckpt_dir,
		.world = sp.n, .say = sup_say_cb, .say_arg = &sp, .event = sup_event_cb,
		.sink = sp.sink,
	};
	/* a node of a multi-node job: its driver stages, watches and uploads */
	rc = o->node ? 0 : jobio_begin(&ioc, &sp.io, err);
	if (!rc && !o->node && !sp.own_sink)
		rc = known_checkpoints(&sp, err);
	if (!o->node)
		sup_notify_begin(&sp);
	if (!rc)
		rc = run_attempts(&sp, exit_status, err);
	sup_endpoints_stop(&sp); /* they live as long as the job's attempts */
	jobio_end(sp.io); /* the final upload, whatever the outcome */
	sup_metrics_end(&sp);
	sup_watch_end(&sp); /* the last diagnostics.json, which the report reads */
	if (rc && !o->node) {
		/* record why, so the job does not look alive forever */
		struct tc_err e2 = TC_ERR_INIT;
		if (!sup_record_late(&sp, &e2))
			sink_finish(sp.sink, sp.job_id, JOB_FAILED, tc_exit_status(rc), err->msg,
				    err->msg, &e2);
		tc_err_release(&e2);
		sup_notify(&sp, NOTIFY_FAILED, job_state_name(JOB_FAILED), err->msg,
			   tc_exit_status(rc));
	}
	/* never gone before the end is recorded: a full disk only delays it (diskfull.c) */
	sup_disk_wait_records(&sp);
	/* report.json and the Ais-Bench files: a warning at worst, never the job's result */
	if (!o->node && sp.own_sink) {
		report_job_end(sink_store(sp.sink), sp.job_id, sp.rsamp, sup_say_cb, &sp);
	} else if (!o->node) {
		/* telemetry.json here; report.json is the hub's to build (it has the records) */
		struct tc_err e2 = TC_ERR_INIT;
		if (report_sampler_stop(sp.rsamp, sp.run_dir, &e2))
			sup_say(&sp, "warning: report: %s", e2.msg);
		tc_err_release(&e2);
	} else if (sp.rsamp) {
		struct tc_err e2 = TC_ERR_INIT;
		report_sampler_stop(sp.rsamp, NULL, &e2); /* the driver's report: nothing written */
		tc_err_release(&e2);
	}
	/* the outcome comes last, after the final upload's and checkpoints' lines */
	sup_say_result(&sp);
	/* after the end is recorded and said: a dead webhook delays nothing of the job */
	sup_notify_end(&sp);
out:
	sup_disk_wait_records(&sp); /* an end recorded on the way out (done already above) */
	sup_release(&sp);
	return rc;
}
