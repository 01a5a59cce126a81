/*
 * slurm_batch.c -- what runs inside the Slurm allocation (design notes in
 * slurm.c): `trainctl slurm-batch`, the body of job.sbatch, which drives
 * the job one srun per attempt (launch_multinode), and `trainctl
 * supervise-node`, one node's supervisor under that srun.
 */
#include "backend/backend.h"
#include "backend/slurm_int.h"
#include "backend/slurm_release.h"
#include "backend/slurm_spare.h"
#include "backend/slurm_watch.h"
#include "core/proc.h"
#include "jobs/jobs.h"
#include "core/sbuf.h"
#include "core/strvec.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "hub/hub.h"
#include "jobs/runpath.h"
#include "secret/secret.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

/* ---- the batch script's driver: one srun per attempt ---- */

static volatile sig_atomic_t batch_term, batch_fwd;
static volatile pid_t batch_srun;

static void on_batch_signal(int sig)
{
	if (sig == SIGUSR1 || sig == SIGUSR2) {
		/* B:USR1 warnings: pass them to the node supervisors through srun */
		if (batch_srun > 0)
			kill(batch_srun, sig);
		batch_fwd++;
		return;
	}
	batch_term = sig;
}

struct batch {
	const char *home, *job_id, *run_dir;
	char *exe;
	int nodes;
	const char *slurm_job; /* $SLURM_JOB_ID, or NULL */
	bool slurm_ends;       /* Slurm itself ends or requeues the job: its state tells how */
	struct sink *sink;     /* where the job's records go: the hub's or the database's */
	bool remote;           /* the hub's (TRAINCTL_HUB_URL): no database here */
	bool excluded;         /* the attempt's srun left the excluded nodes out */
	struct slurm_spares *spares; /* the spares' health step (slurm_spare.h) */
};

/* Why the job was asked to stop: the database, or the hub for a driver that reports to one. */
static enum job_stop stop_reason(const struct batch *b)
{
	enum job_stop asked = JOB_STOP_NONE;
	int restarts = 0;
	struct tc_err e2 = TC_ERR_INIT;
	if (b->remote) /* a hub that does not answer: Slurm's state still tells a stop from a failure */
		hub_job_status(b->job_id, 5, &asked, &restarts, &e2);
	else /* a read: the database the direct sink writes */
		store_job_stop_reason(sink_store(b->sink), b->job_id, &asked, &e2);
	tc_err_release(&e2);
	return asked;
}

/*
 * The spec of a job whose driver or node reports to a hub: the run folder's
 * job.yaml where the folder is shared, else the one the batch script's
 * environment carries (TRAINCTL_JOB_SPEC, JSON), written into this host's
 * run folder.
 */
static int remote_spec(const char *run_dir, struct spec **s, struct tc_err *err)
{
	struct sbuf p = SBUF_INIT;
	run_path(&p, run_dir, NULL, RUN_SPEC, 0);
	int rc;
	const char *js = getenv("TRAINCTL_JOB_SPEC");
	if (path_exists(p.buf) || !js || !*js) {
		rc = spec_load(p.buf, s, err);
	} else if (!(rc = spec_from_json(js, s, err)) && !(rc = mkdir_p(run_dir, err))) {
		char *yaml = spec_to_yaml(*s);
		rc = write_file_atomic(p.buf, yaml, strlen(yaml), err);
		free(yaml);
	}
	sbuf_release(&p);
	return rc;
}

static void hub_warn(void *ctx, const char *msg)
{
	(void)ctx;
	launch_say("%s", msg);
}

/* This process's stream name (hub.h note 3): role, Slurm job, requeue count, pid. */
static char *stream_name(const char *role)
{
	struct sbuf sb = SBUF_INIT;
	const char *sj = getenv("SLURM_JOB_ID"), *rq = getenv("SLURM_RESTART_COUNT");
	sbuf_addf(&sb, "%s.%s.%s.%ld", role, sj && *sj ? sj : "0", rq && *rq ? rq : "0",
		  (long)getpid());
	for (char *c = sb.buf; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
		      *c == '-' || *c == '.'))
			*c = '_';
	return sbuf_detach(&sb);
}

/*
 * Is Slurm ending (or requeuing) this incarnation of the job itself?
 * scancel, a time limit and a requeue change the job's state before any
 * signal goes out, so a node stopped by one of them finds the state past
 * RUNNING; a --signal warning leaves it RUNNING.  False when unsure.
 */
