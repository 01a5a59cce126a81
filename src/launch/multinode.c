/*
 * multinode.c -- the job-level driver of a multi-node job (launch.h:
 * launch_multinode).  It runs where the backend runs the job's single
 * controlling process (Slurm: the batch script, on the first node) and
 * owns what must happen once per job, never once per node:
 *
 *   - staging inputs, watching checkpoints, uploading outputs (jobio);
 *   - agreeing on MASTER_ADDR:MASTER_PORT for each attempt (this host, a
 *     free port), written to attempts/<k>/master in the run folder;
 *   - the restart budget: an attempt fails when any node fails; the next
 *     attempt starts every node again, resuming from the newest complete
 *     checkpoint, until spec.max_restarts restarts are spent;
 *   - the job's states and root cause (the first node to report a failure,
 *     from attempts/<k>/node-<n>.json).
 *
 * Attempt numbers continue across a requeue (the backend starting the
 * driver again after preemption): the driver counts attempts/ folders, and
 * a requeued start resumes from the newest checkpoint without spending the
 * failure budget.
 */
#include "launch/launch.h"
#include "launch/attempt.h"
#include "launch/elastic_int.h"
#include "launch/jobio_int.h"
#include "launch/notify_int.h"
#include "launch/rounds.h"
#include "core/sbuf.h"
#include "core/strvec.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "jobs/jobs.h"
#include "diag/diag.h"
#include "hub/hub.h"
#include "hub/rdzv.h"
#include "hub/sink.h"
#include "jobs/runpath.h"
#include "report/report.h"
#include "store/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The driver's state, for the job's life (launch_multinode's stack). */
struct mn {
	const struct spec *s;
	const char *home, *job_id;
	const struct launch_backend_ops *ops;
	struct sink *sink; /* where the job's records go (hub/sink.h) */
	bool remote;       /* sink is the hub's (borrowed): no database here */
	struct job_row job;
	struct jobio *io;
	char *run_dir, *log_dir, *output_dir, *data_dir, *ckpt_dir;
	int logfd;
	int world;     /* ranks on all nodes */
	int attempt;   /* continues across a requeue */
	int restarts;  /* spent of spec.max_restarts */
	bool requeued; /* this start continues a requeued job (first attempt only) */
	char *resume;  /* TRAINCTL_RESUME_FROM of the next attempt, or NULL */
	struct sbuf result; /* the job's outcome, said after the final upload's lines */
	struct launch_notify *ln; /* the job's webhooks (notify_int.h), or NULL */
	struct sbuf exclude;      /* nodes left out of the next attempts (health, on_log): "n1,n3" */
	/* membership (members_*): the hosts by node rank, the allocation's others */
	struct strvec members, spares;
	int nodes;                /* nodes of this attempt: members.nr, else spec.nodes */
	struct sbuf change;       /* this attempt's change of members, for its running event */
	struct elastic el;        /* fewer nodes: release, wait, plan (elastic_int.h) */
	struct launch_rounds rounds; /* each attempt's round note (rounds.h) */
	/* the job's diagnostics.json (docs/diagnostics.md), from the nodes' reports */
	json_t *hangs, *matches;
	size_t diag_len; /* bytes of the last one written: a rewrite is padded to at least that */
};

static void say(struct mn *m, const char *fmt, ...) TC_PRINTF(2, 3);

static void say(struct mn *m, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	launch_vsay(m->logfd, fmt, ap);
	va_end(ap);
}

static void io_say(void *ctx, const char *msg)
{
	say(ctx, "%s", msg);
}

/* Attempts already made (a requeued job continues the numbering). */
static int attempts_made(const char *run_dir)
{
	struct sbuf p = SBUF_INIT;
	sbuf_addf(&p, "%s/attempts", run_dir);
	DIR *d = opendir(p.buf);
	sbuf_release(&p);
	int n = 0;
	if (!d)
		return 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		long v;
		if (parse_long(e->d_name, 0, 1 << 20, &v) && (int)v + 1 > n)
			n = (int)v + 1;
	}
	closedir(d);
	return n;
}

/* A node's name as the scheduler knows it (SLURMD_NODENAME), else its host name; NULL: none. */
static const char *node_name(json_t *o)
{
	const char *name = json_string_value(json_object_get(o, "node_name"));
	if (!name)
		name = json_string_value(json_object_get(o, "hostname"));
	return name && *name && !strchr(name, ',') ? name : NULL;
}

bool launch_host_listed(const char *list, const char *name)
{
	size_t len = strlen(name);
	for (const char *p = list; p && *name && (p = strstr(p, name)); p++)
		if ((p == list || p[-1] == ',') && (p[len] == ',' || !p[len]))
			return true;
	return false;
}

/* Leave node name out of the next attempts (launch.h: launch_attempt.exclude); false: already. */
static bool exclude_node(struct mn *m, const char *name)
{
	if (launch_host_listed(m->exclude.buf, name))
		return false;
	sbuf_addf(&m->exclude, "%s%s", m->exclude.len ? "," : "", name);
	return true;
}

/*
 * A node's on_log match (node-<n>.json "on_log"): the job's webhooks hear
 * it here (a node has none), the matches go into the job's diagnostics, and
 * exclude_node leaves the node out of the next attempts, an event of its own.
 */
