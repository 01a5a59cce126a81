/*
 * show_text.c -- the text of `trainctl show` (jobs.h, jobs_show_text), made
 * from the JSON form of jobs_show: the CLI renders a local job and a job
 * the server sent alike.
 */
#include "jobs/jobs.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "metrics/query.h"

#include <stdlib.h>
#include <string.h>

static json_t *get(json_t *o, const char *key)
{
	return json_object_get(o, key);
}

static const char *str(json_t *o, const char *key, const char *none)
{
	const char *v = json_string_value(get(o, key));
	return v ? v : none;
}

static long long num(json_t *o, const char *key)
{
	return (long long)json_integer_value(get(o, key));
}

static void line_time(struct sbuf *out, const char *label, json_t *t)
{
	sbuf_addf(out, "%-10s ", label);
	if (json_is_number(t) && json_number_value(t) > 0)
		format_time_utc(out, json_number_value(t));
	else
		sbuf_adds(out, "-");
	sbuf_addch(out, '\n');
}

/* The planner's choice for `parallel: {strategy: auto}` jobs. */
static void line_plan(struct sbuf *out, json_t *spec)
{
	json_t *plan = get(get(spec, "parallel"), "plan");
	if (plan)
		sbuf_addf(out, "%-10s dp=%lld tp=%lld pp=%lld micro-batch=%lld, layers per stage %s"
			       " (estimated step %.3f s)\n", "plan", num(plan, "dp"), num(plan, "tp"),
			  num(plan, "pp"), num(plan, "micro_batch"), str(plan, "partition", "?"),
			  json_number_value(get(plan, "step_time")));
}

/* The server's view: owner, priority and the devices it holds. */
/* what every worker runs (spec_worker_argv), as a shell reads it back */
static void line_argv(struct sbuf *out, json_t *argv)
{
	size_t i, n = json_array_size(argv);
	if (!n)
		return;
	const char **v = xcalloc(n, sizeof(*v));
	json_t *a;
	json_array_foreach(argv, i, a)
		v[i] = json_is_string(a) ? json_string_value(a) : "?";
	sbuf_addf(out, "%-10s ", "argv");
	sbuf_add_shell_argv(out, v, n);
	sbuf_addch(out, '\n');
	free(v);
}

static void lines_managed(struct sbuf *out, json_t *o)
{
	sbuf_addf(out, "%-10s %lld%s\n", "priority", num(o, "priority"),
		  json_is_true(get(o, "preemptible")) ? " (preemptible)" : "");
	sbuf_addf(out, "%-10s %s:%lld", "devices", str(o, "device_type", "?"), num(o, "device_count"));
	if (json_is_string(get(o, "devices")))
		sbuf_addf(out, " %s", str(o, "devices", ""));
	sbuf_addch(out, '\n');
}

/* the spec keys --set gave (spec.h: overrides), as they were given */
static void line_overrides(struct sbuf *out, json_t *ov)
{
	const char *k;
	json_t *v;
	if (!json_object_size(ov))
		return;
	sbuf_addf(out, "%-10s", "overrides");
	json_object_foreach(ov, k, v)
		sbuf_addf(out, " %s=%s", k, json_is_string(v) ? json_string_value(v) : "?");
	sbuf_addch(out, '\n');
}

static void lines_spec(struct sbuf *out, json_t *spec)
{
	char *text = json_is_object(spec) ? json_dumps(spec, JSON_INDENT(2) | JSON_PRESERVE_ORDER)
					  : NULL;
	sbuf_addf(out, "\nspec:\n%s\n", text ? text : "(not stored)");
	free(text);
}

static void lines_events(struct sbuf *out, json_t *events)
{
	size_t i;
	json_t *e;
	sbuf_adds(out, "\nevents:\n");
	json_array_foreach(events, i, e) {
		sbuf_adds(out, "  ");
		format_time_utc(out, json_number_value(get(e, "time")));
		/* its first line: a round note's record follows as JSON (rounds.c) */
		const char *reason = str(e, "reason", "");
		sbuf_addf(out, "  %-10s %.*s\n", str(e, "state", "?"), (int)strcspn(reason, "\n"),
			  reason);
	}
}