static bool slurm_ends_it(const char *id)
{
	struct slurm_jobinfo sj;
	struct tc_err e = TC_ERR_INIT;
	bool ends = false, final = false;
	enum job_state mapped = JOB_RUNNING;
	if (id && slurm_jobinfo_query(id, &sj, &e) == 0 && sj.state) {
		bool known = slurm_state_map(sj.state, &mapped, &final);
		ends = !strncmp(sj.state, "COMPLETING", 10) || (known && (final || mapped == JOB_QUEUED));
	}
	slurm_jobinfo_release(&sj);
	tc_err_release(&e);
	return ends;
}

/* Write a node's report o where the driver's run folder keeps it. */
static void node_report_write(json_t *o, const char *path)
{
	char *dir = path_dirname(path);
	char *text = json_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS);
	struct tc_err e = TC_ERR_INIT;
	if (!text || mkdir_p(dir, &e) || write_file_atomic(path, text, strlen(text), &e))
		launch_say("warning: %s", e.msg ? e.msg : "cannot write a node's report");
	tc_err_release(&e);
	free(text);
	free(dir);
}

/* The parts of the nodes' hang reports (launch.h: LAUNCH_NODE_HANG_TAG) being joined. */
struct hang_parts {
	struct sbuf *text; /* per node */
	long long *next;   /* the part expected next, per node */
	size_t n;
};

/* One part of a node's hang report; the last one writes attempts/<k>/hang-node-<n>.json. */
static void hang_part(struct batch *b, struct hang_parts *hp, json_t *o)
{
	json_t *node = json_object_get(o, "node"), *att = json_object_get(o, "attempt");
	json_t *text = json_object_get(o, "text");
	long long part = json_integer_value(json_object_get(o, "part"));
	long long parts = json_integer_value(json_object_get(o, "parts"));
	if (!json_is_integer(node) || !json_is_integer(att) || !json_is_string(text) || part < 0 ||
	    part >= parts || json_integer_value(node) < 0 || json_integer_value(node) >= 100000)
		return;
	size_t k = (size_t)json_integer_value(node);
	if (k >= hp->n) {
		hp->text = xrealloc(hp->text, (k + 1) * sizeof(*hp->text));
		hp->next = xrealloc(hp->next, (k + 1) * sizeof(*hp->next));
		for (size_t i = hp->n; i <= k; i++) {
			sbuf_init(&hp->text[i], 0);
			hp->next[i] = 0;
		}
		hp->n = k + 1;
	}
	if (part == 0) {
		sbuf_reset(&hp->text[k]);
		hp->next[k] = 0;
	}
	if (part != hp->next[k])
		return; /* a part missing: this report is lost, the rank logs still have the stacks */
	sbuf_add(&hp->text[k], json_string_value(text), json_string_length(text));
	hp->next[k]++;
	if (part + 1 < parts)
		return;
	json_t *whole = json_loadb(hp->text[k].buf, hp->text[k].len, 0, NULL);
	if (json_is_object(whole)) {
		char *path = launch_node_hang_path(b->run_dir, (int)json_integer_value(att), (int)k);
		node_report_write(whole, path);
		free(path);
	}
	json_decref(whole);
	sbuf_reset(&hp->text[k]);
	hp->next[k] = 0;
}

/*
 * srun's output, to its end: the nodes' outcome lines (LAUNCH_NODE_RESULT_TAG)
 * become attempts/<k>/node-<n>.json here, their hang reports (sent as soon as
 * a node has dumped its ranks, LAUNCH_NODE_HANG_TAG) attempts/<k>/hang-node-<n>.json;
 * the rest goes on to our stdout.
 */