static void node_log_match(struct mn *m, int n, json_t *o, const char *action)
{
	json_t *lm = json_object_get(json_object_get(o, "diagnostics"), "log_matches"), *x;
	size_t i;
	json_array_foreach(lm, i, x) {
		if (json_integer_value(json_object_get(x, "attempt")) != m->attempt)
			continue;
		json_t *c = json_deep_copy(x);
		json_object_set_new(c, "node", json_integer(n));
		json_array_append_new(m->matches, c);
	}
	const char *cause = json_string_value(json_object_get(o, "cause"));
	struct sbuf r = SBUF_INIT;
	sbuf_addf(&r, "%s: node %d: %s", job_note_name(JOB_NOTE_LOG_MATCH), n, cause ? cause : action);
	launch_notify(m->ln, NOTIFY_LOG_MATCH, job_state_name(JOB_RUNNING), r.buf, m->attempt, -1);
	sbuf_release(&r);
	const char *name = node_name(o);
	if (strcmp(action, "exclude_node") != 0 || !name || !exclude_node(m, name))
		return;
	struct sbuf t = SBUF_INIT;
	sbuf_addf(&t, "node %d (%s): on_log action exclude_node: the next attempts leave it out when "
		      "the allocation has a node to spare", n, name);
	struct tc_err e = TC_ERR_INIT;
	if (sink_note(m->sink, m->job_id, JOB_NOTE_NODE_EXCLUDED, t.buf, &e))
		say(m, "warning: %s", e.msg);
	tc_err_release(&e);
	say(m, "%s", t.buf);
	sbuf_release(&t);
}

/*
 * The attempt's root cause: a failure the watchdog or on_log named (an
 * on_log match, a failure before the first step; *final when the job must
 * not restart), else the earliest failure any node reported, with its error
 * file and log tail in detail.  Nodes that were only stopped because
 * another failed are not blamed.
 */
static void attempt_cause(struct mn *m, int attempt, int nodes, struct sbuf *cause,
			  struct sbuf *detail, bool *final)
{
	double best = 0;
	int best_prio = -1;
	*final = false;
	for (int n = 0; n < nodes; n++) {
		char *path = launch_node_result_path(m->run_dir, attempt, n);
		json_t *o = json_load_file(path, 0, NULL);
		free(path);
		const char *word = json_string_value(json_object_get(o, "state"));
		enum job_state state;
		bool failed = word && job_state_parse(word, strlen(word), &state) && state == JOB_FAILED;
		double t = json_number_value(json_object_get(o, "time"));
		const char *sick = node_name(o);
		if (json_is_true(json_object_get(o, "unhealthy")) && sick && exclude_node(m, sick))
			/* left out of the next attempts when the allocation allows (launch.h) */
			say(m, "node %d (%s): its devices failed their health check; the next "
			    "attempts leave it out when the allocation has a node to spare", n, sick);
		const char *action = json_string_value(json_object_get(o, "on_log"));
		if (failed && action)
			node_log_match(m, n, o, action);
		bool fin = failed && ((action && !strcmp(action, "fail")) ||
				      json_is_true(json_object_get(o, "final")));
		*final = *final || fin;
		/* a lost node is the cause: the others' failures may be its echo (a peer gone) */
		bool lost = failed && json_is_true(json_object_get(o, LAUNCH_NODE_LOST_KEY));
		int prio = lost ? 2 : failed && (action || fin) ? 1 : 0;
		if (failed && (prio > best_prio || (prio == best_prio && t < best))) {
			best = t;
			best_prio = prio;
			sbuf_reset(cause);
			sbuf_reset(detail);
			const char *host = json_string_value(json_object_get(o, "hostname"));
			const char *c = json_string_value(json_object_get(o, "cause"));
			const char *d = json_string_value(json_object_get(o, "detail"));
			if (lost)
				host = node_name(o);
			sbuf_addf(cause, "node %d%s%s%s%s %s", n, host ? " (" : "", host ? host : "",
				  host ? ")" : "", lost ? " lost:" : ":", c ? c : job_state_name(JOB_FAILED));
			if (d)
				sbuf_adds(detail, d);
		}
		json_decref(o);
	}
	if (!cause->len)
		sbuf_addf(cause, "a node ended without reporting its workers' outcome"
				 " (see logs/supervisor-node*.log in %s)", m->run_dir);
}

/*
 * The nodes of the attempt that were lost (node-<n>.json LAUNCH_NODE_LOST_KEY, written
 * by the backend: launch.h LAUNCH_NODE_LOST_CAUSE), as "node 1 (n2)" in
 * *who; their count.
 */
static int attempt_lost(struct mn *m, int attempt, struct sbuf *who)
{
	int lost = 0;
	for (int n = 0; n < m->nodes; n++) {
		char *path = launch_node_result_path(m->run_dir, attempt, n);
		json_t *o = json_load_file(path, 0, NULL);
		free(path);
		if (json_is_true(json_object_get(o, LAUNCH_NODE_LOST_KEY))) {
			const char *name = node_name(o);
			/* policy replace: a spare takes its rank in the next attempts (members_update) */
			if (name && m->s->node_policy == NODE_POLICY_REPLACE)
				exclude_node(m, name);
			sbuf_addf(who, "%snode %d%s%s%s", lost ? ", " : "", n, name ? " (" : "",
				  name ? name : "", name ? ")" : "");
			lost++;
		}
		json_decref(o);
	}
	return lost;
}

/*
 * A restart a lost node caused: its node_lost note (jobs/state.h), which
 * is how the job's restarts are told apart by cause (show, the report).
 */
