/*
 * supervisor.c -- one job on this node (launch.h: launch_run): its record,
 * run folder, watchdog, signals, metrics, attempts and root cause.  The
 * workers of each attempt are workers.c's, a node of a multi-node job runs
 * its one attempt in node.c (supervisor_int.h).  The invariants are listed
 * in launch.h.
 */
#include "launch/supervisor_int.h"
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

/* ---- messages: stderr and logs/supervisor.log ---- */

/* msg to the log file logfd (when >= 0) and, when console, to stderr */
static void say_text(int logfd, bool console, const char *msg)
{
	struct sbuf line = SBUF_INIT;
	sbuf_addf(&line, "trainctl: %s\n", msg);
	/* the console copy is best effort: a closed terminal must not stop the job */
	if (console)
		console_before_stderr();
	if (console && write_all(STDERR_FILENO, line.buf, line.len) < 0)
		errno = 0;
	if (logfd >= 0) {
		sbuf_reset(&line);
		format_time_utc(&line, now_wall());
		sbuf_addf(&line, " %s\n", msg);
		if (write_all(logfd, line.buf, line.len) < 0)
			errno = 0;
	}
	sbuf_release(&line);
}

void launch_vsay(int logfd, const char *fmt, va_list ap)
{
	struct sbuf msg = SBUF_INIT;
	sbuf_vaddf(&msg, fmt, ap);
	say_text(logfd, true, msg.buf);
	sbuf_release(&msg);
}

void launch_say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	launch_vsay(-1, fmt, ap);
	va_end(ap);
}

enum say_to { SAY_LOG, SAY_CONSOLE, SAY_UNLESS_BRIEF };

static void say_fmt(struct sup *sp, enum say_to to, const char *fmt, va_list ap)
{
	struct sbuf msg = SBUF_INIT;
	sbuf_vaddf(&msg, fmt, ap);
	/* run -q: the console gets the warnings (and the result line, sup_result) only */
	bool console = to == SAY_CONSOLE ||
		       (to == SAY_UNLESS_BRIEF && (!sp->o->brief || !strncmp(msg.buf, "warning: ", 9)));
	say_text(sp->suplog_fd, console, msg.buf);
	sbuf_release(&msg);
}

/* fmt's arguments to say_fmt */
#define SAY_VIA(to)                            \
	do {                                   \
		va_list ap_;                   \
		va_start(ap_, fmt);            \
		say_fmt(sp, (to), fmt, ap_);   \
		va_end(ap_);                   \
	} while (0)

void sup_say(struct sup *sp, const char *fmt, ...)
{
	SAY_VIA(SAY_UNLESS_BRIEF);
}

void sup_log(struct sup *sp, const char *fmt, ...)
{
	SAY_VIA(SAY_LOG);
}

void sup_event(struct sup *sp, const char *fmt, ...)
{
	SAY_VIA(SAY_CONSOLE);
}

void sup_result(struct sup *sp, const char *fmt, ...)
{
	va_list ap;
	sbuf_reset(&sp->result);
	va_start(ap, fmt);
	sbuf_vaddf(&sp->result, fmt, ap);
	va_end(ap);
}

/* ---- watchdog: kills every worker group if the supervisor dies ---- */

/*
 * The watchdog's whole life, in its own process: stdin is the pipe from the
 * supervisor, which writes each worker group's pid, or 0 once it has
 * cleaned up the groups itself.  EOF means the supervisor is gone: kill
 * every group still listed.  A guard (proc.h), so only async-signal-safe
 * calls (proc.h: fn).
 */
static int watchdog_main(void *arg)
{
	(void)arg;
	pid_t groups[4096];
	int ng = 0;
	int32_t msg;
	for (;;) {
		ssize_t r = read(STDIN_FILENO, &msg, sizeof(msg));
		if (r < 0 && errno == EINTR)
			continue;
		if (r != (ssize_t)sizeof(msg))
			break;
		if (msg > 0 && ng < 4096)
			groups[ng++] = msg;
		else if (msg == 0)
			ng = 0; /* the supervisor cleaned up these groups itself */
	}
	for (int i = 0; i < ng; i++)
		kill(-groups[i], SIGKILL);
	return 0;
}

static int watchdog_start(struct sup *sp, struct tc_err *err)
{
	struct proc p = PROC_INIT;
	p.fn = watchdog_main;
	int rc = proc_start_guard(&p, &sp->watchdog_fd, err);
	if (!rc)
		sp->watchdog_pid = p.pid;
	proc_clear(&p);
	return rc;
}