static void node_results(struct batch *b, int fd)
{
	static const char tag[] = LAUNCH_NODE_RESULT_TAG, htag[] = LAUNCH_NODE_HANG_TAG;
	struct sbuf in = SBUF_INIT;
	struct hang_parts hp = { 0 };
	char buf[65536];
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		sbuf_add(&in, buf, (size_t)n);
		char *nl;
		while (in.len && (nl = memchr(in.buf, '\n', in.len))) {
			size_t len = (size_t)(nl - in.buf) + 1;
			if (len > sizeof(tag) - 1 && !memcmp(in.buf, tag, sizeof(tag) - 1)) {
				json_t *o = json_loadb(in.buf + sizeof(tag) - 1, len - sizeof(tag), 0, NULL);
				json_t *node = json_object_get(o, "node"), *att = json_object_get(o, "attempt");
				if (json_is_integer(node) && json_is_integer(att)) {
					char *path = launch_node_result_path(b->run_dir, (int)json_integer_value(att),
									     (int)json_integer_value(node));
					node_report_write(o, path);
					free(path);
				}
				json_decref(o);
			} else if (len > sizeof(htag) - 1 && !memcmp(in.buf, htag, sizeof(htag) - 1)) {
				json_t *o = json_loadb(in.buf + sizeof(htag) - 1, len - sizeof(htag), 0, NULL);
				hang_part(b, &hp, o);
				json_decref(o);
			} else if (write_all(STDOUT_FILENO, in.buf, len) < 0) {
				errno = 0; /* the batch output is best effort */
			}
			sbuf_remove_front(&in, len);
		}
	}
	if (in.len && write_all(STDOUT_FILENO, in.buf, in.len) < 0)
		errno = 0;
	sbuf_release(&in);
	for (size_t i = 0; i < hp.n; i++)
		sbuf_release(&hp.text[i]);
	free(hp.text);
	free(hp.next);
}

/* "n1,n3" into its items. */
static void split_hosts(const char *list, struct strvec *out)
{
	for (const char *p = list; p && *p;) {
		const char *c = strchr(p, ',');
		size_t len = c ? (size_t)(c - p) : strlen(p);
		if (len) {
			char *h = xstrndup(p, len);
			strvec_push_nodup(out, h);
		}
		p = c ? c + 1 : NULL;
	}
}

/* The allocation's hosts (SLURM_JOB_NODELIST, expanded by scontrol) in Slurm's order. */
static int alloc_hosts(void *ctx, struct strvec *out)
{
	(void)ctx;
	const char *list = getenv("SLURM_JOB_NODELIST");
	if (!list || !*list)
		return -1;
	const char *argv[] = { "scontrol", "show", "hostnames", list, NULL };
	struct sbuf o = SBUF_INIT, e = SBUF_INIT;
	struct tc_err err = TC_ERR_INIT;
	int status = 0, rc = -1;
	if (!slurm_command(argv, NULL, &o, &e, &status, &err) && slurm_exited_ok(status)) {
		char *save = NULL;
		for (char *h = strtok_r(o.buf, "\n", &save); h; h = strtok_r(NULL, "\n", &save))
			strvec_push(out, h);
		rc = out->nr ? 0 : -1;
	}
	tc_err_release(&err);
	sbuf_release(&o);
	sbuf_release(&e);
	return rc;
}

/*
 * The hosts of an attempt's step, by node rank: a->hosts when the driver
 * chose them, else the allocation's
 * (SLURM_JOB_NODELIST, expanded by scontrol) less the nodes srun was told
 * to exclude, the first a->nodes of them (srun gives task n the n-th
 * node of its step in Slurm's order).  Empty when Slurm does not say.
 */
static void step_hosts(const struct launch_attempt *a, bool excluded, struct strvec *out)
{
	if (a->hosts) {
		split_hosts(a->hosts, out);
		return;
	}
	struct strvec all = STRVEC_INIT;
	alloc_hosts(NULL, &all);
	for (size_t i = 0; i < all.nr && (int)out->nr < a->nodes; i++)
		if (!excluded || !launch_host_listed(a->exclude, all.v[i]))
			strvec_push(out, all.v[i]);
	strvec_clear(&all);
}

/*
 * Node n of attempt a left no outcome: the driver writes its
 * node-<n>.json itself, a failure with LAUNCH_NODE_LOST_KEY set and the host Slurm ran
 * it on, so that the attempt's cause names it (multinode.c); cause: the hub's
 * (slurm_watch.h), or NULL.
 */
static void node_lost_write(struct batch *b, const struct launch_attempt *a, int n,
			    const char *cause)
{
	struct strvec hosts = STRVEC_INIT;
	step_hosts(a, b->excluded, &hosts);
	const char *host = n < (int)hosts.nr ? hosts.v[n] : NULL;
	json_t *o = json_pack("{s:i, s:i, s:s, s:f, s:b, s:s, s:s?}", "node", n, "attempt",
			      a->attempt, "state", job_state_name(JOB_FAILED), "time", now_wall(),
			      LAUNCH_NODE_LOST_KEY, 1, "cause", cause ? cause : LAUNCH_NODE_LOST_CAUSE,
			      "node_name", host);
	char *path = launch_node_result_path(b->run_dir, a->attempt, n);
	node_report_write(o, path);
	free(path);
	json_decref(o);
	strvec_clear(&hosts);
}