static void note_node_lost(struct mn *m, const char *who, int restarts)
{
	/* the first lost node's cause: the backend's (the hub's verdict on a silent node) */
	struct sbuf why = SBUF_INIT;
	for (int n = 0; n < m->nodes && !why.len; n++) {
		char *path = launch_node_result_path(m->run_dir, m->attempt, n);
		json_t *o = json_load_file(path, 0, NULL);
		free(path);
		const char *c = json_string_value(json_object_get(o, "cause"));
		if (json_is_true(json_object_get(o, LAUNCH_NODE_LOST_KEY)) && c && *c)
			sbuf_adds(&why, c);
		json_decref(o);
	}
	struct sbuf t = SBUF_INIT;
	sbuf_addf(&t, "%s lost in attempt %d: %s; restart %d of %d", who, m->attempt,
		  why.len ? why.buf : LAUNCH_NODE_LOST_CAUSE, restarts, m->s->max_restarts);
	sbuf_release(&why);
	struct tc_err e = TC_ERR_INIT;
	if (sink_note(m->sink, m->job_id, JOB_NOTE_NODE_LOST, t.buf, &e))
		say(m, "warning: %s", e.msg);
	tc_err_release(&e);
	sbuf_release(&t);
}

/*
 * The nodes' hang reports of the attempt (attempts/<k>/hang-node-<n>.json,
 * watch.c): every rank's stack compared across the nodes names the job's
 * likely culprit, with its node; recorded as the job's hang event, and the
 * attempt's cause ("hang detected: ...").  False: no node found a hang.
 */
static bool attempt_hang(struct mn *m, int attempt, struct sbuf *cause)
{
	int nodes = m->nodes, world = m->world;
	json_t **rep = xcalloc((size_t)nodes, sizeof(json_t *));
	struct sbuf *text = xcalloc((size_t)world, sizeof(struct sbuf));
	int *node_of = xcalloc((size_t)world, sizeof(int));
	int first = -1;
	double util = NAN;
	const char *usrc = NULL;
	struct sbuf missing = SBUF_INIT;
	for (int r = 0; r < world; r++) {
		sbuf_init(&text[r], 0);
		node_of[r] = r / (m->s->per_node > 0 ? m->s->per_node : 1);
	}
	for (int n = 0; n < nodes; n++) {
		char *path = launch_node_hang_path(m->run_dir, attempt, n);
		json_t *o = json_load_file(path, 0, NULL);
		free(path);
		if (!json_is_object(o)) {
			json_decref(o);
			sbuf_addf(&missing, "%s%d", missing.len ? ", " : "", n);
			continue;
		}
		rep[n] = o;
		double t = json_number_value(json_object_get(o, "time"));
		if (first < 0 || t < json_number_value(json_object_get(rep[first], "time")))
			first = n;
		json_t *u = json_object_get(o, "device_utilization");
		if (json_is_number(u) && (!isfinite(util) || json_number_value(u) > util)) {
			util = json_number_value(u);
			usrc = json_string_value(json_object_get(o, "utilization_source"));
		}
		json_t *st;
		size_t i;
		json_array_foreach(json_object_get(o, "stacks"), i, st) {
			json_int_t r = json_integer_value(json_object_get(st, "rank"));
			const char *txt = json_string_value(json_object_get(st, "stack"));
			if (r < 0 || r >= world)
				continue;
			node_of[r] = n;
			if (txt)
				sbuf_adds(&text[r], txt);
		}
	}
	if (first >= 0) {
		struct diag_stack *stacks = xcalloc((size_t)world, sizeof(struct diag_stack));
		const struct diag_stack **sv = xcalloc((size_t)world, sizeof(*sv));
		for (int r = 0; r < world; r++)
			if (text[r].len) {
				diag_stack_parse(text[r].buf, text[r].len, &stacks[r]);
				sv[r] = &stacks[r];
			}
		struct sbuf why = SBUF_INIT, msg = SBUF_INIT;
		int culprit = diag_culprit(sv, world, &why);
		const char *base = json_string_value(json_object_get(rep[first], "message"));
		sbuf_addf(&msg, "%s", base ? base : "no progress");
		if (nodes > 1)
			sbuf_addf(&msg, ", seen first on node %d", first);
		const char *cname = NULL;
		if (culprit >= 0) {
			int cn = node_of[culprit];
			cname = rep[cn] ? node_name(rep[cn]) : NULL;
			sbuf_addf(&msg, "; likely culprit rank %d on node %d%s%s%s (%s)", culprit, cn,
				  cname ? " (" : "", cname ? cname : "", cname ? ")" : "", why.buf);
		} else {
			sbuf_addf(&msg, "; %s", why.buf);
		}
		if (missing.len)
			sbuf_addf(&msg, "; no stacks from node %s (its ranks ended before it found the "
					"hang)", missing.buf);
		if (isfinite(util))
			sbuf_addf(&msg, "; device utilisation %.0f%% (%s)", util, usrc ? usrc : "telemetry");
		struct tc_err e = TC_ERR_INIT;
		if (sink_note(m->sink, m->job_id, JOB_NOTE_HANG, msg.buf, &e))
			say(m, "warning: %s", e.msg);
		tc_err_release(&e);
		struct sbuf r = SBUF_INIT;
		sbuf_addf(&r, "%s: %s", job_note_name(JOB_NOTE_HANG), msg.buf);
		launch_notify(m->ln, NOTIFY_HANG, job_state_name(JOB_RUNNING), r.buf, attempt, -1);
		sbuf_release(&r);
		json_t *jst = json_array();
		for (int rk = 0; rk < world; rk++)
			json_array_append_new(jst, json_pack("{s:i, s:i, s:s?}", "rank", rk, "node",
							     node_of[rk], "stack",
							     text[rk].len ? text[rk].buf : NULL));
		json_t *h0 = rep[first];
		json_array_append_new(
			m->hangs,
			json_pack("{s:i, s:O, s:O, s:O, s:o, s:o, s:s?, s:s, s:o, s:s?, s:o}", "attempt",
				  attempt, "time", json_object_get(h0, "time"), "silent_seconds",
				  json_object_get(h0, "silent_seconds"), "timeout",
				  json_object_get(h0, "timeout"), "culprit",
				  culprit >= 0 ? json_integer(culprit) : json_null(), "culprit_node",
				  culprit >= 0 ? json_integer(node_of[culprit]) : json_null(),
				  "culprit_node_name", cname, "why", why.buf, "device_utilization",
				  isfinite(util) ? json_real(util) : json_null(), "utilization_source", usrc,
				  "stacks", jst));
		sbuf_addf(cause, "hang detected: %s", msg.buf);
		sbuf_release(&why);
		sbuf_release(&msg);
		for (int rk = 0; rk < world; rk++)
			diag_stack_release(&stacks[rk]);
		free(stacks);
		free(sv);
	}
	for (int n = 0; n < nodes; n++)
		json_decref(rep[n]);
	for (int r = 0; r < world; r++)
		sbuf_release(&text[r]);
	free(rep);
	free(text);
	free(node_of);
	sbuf_release(&missing);
	return first >= 0;
}