void sup_watchdog_tell(struct sup *sp, int32_t msg)
{
	if (sp->watchdog_fd >= 0 && write_all(sp->watchdog_fd, &msg, sizeof(msg)) < 0)
		sup_say(sp, "warning: watchdog unreachable: %s", strerror(errno));
}

static void watchdog_stop(struct sup *sp)
{
	int32_t none = 0; /* the groups are cleaned up */
	if (proc_guard_end(&sp->watchdog_fd, sp->watchdog_pid, &none, sizeof(none)) < 0)
		sup_say(sp, "warning: watchdog unreachable: %s", strerror(errno));
}

/* ---- run folder ---- */

char *sup_join(const char *a, const char *b)
{
	struct sbuf sb = SBUF_INIT;
	sbuf_addf(&sb, "%s/%s", a, b);
	return sbuf_detach(&sb);
}

int sup_write_text(const char *dir, const char *name, const char *text, struct tc_err *err)
{
	char *path = sup_join(dir, name);
	int rc = write_file_atomic(path, text, strlen(text), err);
	free(path);
	return rc;
}

int sup_write_private(const char *dir, const char *name, const char *text, struct tc_err *err)
{
	char *path = sup_join(dir, name);
	int rc = write_file_atomic_mode(path, text, strlen(text), 0600, err);
	free(path);
	return rc;
}

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
	free(sl);
	if (sp->suplog_fd < 0)
		return tc_error_errno(err, TC_ESYS, "cannot open supervisor log");
	return 0;
}

/* jobio's messages (from its thread too: sup_say() writes each line at once) */
static void jobio_say(void *ctx, const char *msg)
{
	sup_say(ctx, "%s", msg);
}

static void jobio_event(void *ctx, const char *msg)
{
	sup_event(ctx, "%s", msg);
}

/* ---- metrics: never a reason to fail the job (metrics/ingest.h) ---- */

static void metrics_warn(void *ctx, const char *msg)
{
	sup_say(ctx, "warning: metrics: %s", msg);
}

static int metrics_write(void *ctx, struct store_mbatch *b, struct tc_err *err)
{
	struct sup *sp = ctx;
	return sink_metrics(sp->sink, b, err);
}

static void metrics_took(void *ctx, int rank, const char *line, const struct metric_rec *recs,
			 size_t n)
{
	struct sup *sp = ctx;
	console_took(sp->con, rank, line, recs, n);
}

static void metrics_start(struct sup *sp)
{
	const char *fmt = sp->s->metrics_format;
	if (sp->mi || sp->o->no_metrics || (fmt && !strcmp(fmt, "none")))
		return;
	struct strvec files = STRVEC_INIT, tbd = STRVEC_INIT;
	for (size_t i = 0; i < sp->s->metrics_files.nr; i++)
		strvec_push_nodup(&files, path_absolute(sp->s->metrics_files.v[i], sp->s->workdir));
	/* the event files the job writes: its TensorBoard folder's and the spec's (ingest.h note 6) */
	strvec_push(&tbd, sp->tb_dir);
	for (size_t i = 0; i < sp->s->metrics_tb_dirs.nr; i++)
		strvec_push_nodup(&tbd, path_absolute(sp->s->metrics_tb_dirs.v[i], sp->s->workdir));
	double since = 0; /* the first worker's start: an event file older than that is not the job's */
	int *ranks = sp->o->node && sp->w ? xcalloc((size_t)sp->n + 1, sizeof(*ranks)) : NULL;
	for (int i = 0; sp->w && i < sp->n; i++) {
		if (sp->w[i].started > 0 && (!since || sp->w[i].started < since))
			since = sp->w[i].started;
		if (ranks)
			ranks[i] = sp->w[i].rank;
	}
	/* a node of a multi-node job or a server's job has no terminal of its own */
	if (!sp->o->node && !sp->o->job_id)
		sp->con = console_new(STDOUT_FILENO, sp->o->raw, sp->o->quiet, sp->s->metrics_accuracy);
	char *channel = env_metrics_channel(sp->log_dir, "{rank}");
	struct metrics_ingest_opts mo = {
		.channel = channel, .first_rank = sp->w[0].rank,
		.job_id = sp->job_id, .format = fmt, .tb_dir = sp->tb_dir,
		.files = (const char *const *)files.v, .nfiles = files.nr, .nranks = sp->n,
		.tb_dirs = (const char *const *)tbd.v, .ntb_dirs = tbd.nr, .since = since,
		.node_ranks = ranks, .nnode_ranks = ranks ? (size_t)sp->n : 0,
		.patterns = sp->s->metrics_patterns, .npatterns = sp->s->metrics_npatterns,
		.warn = metrics_warn, .warn_ctx = sp, .write = metrics_write, .write_ctx = sp,
		.world = sp->o->node ? sp->o->node->nnodes * sp->n : 0,
		.step = sp->watch ? sup_watch_step : NULL, .step_ctx = sp,
		.took = sp->con ? metrics_took : NULL, .took_ctx = sp,
	};
	sp->mi = metrics_ingest_new(&mo);
	strvec_clear(&files);
	strvec_clear(&tbd);
	free(ranks);
	free(channel);
}