static int srun_attempt(void *ctx, const struct launch_attempt *a, bool *failed, bool *stopped,
			struct tc_err *err)
{
	struct batch *b = ctx;
	struct strvec argv = STRVEC_INIT;
	b->excluded = false;
	strvec_push(&argv, "srun");
	strvec_push(&argv, "--kill-on-bad-exit=1");
	strvec_pushf(&argv, "--nodes=%d", a->nodes);
	if (a->hosts) /* the driver's members: srun's task order is Slurm's, the ranks are these */
		strvec_pushf(&argv, "--nodelist=%s", a->hosts);
	strvec_pushf(&argv, "--ntasks=%d", a->nodes);
	strvec_push(&argv, "--ntasks-per-node=1");
	strvec_push(&argv, "--export=ALL");
	strvec_push(&argv, b->exe);
	strvec_push(&argv, "supervise-node");
	strvec_push(&argv, b->job_id);
	strvec_pushf(&argv, "--attempt=%d", a->attempt);
	strvec_pushf(&argv, "--master=%s:%d", a->master_addr, a->master_port);
	if (a->resume_from)
		strvec_pushf(&argv, "--resume=%s", a->resume_from);
	if (a->exclude && !a->hosts) {
		/* nodes whose devices failed their health check, when the allocation has spares */
		long have = 0, left = 0;
		const char *nn = getenv("SLURM_JOB_NUM_NODES");
		if (nn && parse_long(nn, 1, 1000000, &have)) {
			left = have - 1;
			for (const char *c = a->exclude; *c; c++)
				left -= *c == ',';
		}
		b->excluded = left >= a->nodes;
		if (b->excluded) {
			/* srun's options come before the program: insert after "srun" */
			struct strvec front = STRVEC_INIT;
			strvec_push(&front, "srun");
			strvec_pushf(&front, "--exclude=%s", a->exclude);
			for (size_t i = 1; i < argv.nr; i++)
				strvec_push(&front, argv.v[i]);
			strvec_clear(&argv);
			argv = front;
		}
	}
	*failed = *stopped = false;
	struct proc p = PROC_INIT;
	p.args = argv; /* taken over: proc_clear frees it */
	proc_env_inherit(&p.env);
	if (a->hosts) /* each node finds its rank by its name (slurm_node_main) */
		env_set(&p.env, "TRAINCTL_NODE_HOSTS", a->hosts);
	/* ours are handled here (on_batch_signal); srun gets its own defaults */
	p.default_sigs = PROC_SIG(SIGTERM) | PROC_SIG(SIGINT) | PROC_SIG(SIGUSR1) | PROC_SIG(SIGUSR2);
	if (b->remote)
		p.out.how = PROC_IO_PIPE; /* the nodes' outcomes come this way (node_results) */
	slurm_spares_release(b->spares, a->hosts); /* a called spare's CPUs, free for this step */
	int rc = proc_start(&p, err);
	if (rc) {
		proc_clear(&p);
		return rc;
	}
	batch_srun = p.pid;
	slurm_spares_watch(b->spares, a->hosts, a->exclude); /* the spares left, checked while they wait */
	/* the hub's verdict on a node cut off ends the step (slurm_watch.h) */
	struct slurm_watch *w = b->remote ? slurm_watch_start(b->job_id, a->attempt, p.pid,
							      b->slurm_job) : NULL;
	if (b->remote)
		node_results(b, p.out.fd);
	slurm_watch_stop(w); /* before the wait: srun's pid is still ours */
	int status = 0;
	/* a failed wait leaves status 0: the nodes' results below still decide */
	struct tc_err ew = TC_ERR_INIT;
	if (proc_wait(&p, &status, &ew))
		status = 0;
	tc_err_release(&ew);
	proc_clear(&p);
	batch_srun = 0;
	if (batch_term) {
		slurm_watch_free(w);
		*stopped = true;
		return 0;
	}
	/* nodes stopped by a signal and none failed: scancel --signal, --signal=TERM@ */
	int killed = 0, bad = 0, missing = 0;
	bool *lost = xcalloc((size_t)a->nodes, sizeof(bool));
	for (int n = 0; n < a->nodes; n++) {
		char *path = launch_node_result_path(b->run_dir, a->attempt, n);
		json_t *r = json_load_file(path, 0, NULL);
		free(path);
		const char *word = json_string_value(json_object_get(r, "state"));
		enum job_state state;
		if (word && job_state_parse(word, strlen(word), &state)) {
			killed += state == JOB_KILLED;
			bad += state == JOB_FAILED;
		} else {
			lost[n] = true;
			missing++;
		}
		json_decref(r);
	}
	/* `trainctl stop` says so before its scancel: a stop, whatever the nodes saw */
	enum job_stop asked = stop_reason(b);
	/*
	 * A node that left no outcome while another did and no stop was asked
	 * is lost (its supervisor was killed, its host died): a failure to
	 * recover from, although srun then stopped the others with a signal;
	 * so is one the hub found silent (slurm_watch.h: the step was ended for it).
	 * No node at all: srun itself failed, or Slurm ended the step.
	 */
	bool node_lost = ((missing && missing < a->nodes) || slurm_watch_ended(w)) &&
			 asked != JOB_STOP_STOPPED;
	if (node_lost)
		*failed = true;
	else if ((killed && !bad) || asked == JOB_STOP_STOPPED)
		*stopped = true;
	else
		*failed = !slurm_exited_ok(status);
	/*
	 * Ended by Slurm before our own SIGTERM came (design note 2): the end
	 * (or the requeue) is Slurm's to say, not a failure or a stop of ours.
	 * Whoever reads its state records it, so that the outcome does not
	 * depend on which of the two got there first.
	 */
	if ((*stopped || *failed) && asked != JOB_STOP_STOPPED && slurm_ends_it(b->slurm_job)) {
		b->slurm_ends = true;
		*stopped = true;
		*failed = false;
	}
	if (*failed && node_lost)
		for (int n = 0; n < a->nodes; n++)
			if (slurm_watch_lost(w, n, lost[n]))
				node_lost_write(b, a, n, slurm_watch_cause(w, n));
	free(lost);
	slurm_watch_free(w);
	return 0;
}