/*
 * A multi-node job's rounds after the first, one line each (jobs.h
 * job_rounds_json): "round 1    2 nodes n1,n3  n2 lost (its supervisor
 * ended without reporting)  spare n3 -> node 1  first step 6.2 s after the
 * loss".  Hosts and causes are the job's: control characters go as spaces.
 */
static void add_flat(struct sbuf *out, const char *s)
{
	for (; *s; s++)
		sbuf_addch(out, (unsigned char)*s < 0x20 || *s == 0x7f ? ' ' : *s);
}

static void lines_rounds(struct sbuf *out, json_t *rounds)
{
	size_t i, k;
	json_t *r, *x;
	json_array_foreach(rounds, i, r) {
		if (i == 0)
			continue;
		struct sbuf l = SBUF_INIT, label = SBUF_INIT;
		sbuf_addf(&label, "round %lld", num(r, "attempt"));
		sbuf_addf(&l, "%-10s %lld node%s", label.buf, num(r, "nodes"),
			  num(r, "nodes") == 1 ? "" : "s");
		json_array_foreach(get(r, "members"), k, x) {
			sbuf_adds(&l, k ? "," : " ");
			sbuf_adds(&l, json_string_value(x) ? json_string_value(x) : "?");
		}
		json_array_foreach(get(r, "left_out"), k, x) {
			sbuf_addf(&l, "  %s %s", str(x, "host", "?"), str(x, "why", job_round_why_name(JOB_ROUND_LEFT_OUT)));
			if (json_is_string(get(x, "cause")))
				sbuf_addf(&l, " (%s)", str(x, "cause", ""));
		}
		json_array_foreach(get(r, "spares"), k, x)
			sbuf_addf(&l, "  spare %s -> node %lld", str(x, "host", "?"), num(x, "node"));
		json_t *t = get(r, "loss_to_first_step_s");
		if (json_is_number(t))
			sbuf_addf(&l, "  first step %.1f s after the loss", json_number_value(t));
		add_flat(out, l.buf);
		sbuf_addch(out, '\n');
		sbuf_release(&l);
		sbuf_release(&label);
	}
}

/*
 * ended: the job has ended.  A worker with no end recorded runs only in the
 * newest attempt of a job that has not ended; elsewhere its end was never
 * told (its node was lost, or cut off and fenced).
 */
static void lines_workers(struct sbuf *out, json_t *workers, bool ended)
{
	size_t i;
	json_t *w;
	long long newest = 0;
	json_array_foreach(workers, i, w)
		if (num(w, "attempt") > newest)
			newest = num(w, "attempt");
	sbuf_addf(out, "\nworkers:\n  %-7s %-5s %-8s %s\n", "ATTEMPT", "RANK", "PID", "END");
	json_array_foreach(workers, i, w) {
		sbuf_addf(out, "  %-7lld %-5lld %-8lld ", num(w, "attempt"), num(w, "rank"), num(w, "pid"));
		int sig = (int)num(w, "signal");
		if (!json_is_number(get(w, "ended")) && (ended || num(w, "attempt") < newest))
			sbuf_adds(out, "no end recorded");
		else if (!json_is_number(get(w, "ended")))
			sbuf_adds(out, job_state_name(JOB_RUNNING));
		else if (sig)
			sbuf_addf(out, "killed by signal %d (%s)", sig, strsignal(sig));
		else
			sbuf_addf(out, "exit %lld", num(w, "exit_code"));
		sbuf_addch(out, '\n');
	}
}

static void lines_notifications(struct sbuf *out, json_t *list)
{
	size_t i;
	json_t *d;
	if (!json_array_size(list))
		return;
	sbuf_adds(out, "\nnotifications:\n");
	json_array_foreach(list, i, d) {
		sbuf_adds(out, "  ");
		format_time_utc(out, json_number_value(get(d, "time")));
		sbuf_addf(out, "  %-10s %s ", str(d, "event", "?"), str(d, "url", "?"));
		long long tries = num(d, "tries");
		if (json_is_true(get(d, "delivered")))
			sbuf_addf(out, "delivered (HTTP %lld", num(d, "status"));
		else
			sbuf_addf(out, "NOT delivered (%s", str(d, "error", "?"));
		sbuf_addf(out, ", %lld tr%s)\n", tries, tries == 1 ? "y" : "ies");
	}
}