/*
 * The job's diagnostics.json, after each attempt of a watched job: every
 * node's step times and stragglers (node-<n>.json "diagnostics"), the job's
 * hangs and on_log matches.  The hub's copy of a run folder that is not
 * shared is written at offsets (hub.h), so a rewrite is sent whole and
 * padded with blanks to the length of the one before.
 */
static void mn_diagnostics(struct mn *m, int attempt)
{
	const struct spec *s = m->s;
	if (!s->watchdog.on && !s->non_log)
		return;
	json_t *o = json_object(), *ranks = json_array(), *sg = json_array(), *per = json_array();
	double med = NAN, to = NAN;
	long long steps = 0;
	for (int n = 0; n < m->nodes; n++) {
		char *path = launch_node_result_path(m->run_dir, attempt, n);
		json_t *r = json_load_file(path, 0, NULL);
		free(path);
		json_t *d = json_object_get(r, "diagnostics"), *x;
		size_t i;
		if (json_is_object(d)) {
			json_array_extend(ranks, json_object_get(d, "ranks"));
			json_array_foreach(json_object_get(d, "stragglers"), i, x) {
				json_t *c = json_deep_copy(x);
				json_object_set_new(c, "node", json_integer(n));
				json_array_append_new(sg, c);
			}
			steps += json_integer_value(json_object_get(d, "steps"));
			double dm = json_number_value(json_object_get(d, "median_step_time"));
			double dt = json_number_value(json_object_get(d, "hang_timeout"));
			if (json_is_number(json_object_get(d, "median_step_time")) && !(dm <= med))
				med = dm;
			if (json_is_number(json_object_get(d, "hang_timeout")) && !(dt <= to))
				to = dt;
			json_array_append_new(per, json_pack("{s:i, s:s?, s:O, s:O}", "node", n,
							     "node_name", node_name(r),
							     "median_step_time",
							     json_object_get(d, "median_step_time"),
							     "hang_timeout", json_object_get(d, "hang_timeout")));
		}
		json_decref(r);
	}
	json_object_set_new(o, "attempt", json_integer(attempt));
	json_object_set_new(o, "steps", json_integer(steps));
	json_object_set_new(o, "median_step_time", isfinite(med) ? json_real(med) : json_null());
	if (s->watchdog.on)
		json_object_set_new(o, "hang_timeout", isfinite(to) ? json_real(to) : json_null());
	json_object_set_new(o, "straggler_percent", json_real(s->watchdog.straggler_percent));
	json_object_set_new(o, "straggler_steps", json_integer(s->watchdog.straggler_steps));
	json_object_set_new(o, "ranks", ranks);
	json_object_set_new(o, "stragglers", sg);
	json_object_set_new(o, "nodes", per);
	json_object_set_new(o, "hangs", json_incref(m->hangs));
	json_object_set_new(o, "log_matches", json_incref(m->matches));
	char *text = json_dumps(o, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (!text)
		return;
	struct sbuf t = SBUF_INIT;
	sbuf_adds(&t, text);
	free(text);
	while (t.len < m->diag_len)
		sbuf_addch(&t, t.len + 1 == m->diag_len ? '\n' : ' ');
	m->diag_len = t.len;
	struct sbuf path = SBUF_INIT, leaf = SBUF_INIT;
	run_path(&path, m->run_dir, NULL, RUN_DIAGNOSTICS, 0);
	run_leaf(&leaf, RUN_DIAGNOSTICS, 0);
	struct tc_err e = TC_ERR_INIT;
	if (write_file_atomic(path.buf, t.buf, t.len, &e) ||
	    (m->remote && !hub_run_dir_shared(m->run_dir) &&
	     sink_file(m->sink, m->job_id, leaf.buf, 0, t.buf, t.len, &e)))
		say(m, "warning: %s", e.msg);
	tc_err_release(&e);
	sbuf_release(&leaf);
	sbuf_release(&path);
	sbuf_release(&t);
}

/* The job's record, run folder and supervisor log. */
static int mn_open(struct mn *m, struct tc_err *err)
{
	struct sbuf path = SBUF_INIT;
	int rc;
	if (m->remote) {
		/* the node's own state folder: the run folder need not be shared */
		run_path(&path, m->home, m->job_id, RUN_DIR, 0);
		m->run_dir = sbuf_detach(&path);
	} else {
		/* the job's row (the restarts spent) from the database its sink writes */
		if ((rc = sink_direct_open(m->home, &m->sink, err)) ||
		    (rc = store_job_get(sink_store(m->sink), m->job_id, &m->job, err)))
			return rc;
		m->run_dir = xstrdup(m->job.run_dir);
	}
	run_path(&path, m->run_dir, NULL, RUN_LOGS, 0);
	m->log_dir = sbuf_detach(&path);
	run_path(&path, m->run_dir, NULL, RUN_OUTPUT, 0);
	m->output_dir = sbuf_detach(&path);
	run_path(&path, m->run_dir, NULL, RUN_DATA, 0);
	m->data_dir = sbuf_detach(&path);
	if (m->s->ckpt_dir[0] == '/')
		sbuf_adds(&path, m->s->ckpt_dir);
	else
		sbuf_addf(&path, "%s/%s", m->output_dir, m->s->ckpt_dir);
	m->ckpt_dir = sbuf_detach(&path);
	const char *dirs[] = { m->log_dir, m->output_dir, m->data_dir, m->ckpt_dir };
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if ((rc = mkdir_p(dirs[i], err)))
			return rc;
	run_path(&path, m->run_dir, NULL, RUN_SUPERVISOR_LOG, 0);
	m->logfd = open_regular_nofollow(path.buf, O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (m->logfd < 0)
		rc = tc_error_errno(err, TC_ESYS, "cannot open %s", path.buf);
	else
		rc = 0;
	sbuf_release(&path);
	return rc;
}

/* Stage the inputs, start watching checkpoints, and find where attempts resume. */
static int mn_begin(struct mn *m, struct tc_err *err)
{
	m->world = m->nodes * m->s->per_node;
	struct jobio_ctx ioc = {
		.s = m->s, .home = m->home, .job_id = m->job_id, .run_dir = m->run_dir,
		.data_dir = m->data_dir, .output_dir = m->output_dir, .ckpt_dir = m->ckpt_dir,
		.world = m->world, .say = io_say, .say_arg = m,
		.sink = m->sink, .node_disks = m->remote && !hub_run_dir_shared(m->run_dir),
	};
	int rc = jobio_begin(&ioc, &m->io, err);
	if (!rc)
		rc = jobio_start(m->io, err);
	if (rc)
		return rc;
	m->attempt = attempts_made(m->run_dir);
	if (!m->remote)
		m->restarts = m->job.restarts;
	m->requeued = m->attempt > 0;
	m->resume = jobio_resume(m->io, !m->requeued, err);
	if (!m->resume && err->code)
		return err->code;
	return 0;
}

/* The rendezvous every node's workers use, kept with the attempt: attempts/<k>/master. */
static int publish_master(struct mn *m, const char *addr, int port, struct tc_err *err)
{
	struct sbuf path = SBUF_INIT, rv = SBUF_INIT;
	sbuf_addf(&path, "%s/attempts/%d", m->run_dir, m->attempt);
	int rc = mkdir_p(path.buf, err);
	sbuf_adds(&path, "/master");
	sbuf_addf(&rv, "%s:%d\n", addr, port);
	if (!rc)
		rc = write_file_atomic(path.buf, rv.buf, rv.len, err);
	sbuf_release(&path);
	sbuf_release(&rv);
	return rc;
}

/* Why the attempt's workers start, for the event that records it running. */
static void start_reason(struct mn *m, struct sbuf *why)
{
	const char *where = m->ops->where ? m->ops->where : "?";
	if (m->requeued)
		sbuf_addf(why, "requeued: attempt %d on %d nodes (%s)", m->attempt, m->nodes, where);
	else if (m->restarts == 0)
		sbuf_addf(why, "%d worker%s started on %d nodes (%s)", m->world,
			  m->world == 1 ? "" : "s", m->nodes, where);
	else
		sbuf_addf(why, "restart %d of %d: %d worker%s started on %d nodes", m->restarts,
			  m->s->max_restarts, m->world, m->world == 1 ? "" : "s", m->nodes);
	if (m->resume)
		sbuf_addf(why, ", resuming from %s", m->resume);
	if (m->change.len)
		sbuf_addf(why, "; %s", m->change.buf);
}

/* ---- membership: which host is which node rank (spares, replace) ---- */

/*
 * The allocation's hosts, where the backend says (Slurm: its node list in
 * Slurm's order): the first spec.nodes are the members, node rank by
 * place, the rest spares (spares:, or an allocation asked bigger through
 * slurm.extra).  Else no members: the backend places the nodes.
 */
static void members_begin(struct mn *m)
{
	m->el = (struct elastic){ .s = m->s, .ops = m->ops, .sink = m->sink, .job_id = m->job_id,
				  .say = io_say, .say_ctx = m, .members = &m->members,
				  .spares = &m->spares, .exclude = &m->exclude, .change = &m->change };
	m->nodes = m->s->nodes;
	struct strvec all = STRVEC_INIT;
	if (m->ops->hosts && !m->ops->hosts(m->ops->ctx, &all) && all.nr) {
		/* an elastic job starts on what was allocated, up to nodes.max */
		size_t want = all.nr < (size_t)m->s->nodes ? all.nr : (size_t)m->s->nodes;
		for (size_t i = 0; i < all.nr; i++)
			strvec_push(i < want ? &m->members : &m->spares, all.v[i]);
		m->nodes = (int)want;
	}
	strvec_clear(&all);
}

/*
 * An elastic job (nodes: {min, max}) goes on without member n: the ranks
 * above it move down; the host stays with the spares, left out, until it
 * is given back (elastic_release).  Below nodes.min the job waits for
 * nodes (nodes.wait; 0: it fails at once).  0: the caller looks at
 * member n again (the next one, or the one waited for).
 */
static int members_drop(struct mn *m, size_t n, struct tc_err *err)
{
	if ((int)m->members.nr - 1 < m->s->nodes_min) {
		if (m->s->nodes_wait > 0 && m->ops->usable)
			return elastic_wait(&m->el, n, err);
		return tc_error(err, TC_EJOB, "node %zu (%s) is left out and no spare is left: %zu "
				"node%s would be fewer than nodes.min %d", n, m->members.v[n],
				m->members.nr - 1, m->members.nr == 2 ? "" : "s", m->s->nodes_min);
	}
	sbuf_addf(&m->change, "%snode %zu (%s) left out, no spare left: going on with %zu node%s",
		  m->change.len ? ", " : "", n, m->members.v[n], m->members.nr - 1,
		  m->members.nr == 2 ? "" : "s");
	strvec_push(&m->spares, m->members.v[n]);
	free(m->members.v[n]);
	memmove(&m->members.v[n], &m->members.v[n + 1], (m->members.nr - n - 1) * sizeof(char *));
	m->members.nr--;
	return 0;
}

/*
 * May spare host take a member's node rank: not left out, and its newest
 * health check did not fail (the backend's spare_usable); a failed one is
 * named in the attempt's change, once.
 */
static bool spare_usable(struct mn *m, const char *host)
{
	if (launch_host_listed(m->exclude.buf, host))
		return false;
	struct sbuf why = SBUF_INIT, said = SBUF_INIT;
	bool ok = !m->ops->spare_usable || m->ops->spare_usable(m->ops->spare_ctx, host, &why);
	sbuf_addf(&said, "spare %s failed its health check: ", host);
	if (!ok && !strstr(m->change.buf, said.buf))
		sbuf_addf(&m->change, "%s%s%s", m->change.len ? ", " : "", said.buf, why.buf);
	sbuf_release(&why);
	sbuf_release(&said);
	return ok;
}

/*
 * Before an attempt: each member left out (lost under restart.policy
 * replace, unhealthy, on_log exclude_node) gives its node rank to the
 * first spare not left out; the others keep theirs.  No spare left: an
 * elastic job goes on with fewer nodes down to nodes.min (below it, it
 * waits for nodes, then fails), any other runs on the same hosts (the
 * node may be back).  The hosts left out for good are given back
 * (elastic.c).  The change is said in the attempt's event; the attempt's
 * world and parallel: auto plan are recomputed from the members (the
 * nodes derive the rest from it).
 */
static int members_update(struct mn *m, struct tc_err *err)
{
	sbuf_reset(&m->change);
	for (size_t n = 0; n < m->members.nr; n++) {
		if (!launch_host_listed(m->exclude.buf, m->members.v[n]))
			continue;
		size_t i = 0;
		while (i < m->spares.nr && !spare_usable(m, m->spares.v[i]))
			i++;
		if (i == m->spares.nr && m->s->nodes_min < m->s->nodes) {
			int rc = members_drop(m, n--, err);
			if (rc)
				return rc;
			continue;
		}
		if (i == m->spares.nr)
			continue;
		sbuf_addf(&m->change, "%sspare %s takes node %zu in place of %s",
			  m->change.len ? ", " : "", m->spares.v[i], n, m->members.v[n]);
		char *old = m->members.v[n];
		m->members.v[n] = m->spares.v[i];
		m->spares.v[i] = old; /* kept with the spares, left out by exclude */
	}
	elastic_release(&m->el);
	if (m->members.nr) {
		m->nodes = (int)m->members.nr;
		m->world = m->nodes * m->s->per_node;
	}
	return elastic_plan(&m->el, m->nodes, err);
}

/* The members as the attempt's hosts ("n1,n3"), or NULL: the backend places the nodes. */
static char *members_list(struct mn *m)
{
	if (!m->members.nr)
		return NULL;
	struct sbuf l = SBUF_INIT;
	for (size_t i = 0; i < m->members.nr; i++)
		sbuf_addf(&l, "%s%s", i ? "," : "", m->members.v[i]);
	return sbuf_detach(&l);
}

/* Run attempt m->attempt on every node through the backend, recorded running first. */
static int mn_run_attempt(struct mn *m, bool *failed, bool *stopped, struct tc_err *err)
{
	char *addr = getenv("TRAINCTL_MASTER_ADDR") ? xstrdup(getenv("TRAINCTL_MASTER_ADDR"))
						     : host_ipv4();
	int port = m->s->master_port ? m->s->master_port : launch_free_port();
	if (port < 0) {
		free(addr);
		return tc_error_errno(err, TC_ESYS, "cannot find a free port");
	}
	int rc = publish_master(m, addr, port, err);
	if (!rc)
		rc = members_update(m, err);
	char *hosts = members_list(m);
	struct sbuf why = SBUF_INIT;
	start_reason(m, &why);
	m->requeued = false;
	if (!rc)
		rc = sink_mark(m->sink, m->job_id, JOB_RUNNING, why.buf, err);
	say(m, "job %s: %s (master %s:%d)", m->job_id, why.buf, addr, port);
	if (!rc)
		launch_round_begin(&m->rounds, m->sink, m->job_id, m->attempt, m->nodes, &m->members,
				   io_say, m);
	if (!rc && m->attempt == 0)
		launch_notify(m->ln, NOTIFY_STARTED, "running", why.buf, m->attempt, -1);
	sbuf_release(&why);
	if (!rc) {
		/* the attempt's rendezvous round at the hub (hub/rdzv.h), its members expected */
		hub_rdzv_open_env(m->job_id, m->attempt, m->nodes, io_say, m);
		struct launch_attempt a = { m->attempt, m->nodes, addr, port, m->resume,
					    m->exclude.len ? m->exclude.buf : NULL, hosts };
		rc = m->ops->run_attempt(m->ops->ctx, &a, failed, stopped, err);
	}
	free(hosts);
	free(addr);
	return rc;
}

/* Has node n listed or written a checkpoint in any attempt up to this one? */
static bool ckpt_writer(struct mn *m, int attempt, int n)
{
	bool wrote = false;
	for (int a = 0; a <= attempt && !wrote; a++) {
		char *path = launch_node_result_path(m->run_dir, a, n);
		json_t *o = json_load_file(path, 0, NULL);
		free(path);
		wrote = json_is_true(json_object_get(o, "ckpt_writer")) ||
			json_array_size(json_object_get(o, "ckpts")) > 0;
		json_decref(o);
	}
	return wrote;
}

/*
 * The checkpoints every node of the attempt that writes checkpoints has
 * (nodes that report to a hub list theirs in node-<n>.json, "ckpts"), into
 * *names; false when no node listed any (one shared folder: the driver's
 * records are every node's).  A node that has never written one in this
 * job (only rank 0 saves, and it is elsewhere) does not count: its ranks
 * resume from what the others have (a rank whose disk lacks the file gets
 * it from rank 0, as examples/digits does).
 */
static bool common_ckpts(struct mn *m, int attempt, struct strvec *names)
{
	bool listed = false;
	for (int n = 0; n < m->nodes; n++) {
		char *path = launch_node_result_path(m->run_dir, attempt, n);
		json_t *o = json_load_file(path, 0, NULL);
		free(path);
		json_t *c = json_object_get(o, "ckpts");
		if (!json_is_array(c) || !ckpt_writer(m, attempt, n)) {
			json_decref(o);
			continue;
		}
		struct strvec mine = STRVEC_INIT;
		for (size_t i = 0; i < json_array_size(c); i++)
			if (json_is_string(json_array_get(c, i)))
				strvec_push(&mine, json_string_value(json_array_get(c, i)));
		if (!listed) {
			for (size_t i = 0; i < mine.nr; i++)
				strvec_push(names, mine.v[i]);
			listed = true;
		} else {
			struct strvec both = STRVEC_INIT;
			for (size_t i = 0; i < names->nr; i++)
				for (size_t k = 0; k < mine.nr; k++)
					if (!strcmp(names->v[i], mine.v[k])) {
						strvec_push(&both, names->v[i]);
						break;
					}
			strvec_clear(names);
			*names = both;
		}
		strvec_clear(&mine);
		json_decref(o);
	}
	return listed;
}

/* Some node failed with restarts left: the next attempt resumes from what every node has. */
static void mn_restart(struct mn *m, struct tc_err *err)
{
	struct strvec common = STRVEC_INIT;
	bool listed = m->remote && common_ckpts(m, m->attempt, &common);
	jobio_restrict(m->io, listed ? &common : NULL);
	strvec_clear(&common);
	free(m->resume);
	m->resume = jobio_resume(m->io, false, err);
	tc_err_release(err); /* no checkpoint to resume from is not fatal */
}

/* The verdict on the attempt (attempt.h), recorded; *again: run the next one. */
static int mn_verdict(struct mn *m, const struct attempt_outcome *o, const char *detail,
		      const char *lost, bool *again, struct tc_err *err)
{
	struct attempt_verdict v;
	attempt_decide(o, &v);
	if (v.again)
		mn_restart(m, err);
	m->restarts = v.restarts;
	struct attempt_ctl c = { .sink = m->sink, .ln = m->ln, .job_id = m->job_id,
				 .attempt = m->attempt, .say = io_say, .say_ctx = m,
				 .result = &m->result };
	int rc = attempt_record(&c, &v, detail, err);
	if (!rc && v.again && lost)
		note_node_lost(m, lost, v.restarts);
	*again = v.again;
	attempt_verdict_release(&v);
	return rc;
}

static void mn_release(struct mn *m)
{
	if (m->logfd >= 0)
		close(m->logfd);
	free(m->resume);
	sbuf_release(&m->result);
	sbuf_release(&m->exclude);
	sbuf_release(&m->change);
	strvec_clear(&m->members);
	strvec_clear(&m->spares);
	launch_rounds_release(&m->rounds);
	json_decref(m->hangs);
	json_decref(m->matches);
	free(m->log_dir);
	free(m->output_dir);
	free(m->data_dir);
	free(m->ckpt_dir);
	free(m->run_dir);
	job_row_release(&m->job);
	if (!m->remote)
		sink_close(m->sink);
}

static int mn_main(struct mn *mp, int *exit_status, struct tc_err *err);

int launch_multinode(const struct spec *s, const char *home, const char *job_id,
		     const struct launch_backend_ops *ops, int *exit_status, struct tc_err *err)
{
	struct mn m = { .s = s, .home = home, .job_id = job_id, .ops = ops, .logfd = -1,
			.result = SBUF_INIT, .exclude = SBUF_INIT, .hangs = json_array(),
			.matches = json_array(), .members = STRVEC_INIT, .spares = STRVEC_INIT,
			.change = SBUF_INIT };
	return mn_main(&m, exit_status, err);
}

int launch_multinode_remote(const struct spec *s, const char *home, const char *job_id,
			    struct sink *sink, int restarts, const struct launch_backend_ops *ops,
			    int *exit_status, struct tc_err *err)
{
	struct mn m = { .s = s, .home = home, .job_id = job_id, .ops = ops, .logfd = -1,
			.result = SBUF_INIT, .exclude = SBUF_INIT, .sink = sink, .remote = true,
			.restarts = restarts, .hangs = json_array(), .matches = json_array(),
			.members = STRVEC_INIT, .spares = STRVEC_INIT, .change = SBUF_INIT };
	return mn_main(&m, exit_status, err);
}

static int mn_main(struct mn *mp, int *exit_status, struct tc_err *err)
{
	struct mn m = *mp;
	const struct spec *s = m.s;
	const char *job_id = m.job_id;
	int rc;
	*exit_status = 1;
	if ((rc = mn_open(&m, err)))
		goto out;
	m.ln = launch_notify_open(s, m.home, job_id, m.sink, io_say, &m);
	members_begin(&m);
	if ((rc = mn_begin(&m, err)))
		goto fail;
	for (;; m.attempt++) {
		bool failed = false, stopped = false;
		if ((rc = mn_run_attempt(&m, &failed, &stopped, err)))
			goto fail;
		if (stopped) {
			sbuf_addf(&m.result, "job %s: stopped from outside (attempt %d)", job_id, m.attempt);
			*exit_status = 143;
			goto out;
		}
		launch_round_end(&m.rounds, m.run_dir, m.attempt, m.nodes, failed);
		if (!failed)
			mn_diagnostics(&m, m.attempt);
		struct attempt_outcome o = { .scope = ATTEMPT_EVERY_NODE, .restarts = m.restarts,
					     .max_restarts = s->max_restarts };
		struct sbuf cause = SBUF_INIT, detail = SBUF_INIT, hang = SBUF_INIT, lost = SBUF_INIT;
		if (!failed) {
			/* the results are part of the result: a failed final upload fails the job */
			o.end = jobio_final_upload(m.io, &cause) ? ATTEMPT_UPLOAD_FAILED : ATTEMPT_OK;
		} else {
			bool final = false;
			attempt_cause(&m, m.attempt, m.nodes, &cause, &detail, &final);
			bool gone = attempt_lost(&m, m.attempt, &lost) > 0;
			if (attempt_hang(&m, m.attempt, &hang) && !gone) {
				/* a hang stalls every rank: the job's cause, whichever node stopped first */
				sbuf_reset(&cause);
				sbuf_add(&cause, hang.buf, hang.len);
			}
			mn_diagnostics(&m, m.attempt);
			o.end = ATTEMPT_FAILED;
			o.final = final ? ATTEMPT_FINAL_EITHER : ATTEMPT_MAY_RESTART;
		}
		o.cause = cause.buf;
		bool again = false;
		rc = mn_verdict(&m, &o, detail.buf, lost.len ? lost.buf : NULL, &again, err);
		if (o.end == ATTEMPT_OK)
			*exit_status = 0;
		sbuf_release(&cause);
		sbuf_release(&detail);
		sbuf_release(&hang);
		sbuf_release(&lost);
		if (!again)
			goto out;
		if (rc)
			goto fail;
	}
fail:
	if (rc && m.sink) {
		struct tc_err e2 = TC_ERR_INIT;
		sbuf_addf(&m.result, "job %s failed: %s", job_id, err->msg ? err->msg : tc_code_name(rc));
		sink_finish(m.sink, job_id, JOB_FAILED, tc_exit_status(rc), err->msg, err->msg, &e2);
		tc_err_release(&e2);
		launch_notify(m.ln, NOTIFY_FAILED, "failed", err->msg, m.attempt, tc_exit_status(rc));
	}
out:
	jobio_end(m.io); /* the final upload, whatever the outcome */
	if (!m.remote && m.job.id && *exit_status != 143) /* a remote driver: the hub's to report */
		report_job_end(sink_store(m.sink), job_id, NULL, io_say, &m);
	if (m.result.len)
		say(&m, "%s", m.result.buf);
	launch_notify_close(m.ln); /* after the end is recorded and said */
	mn_release(&m);
	return rc;
}