/*
 * The job's sink, spec and run folder: the hub's when TRAINCTL_HUB_URL
 * names one (no database on this host), else the database's.
 */
static int batch_open(struct batch *b, struct spec **s, struct sbuf *rd, struct tc_err *err)
{
	int rc;
	if (b->remote) {
		char *stream = stream_name("driver");
		run_path(rd, b->home, b->job_id, RUN_DIR, 0);
		rc = sink_from_env(b->home, b->job_id, stream, hub_warn, NULL, &b->sink, err);
		free(stream);
		if (rc)
			return rc;
		b->run_dir = rd->buf;
		return remote_spec(rd->buf, s, err);
	}
	struct job_row j = { 0 };
	if ((rc = sink_direct_open(b->home, &b->sink, err)) ||
	    (rc = store_job_get(sink_store(b->sink), b->job_id, &j, err))) {
		job_row_release(&j);
		sink_close(b->sink); /* no job to record anything of */
		b->sink = NULL;
		return rc;
	}
	sbuf_adds(rd, j.run_dir);
	b->run_dir = rd->buf;
	job_row_release(&j);
	struct sbuf p = SBUF_INIT;
	run_path(&p, rd->buf, NULL, RUN_SPEC, 0);
	rc = spec_load(p.buf, s, err);
	sbuf_release(&p);
	return rc;
}

/* launch_backend_ops.release: the spares' step ends first (slurm_spare.h: slurm_spares_end). */
static int release_node(void *ctx, const char *host, struct tc_err *err)
{
	struct batch *b = ctx;
	slurm_spares_end(b->spares);
	return slurm_release_node(ctx, host, err);
}