static double real(json_t *o, const char *key)
{
	json_t *v = get(o, key);
	return json_is_number(v) ? json_number_value(v) : -1;
}

/* An indented copy of text (a stack). */
static void indented(struct sbuf *out, const char *text, const char *pad)
{
	for (const char *p = text; *p;) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		sbuf_adds(out, pad);
		sbuf_add(out, p, n);
		sbuf_addch(out, '\n');
		p += n + (nl != NULL);
	}
}

/* The watchdog's findings (docs/diagnostics.md): step times, stragglers, hangs. */
static void lines_diagnostics(struct sbuf *out, json_t *d)
{
	size_t i, k;
	json_t *r, *h, *s;
	sbuf_adds(out, "\ndiagnostics:\n");
	if (real(d, "median_step_time") >= 0)
		sbuf_addf(out, "  median step time %.3g s", real(d, "median_step_time"));
	else
		sbuf_adds(out, "  no step times yet");
	if (real(d, "hang_timeout") > 0)
		sbuf_addf(out, ", hang timeout %.0f s", real(d, "hang_timeout"));
	sbuf_addch(out, '\n');
	sbuf_addf(out, "  %-5s %-8s %s\n", "RANK", "STEPS", "STEP TIME (median of its last steps)");
	json_array_foreach(get(d, "ranks"), i, r) {
		sbuf_addf(out, "  %-5lld %-8lld ", num(r, "rank"), num(r, "steps"));
		if (real(r, "step_time") >= 0)
			sbuf_addf(out, "%.3g s\n", real(r, "step_time"));
		else
			sbuf_adds(out, "-\n");
	}
	json_array_foreach(get(d, "stragglers"), i, s)
		sbuf_addf(out, "  straggler: rank %lld is %.0f%% slower than the median (over its last %lld "
			       "steps; threshold %.0f%%)\n", num(s, "rank"), real(s, "slower_percent"),
			  num(d, "straggler_steps"), real(d, "straggler_percent"));
	json_array_foreach(get(d, "log_matches"), i, s)
		sbuf_addf(out, "  on_log: attempt %lld rank %lld: '%s' (%s): %s\n", num(s, "attempt"),
			  num(s, "rank"), str(s, "pattern", ""), str(s, "action", ""), str(s, "line", ""));
	if (json_is_object(get(d, "resume_mismatch")))
		sbuf_addf(out, "  resume: %s\n", str(get(d, "resume_mismatch"), "message", ""));
	json_array_foreach(get(d, "hangs"), i, h) {
		sbuf_addf(out, "  hang in attempt %lld: no progress for %.1f s (timeout %.0f s); ",
			  num(h, "attempt"), real(h, "silent_seconds"), real(h, "timeout"));
		if (json_is_integer(get(h, "culprit")))
			sbuf_addf(out, "likely culprit rank %lld", num(h, "culprit"));
		if (json_is_integer(get(h, "culprit_node"))) /* a multi-node job's */
			sbuf_addf(out, " on node %lld%s%s%s", num(h, "culprit_node"),
				  get(h, "culprit_node_name") ? " (" : "", str(h, "culprit_node_name", ""),
				  get(h, "culprit_node_name") ? ")" : "");
		if (json_is_integer(get(h, "culprit")))
			sbuf_adds(out, ": ");
		sbuf_addf(out, "%s", str(h, "why", ""));
		if (real(h, "device_utilization") >= 0)
			sbuf_addf(out, "; device utilisation %.0f%%", real(h, "device_utilization"));
		sbuf_addch(out, '\n');
		json_array_foreach(get(h, "stacks"), k, s) {
			struct sbuf who = SBUF_INIT;
			sbuf_addf(&who, "rank %lld", num(s, "rank"));
			if (json_is_integer(get(s, "node")))
				sbuf_addf(&who, " (node %lld)", num(s, "node"));
			if (!json_is_string(get(s, "stack")))
				sbuf_addf(out, "    %s: no stack\n", who.buf);
			else
				sbuf_addf(out, "    %s:\n", who.buf);
			sbuf_release(&who);
			if (!json_is_string(get(s, "stack")))
				continue;
			indented(out, str(s, "stack", ""), "      ");
		}
	}
}