static void metrics_end(struct sup *sp)
{
	if (!sp->mi)
		return;
	metrics_ingest_finish(sp->mi);
	console_free(sp->con); /* the last progress stays on the screen */
	sp->con = NULL;
	long long lines, records, malformed;
	metrics_ingest_counts(sp->mi, &lines, &records, &malformed);
	if (lines || malformed)
		sup_say(sp, "metrics: %lld line%s, %lld record%s, %lld malformed line%s (trainctl show %s)",
		    lines, plural_s(lines), records, plural_s(records), malformed, plural_s(malformed),
		    sp->job_id);
	else if (metrics_ingest_hint(sp->mi))
		sup_say(sp, "metrics: %s", metrics_ingest_hint(sp->mi));
	metrics_ingest_free(sp->mi);
	sp->mi = NULL;
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

/* Where the verdicts on this job's attempts go (attempt.h). */
static void say_event(void *ctx, const char *msg)
{
	sup_event(ctx, "%s", msg);
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
				 .attempt = sp->attempt, .say = say_event, .say_ctx = sp,
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
	if (sp->user_signal) {
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

/* The job's record: created here, taken over from the server, or the driver's (a node). */
static int record_job(struct sup *sp, struct tc_err *err)
{
	const struct launch_opts *o = sp->o;
	int rc;
	if (o->node) {
		/* one node of a multi-node job: its driver records the job */
		return o->job_id ? 0 : tc_error(err, TC_EUSAGE, "a node supervisor needs a job id");
	}
	if (o->job_id) {
		/* the server created the job; this supervisor takes it over */
		struct sbuf why = SBUF_INIT;
		sbuf_addf(&why, "supervisor started (pid %ld)", (long)getpid());
		rc = sink_supervisor(sp->sink, sp->job_id, getpid(), proc_start_ticks(getpid()), err);
		if (!rc)
			rc = sink_mark(sp->sink, sp->job_id, JOB_STARTING, why.buf, err);
		sbuf_release(&why);
		return rc;
	}
	/* who ran it on what: ps and the server show them (cpu slots are not held) */
	struct passwd *pw = getpwuid(getuid());
	struct job_row *row = xcalloc(1, sizeof(*row));
	*row = (struct job_row){
		.id = xstrdup(sp->job_id), .name = xstrdup(sp->s->name), .state = JOB_STARTING,
		.run_dir = xstrdup(sp->run_dir), .spec_json = spec_to_json(sp->s),
		.created = now_wall(), .world_size = sp->n, .sup_pid = getpid(),
		.sup_ticks = proc_start_ticks(getpid()),
		.user = pw && pw->pw_name ? xstrdup(pw->pw_name) : NULL,
		.device_type = xstrdup(sp->s->device_type), .device_count = sp->n,
		.devices = sp->leased ? device_ids_text(sp->s->device_ids, sp->n) : NULL,
	};
	sp->late = row;
	/*
	 * Written with the first workers (sup_record_started), unless
	 * something slow comes first: staging inputs or fetching a remote
	 * checkpoint, during which `ps` must show the job starting.
	 */
	const struct spec *s = sp->s;
	bool slow = s->ninputs || (s->resume == RESUME_PATH && s->resume_path &&
				   storage_is_remote(s->resume_path));
	return slow ? sup_record_late(sp, err) : 0;
}

int sup_record_late(struct sup *sp, struct tc_err *err)
{
	if (!sp->late)
		return 0;
	int rc = sink_create(sp->sink, sp->late, err);
	if (!rc) {
		job_row_release(sp->late);
		free(sp->late);
		sp->late = NULL;
	}
	return rc;
}

int sup_record_started(struct sup *sp, const char *why, struct tc_err *err)
{
	struct worker_row *rows = xcalloc((size_t)sp->n, sizeof(*rows));
	size_t n = 0;
	for (int i = 0; i < sp->n; i++)
		if (!sp->w[i].reaped)
			rows[n++] = (struct worker_row){ .attempt = sp->attempt, .rank = sp->w[i].rank,
							 .local_rank = sp->w[i].local_rank,
							 .pid = sp->w[i].pid, .started = sp->w[i].started };
	struct store_start st = { .create = sp->late, .job_id = sp->job_id, .attempt = sp->attempt,
				  .workers = rows, .nworkers = n, .why = why };
	int rc = sink_started(sp->sink, &st, err);
	free(rows);
	if (!rc && sp->late) {
		job_row_release(sp->late);
		free(sp->late);
		sp->late = NULL;
	}
	return rc;
}

/*
 * What only matters once workers run starts after the first ones do, so
 * that it costs their start nothing: the metrics reader, the device
 * sampler and the checkpoint and upload thread.  Once per job.
 */
int sup_workers_up(struct sup *sp, struct tc_err *err)
{
	if (sp->up)
		return 0;
	sp->up = true;
	metrics_start(sp);
	/* device telemetry for report.json (report/report.h); a node's, for its hang report */
	if (!sp->o->node || sp->s->watchdog.on)
		sp->rsamp = report_sampler_start(sp->s->device_type, sp->s->device_ids, sp->n, 0);
	return sp->io ? jobio_start(sp->io, err) : 0;
}

static void sup_release(struct sup *sp)
{
	sup_endpoints_stop(sp);
	sup_notify_end(sp);
	sup_watch_end(sp); /* its last diagnostics.json names the workers' ranks */
	sup_lease_end(sp);
	sup_health_end(sp);
	watchdog_stop(sp);
	sup_container_end(sp);
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
	store_close(sp->st);
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
		if ((rc = store_open(o->home, &sp.st, err)))
			goto out;
		sp.sink = sink_direct(sp.st);
		sp.own_sink = true;
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
	sp.w = xcalloc((size_t)sp.n, sizeof(*sp.w));
	for (int i = 0; i < sp.n; i++) {
		sp.w[i].local_rank = i;
		sp.w[i].rank = (o->node ? o->node->node_rank * sp.n : 0) + i;
		sp.w[i].out.fd = sp.w[i].err.fd = sp.w[i].logfd = sp.w[i].timesfd = -1;
		sp.w[i].reaped = true;
	}
	if ((rc = record_job(&sp, err)))
		goto out;
	sup_say(&sp, "job %s (%s): %d %s worker%s, run folder %s", sp.job_id, s->name, sp.n,
	    s->device_type, sp.n == 1 ? "" : "s", sp.run_dir);
	if ((rc = one_node_only(&sp, err)) || (rc = setup_signals(&sp, err)) ||
	    (rc = watchdog_start(&sp, err)) || (rc = sup_container_begin(&sp, err)) ||
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
	metrics_start(&sp);
	if (o->run_dir && (rc = storage_credentials(&sp, err)))
		goto out;
	struct jobio_ctx ioc = {
		.s = s, .home = o->home, .job_id = sp.job_id, .run_dir = sp.run_dir,
		.data_dir = sp.data_dir, .output_dir = sp.output_dir, .ckpt_dir = sp.ckpt_dir,
		.world = sp.n, .say = jobio_say, .say_arg = &sp, .event = jobio_event,
		.sink = sp.sink,
	};
	/* a node of a multi-node job: its driver stages, watches and uploads */
	rc = o->node ? 0 : jobio_begin(&ioc, &sp.io, err);
	if (!rc && !o->node && !sp.st)
		rc = known_checkpoints(&sp, err);
	if (!o->node)
		sup_notify_begin(&sp);
	if (!rc)
		rc = run_attempts(&sp, exit_status, err);
	sup_endpoints_stop(&sp); /* they live as long as the job's attempts */
	jobio_end(sp.io); /* the final upload, whatever the outcome */
	metrics_end(&sp);
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
	/* report.json and the Ais-Bench files: a warning at worst, never the job's result */
	if (!o->node && sp.st) {
		report_job_end(sp.st, sp.job_id, sp.rsamp, jobio_say, &sp);
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
	if (sp.result.len)
		say_text(sp.suplog_fd, true, sp.result.buf);
	/* after the end is recorded and said: a dead webhook delays nothing of the job */
	sup_notify_end(&sp);
out:
	sup_release(&sp);
	return rc;
}