int slurm_batch_main(const char *home, const char *job_id, int *exit_status, struct tc_err *err)
{
	struct spec *s = NULL;
	struct sbuf rd = SBUF_INIT;
	struct hub_ship *ship = NULL;
	const char *hub = getenv("TRAINCTL_HUB_URL");
	struct batch b = { home, job_id, NULL, path_self_exe(), 0, getenv("SLURM_JOB_ID"), false,
			   NULL, hub && *hub, false, NULL };
	*exit_status = 1;
	int rc = batch_open(&b, &s, &rd, err);
	if (rc)
		goto fail;
	if (!b.exe) {
		rc = tc_error_errno(err, TC_ESYS, "cannot find the trainctl binary");
		goto fail;
	}
	const char *nodes = getenv("SLURM_JOB_NODELIST");
	if (nodes && (rc = sink_slurm(b.sink, job_id, getenv("SLURM_JOB_ID"), nodes, "RUNNING", err)))
		goto fail;
	struct sigaction sa = { 0 };
	sa.sa_handler = on_batch_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGUSR2, &sa, NULL);
	b.spares = slurm_spares_new(b.exe, home, job_id, s, b.sink, alloc_hosts);
	struct launch_backend_ops ops = { .run_attempt = srun_attempt, .ctx = &b, .where = nodes,
					  .hosts = alloc_hosts, .spare_usable = slurm_spares_usable,
					  .spare_ctx = b.spares, .release = release_node,
					  .usable = slurm_node_usable };
	if (b.remote) {
		/* the restarts spent before a requeue: the hub counts them (none when it is away) */
		enum job_stop asked = JOB_STOP_NONE;
		int restarts = 0;
		struct tc_err e2 = TC_ERR_INIT;
		hub_job_status(job_id, 5, &asked, &restarts, &e2);
		tc_err_release(&e2);
		/* the driver's log and Slurm's output, into the hub's run folder when this one is ours */
		ship = hub_ship_start(b.sink, job_id, rd.buf, 2000);
		struct sbuf so = SBUF_INIT, src = SBUF_INIT;
		run_rel(&so, RUN_SUPERVISOR_LOG, 0);
		if (!hub_run_dir_shared(rd.buf))
			hub_ship_add(ship, so.buf);
		sbuf_reset(&so);
		const char *sj = b.slurm_job ? b.slurm_job : "0";
		run_rel(&so, RUN_LOGS, 0);
		sbuf_addf(&so, "/slurm-%s.out", sj);
		sbuf_addf(&src, "%s/trainctl-%s-%s.out", SLURM_HUB_OUTPUT_DIR, job_id, sj);
		hub_ship_add_from(ship, so.buf, src.buf);
		sbuf_release(&so);
		sbuf_release(&src);
		rc = launch_multinode_remote(s, home, job_id, b.sink, restarts, &ops, exit_status, err);
		hub_ship_stop(ship);
	} else {
		/* launch_multinode keeps its own connection */
		rc = launch_multinode(s, home, job_id, &ops, exit_status, err);
	}
	slurm_spares_free(b.spares); /* the job is done: no spare waits any more */
	b.spares = NULL;
	if (rc || *exit_status != 143 || batch_term || b.slurm_ends)
		goto out;
	/*
	 * Stopped with the batch step untouched: `trainctl stop` or a
	 * --signal=TERM warning; Slurm would call it COMPLETED, so say killed.
	 */
	const char *why = stop_reason(&b) == JOB_STOP_STOPPED
				  ? "stopped by trainctl stop (every node's workers got SIGTERM)"
				  : "the workers were stopped by a signal from Slurm";
	rc = sink_finish(b.sink, job_id, JOB_KILLED, 1, why, why, err);
	*exit_status = 0;
	goto out;
fail:
	if (b.sink) {
		struct tc_err e2 = TC_ERR_INIT;
		sink_finish(b.sink, job_id, JOB_FAILED, tc_exit_status(rc), err->msg, err->msg, &e2);
		tc_err_release(&e2);
	}
out:
	sink_close(b.sink); /* a remote one waits for the hub to take everything (hub.h note 5) */
	spec_free(s);
	free(b.exe);
	sbuf_release(&rd);
	return rc;
}

/* ---- one node: `trainctl supervise-node` under srun ---- */

static int env_int(const char *name, int *out, struct tc_err *err)
{
	const char *v = getenv(name);
	long n;
	if (!v || !parse_long(v, 0, 1 << 20, &n))
		return tc_error(err, TC_EUSAGE, "supervise-node: $%s is %s (run it under srun)", name,
				v ? "not a number" : "not set");
	*out = (int)n;
	return 0;
}

/*
 * This node's rank and the attempt's node count: its place in the
 * driver's TRAINCTL_NODE_HOSTS (by SLURMD_NODENAME: a spare in a lost
 * node's place takes its rank, the others keep theirs), else srun's
 * SLURM_NODEID of SLURM_NNODES.
 */