void jobs_show_text(json_t *o, struct sbuf *out)
{
	bool managed = json_is_true(get(o, "managed"));
	sbuf_addf(out, "%-10s %s\n%-10s %s\n", "job", str(o, "id", "?"), "name", str(o, "name", "?"));
	if (managed)
		sbuf_addf(out, "%-10s %s\n", "user", str(o, "user", ""));
	sbuf_addf(out, "%-10s %s\n", "state", str(o, "state", "?"));
	if (managed)
		lines_managed(out, o);
	sbuf_addf(out, "%-10s %s\n", "run dir", str(o, "run_dir", "?"));
	line_argv(out, get(o, "argv"));
	/* image: jobs (docs/containers.md) */
	const char *image = str(get(o, "spec"), "image", NULL);
	/* the runtime when the spec has one (a Slurm job's is chosen at submission) */
	const char *runtime = str(get(get(o, "spec"), "container"), "runtime", NULL);
	if (image && runtime)
		sbuf_addf(out, "%-10s %s (%s)\n", "image", image, runtime);
	else if (image)
		sbuf_addf(out, "%-10s %s\n", "image", image);
	json_t *slurm = get(o, "slurm");
	if (slurm)
		sbuf_addf(out, "%-10s %s (%s) on %s\n", "slurm job", str(slurm, "job", "?"),
			  str(slurm, "state", "?"), str(slurm, "nodes", "no nodes yet"));
	json_t *sweep = get(o, "sweep");
	if (sweep) {
		char *p = json_dumps(get(sweep, "params"), JSON_COMPACT | JSON_PRESERVE_ORDER |
							    JSON_REAL_PRECISION(15));
		sbuf_addf(out, "%-10s %s, trial %lld %s\n", "sweep", str(sweep, "id", "?"),
			  num(sweep, "trial"), p ? p : "{}");
		free(p);
	}
	line_time(out, "created", get(o, "created"));
	line_time(out, "started", get(o, "started"));
	line_time(out, "ended", get(o, "ended"));
	sbuf_addf(out, "%-10s %lld\n%-10s %lld", "workers", num(o, "workers"), "restarts",
		  num(o, "restarts"));
	json_t *by = get(o, "restarts_by_cause");
	if (num(o, "restarts") > 0 && json_is_object(by))
		sbuf_addf(out, " (%lld after a lost node, %lld after a failing worker)",
			  num(by, "node_lost"), num(by, "worker_failed"));
	sbuf_addch(out, '\n');
	lines_rounds(out, get(o, "rounds"));
	/* a server's queued job: why it waits (sched.h rules 3, 5, 8) */
	if (json_is_string(get(get(o, "waiting"), "why")))
		sbuf_addf(out, "%-10s %s\n", "waiting", str(get(o, "waiting"), "why", ""));
	line_plan(out, get(o, "spec"));
	line_overrides(out, get(get(o, "spec"), "overrides"));
	if (json_is_number(get(o, "ended")))
		sbuf_addf(out, "%-10s %lld\n", "exit", num(o, "exit_code"));
	lines_spec(out, get(o, "spec"));
	lines_events(out, get(o, "events"));
	lines_workers(out, get(o, "workers_history"), json_is_number(get(o, "ended")));
	if (json_is_object(get(o, "diagnostics")))
		lines_diagnostics(out, get(o, "diagnostics"));
	lines_notifications(out, get(o, "notifications"));
	sbuf_addch(out, '\n');
	metrics_job_summary_text(get(o, "metrics"), out);
	if (json_is_string(get(o, "root_cause")))
		sbuf_addf(out, "\nroot cause: %s\n", str(o, "root_cause", ""));
}