static int node_rank_of(struct launch_node *nd, struct tc_err *err)
{
	const char *hosts = getenv("TRAINCTL_NODE_HOSTS"), *me = getenv("SLURMD_NODENAME");
	if (!hosts || !*hosts) {
		int rc = env_int("SLURM_NODEID", &nd->node_rank, err);
		return rc ? rc : env_int("SLURM_NNODES", &nd->nnodes, err);
	}
	struct strvec v = STRVEC_INIT;
	split_hosts(hosts, &v);
	nd->nnodes = (int)v.nr;
	nd->node_rank = -1;
	for (size_t i = 0; me && i < v.nr; i++)
		if (!strcmp(v.v[i], me))
			nd->node_rank = (int)i;
	strvec_clear(&v);
	if (nd->node_rank < 0)
		return tc_error(err, TC_EUSAGE, "supervise-node: this node (%s) is not one of "
				"$TRAINCTL_NODE_HOSTS (%s)", me ? me : "$SLURMD_NODENAME not set", hosts);
	return 0;
}

int slurm_node_main(const struct slurm_node_args *a, int *exit_status, struct tc_err *err)
{
	struct launch_node nd = { 0 };
	struct sink *sink = NULL;
	struct store *st = NULL;
	struct job_row j = { 0 };
	struct spec *s = NULL;
	struct sbuf p = SBUF_INIT;
	char *addr = NULL, *id = NULL;
	*exit_status = 1;
	int rc = node_rank_of(&nd, err);
	const char *colon = a->master ? strrchr(a->master, ':') : NULL;
	long port = 0;
	if (!rc && (!colon || colon == a->master || !parse_long(colon + 1, 1, 65535, &port)))
		rc = tc_error(err, TC_EUSAGE, "supervise-node: --master takes ADDR:PORT");
	if (rc)
		goto out;
	addr = xstrndup(a->master, (size_t)(colon - a->master));
	nd.master_addr = addr;
	nd.master_port = (int)port;
	nd.attempt = a->attempt;
	nd.resume_from = a->resume_from;
	const char *hub = getenv("TRAINCTL_HUB_URL");
	if (hub && *hub) {
		/* reports to the hub: no database here; the spec is the run folder's or the env's */
		run_path(&p, a->home, a->job_id, RUN_DIR, 0);
		struct sbuf role = SBUF_INIT;
		sbuf_addf(&role, "node%d.a%d", nd.node_rank, nd.attempt);
		char *stream = stream_name(role.buf);
		sbuf_release(&role);
		rc = sink_from_env(a->home, a->job_id, stream, hub_warn, NULL, &sink, err);
		free(stream);
		if (rc || (rc = remote_spec(p.buf, &s, err)))
			goto out;
	} else {
		if ((rc = store_open(a->home, &st, err)) ||
		    (rc = store_job_get(st, a->job_id, &j, err)))
			goto out;
		store_close(st);
		st = NULL;
		run_path(&p, j.run_dir, NULL, RUN_SPEC, 0);
		if ((rc = spec_load(p.buf, &s, err)))
			goto out;
	}
	if (nd.nnodes > s->nodes || nd.nnodes < s->nodes_min) {
		if (s->nodes_min < s->nodes)
			rc = tc_error(err, TC_EUSAGE, "supervise-node: the job wants %d to %d nodes, "
				      "srun gave %d", s->nodes_min, s->nodes, nd.nnodes);
		else
			rc = tc_error(err, TC_EUSAGE, "supervise-node: the job wants %d nodes, srun gave %d",
				      s->nodes, nd.nnodes);
		goto out;
	}
	/* fewer nodes than nodes.max: parallel: auto planned for this attempt's count (spec.h) */
	if (s->parallel.on && nd.nnodes != s->nodes && (rc = spec_replan(s, nd.nnodes, err)))
		goto out;
	/* a server's job: its secrets came with sbatch's environment (slurm.c), never a store here */
	struct strvec secrets = STRVEC_INIT;
	bool handed = secret_take_env(&secrets);
	struct launch_opts lo = { .home = a->home, .quiet = true, .job_id = a->job_id, .node = &nd,
				  .sink = sink, .secrets = handed ? &secrets : NULL };
	rc = launch_run(s, &lo, &id, exit_status, err);
	strvec_clear(&secrets);
out:
	sink_close(sink); /* waits for the hub to take everything (hub.h note 5) */
	free(id);
	free(addr);
	spec_free(s);
	sbuf_release(&p);
	job_row_release(&j);
	store_close(st);
	return rc;
}
