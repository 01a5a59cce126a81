/*
 * watch.c -- what the supervisor watches in a running job
 * (supervisor_int.h, docs/diagnostics.md): the progress watchdog (step
 * records and progress_pattern lines; a hang is dumped, compared, recorded
 * and ends the attempt), stragglers, on_log: patterns, the resume check and
 * run_dir/diagnostics.json, which `show`, the report and the UI read.
 *
 * Everything runs on the supervisor's thread, from its poll loop: the
 * metrics reader's step callback and the log lines feed it, the loop's
 * timeout includes sup_watch_tick.  A step costs a ring-buffer insert; the
 * median and the straggler rule run once a second at most.
 *
 * The pure rules (medians, the timeout, the culprit) are diag/diag.h.
 */
#include "launch/supervisor_int.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "diag/diag.h"
#include "hub/sink.h"
#include "jobs/jobs.h"
#include "jobs/runpath.h"
#include "metrics/ingest.h"
#include "report/report.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <regex.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHECK_MS 1000       /* the hang and straggler rules run this often */
#define DUMP_POLL_MS 100    /* how often the stack files are looked at */
#define WRITE_MS 5000       /* diagnostics.json is rewritten at most this often */
#define LINE_SHOWN 300      /* characters of a matching log line kept */
#define MAX_STACK (1u << 20) /* bytes of one process's dump read */
#define FINISH_SECONDS 60   /* the least timeout once a rank has exited 0 */
#define HOLD_MIN_S 5        /* a node's hold after its dump (hold_ms) */
#define HOLD_MAX_S 120
#define REPORT_STACK 65536  /* bytes of a rank's stack in a node's hang report */

/*
 * A node of a multi-node job holds its workers for a while after dumping
 * them (HOLDING), so that the other nodes, which find the same hang on
 * their own clocks, dump theirs before this node's stop breaks their
 * collectives.
 */
enum phase { WATCHING, DUMPING, HOLDING, DONE };

struct target {
	int widx; /* index in sp->w */
	pid_t pid;
	char *path;
	off_t size;
};

struct watch {
	bool hang_on;             /* watchdog: given */
	struct diag_hang_rule rule;
	struct diag_steps *steps;
	regex_t progress_re;
	bool have_progress_re;
	regex_t *log_re;          /* one per spec on_log entry */
	size_t nlog;
	struct sbuf line;         /* a NUL-terminated copy of a line for regexec */
	int stack_signal;
	char *site_dir, *stack_root, *stack_dir;
	/* this attempt */
	enum phase phase;
	int64_t progress_ms;      /* monotonic time of the last progress (or the attempt's start) */
	bool progressed;
	bool finishing;           /* a rank exited 0: the others are tearing down */
	long long *attempt_steps; /* per local rank */
	long long attempt_max;
	long long resume_step;    /* -1: not resumed */
	bool resume_checked;
	int64_t next_check, next_write, dump_until, next_dump_poll;
	struct target *t;
	size_t nt;
	double silent_s, timeout_s, median_s;
	int64_t hold_until;       /* HOLDING: stop the workers then */
	int log_action;           /* the on_log action of the attempt's match, or -1 */
	bool dirty;               /* diagnostics changed since written */
	bool *sg_flag, *sg_noted;
	long long *sg_since;
	double cached_median;
	/* diagnostics.json */
	json_t *hangs, *matches, *resume_warn;
};

/* local index of a global rank, or -1 */
static int local_of(const struct sup *sp, int rank)
{
	for (int i = 0; i < sp->n; i++)
		if (sp->w[i].rank == rank)
			return i;
	return -1;
}

static void regexes_free(struct watch *w)
{
	if (w->have_progress_re)
		regfree(&w->progress_re);
	for (size_t i = 0; i < w->nlog; i++)
		regfree(&w->log_re[i]);
	free(w->log_re);
}

int sup_watch_begin(struct sup *sp, struct tc_err *err)
{
	const struct spec *s = sp->s;
	bool policy = spec_restart_policy(s) == RESTART_POLICY_FIRST_STEP;
	if (!s->watchdog.on && !s->non_log && !policy)
		return 0;
	struct watch *w = xcalloc(1, sizeof(*w));
	sp->watch = w;
	w->hang_on = s->watchdog.on;
	w->rule = (struct diag_hang_rule){ s->watchdog.warmup_steps, s->watchdog.min_seconds,
					   s->watchdog.factor, s->watchdog.startup_seconds };
	w->steps = diag_steps_new(sp->n, s->watchdog.straggler_steps);
	w->attempt_steps = xcalloc((size_t)sp->n, sizeof(long long));
	w->sg_flag = xcalloc((size_t)sp->n, sizeof(bool));
	w->sg_noted = xcalloc((size_t)sp->n, sizeof(bool));
	w->sg_since = xcalloc((size_t)sp->n, sizeof(long long));
	w->hangs = json_array();
	w->matches = json_array();
	w->resume_step = -1;
	w->cached_median = NAN;
	sbuf_init(&w->line, 0);
	/* checked when the spec was loaded: a stored spec is compiled again here */
	if (s->watchdog.progress_pattern) {
		if (regcomp(&w->progress_re, s->watchdog.progress_pattern, REG_EXTENDED | REG_NOSUB))
			return tc_error(err, TC_ESPEC, "watchdog.progress_pattern '%s' does not compile",
					s->watchdog.progress_pattern);
		w->have_progress_re = true;
	}
	w->log_re = xcalloc(s->non_log + 1, sizeof(regex_t));
	for (size_t i = 0; i < s->non_log; i++) {
		if (regcomp(&w->log_re[i], s->on_log[i].pattern, REG_EXTENDED | REG_NOSUB))
			return tc_error(err, TC_ESPEC, "on_log pattern '%s' does not compile",
					s->on_log[i].pattern);
		w->nlog++;
	}
	if (!w->hang_on)
		return 0;
	/* the stack dump hook: run_dir/diag/sitecustomize.py, dumps under logs/stacks/ */
	w->stack_signal = SIGRTMIN + 6;
	w->site_dir = sup_join(sp->run_dir, "diag");
	w->stack_root = sup_join(sp->log_dir, "stacks");
	/* handed to the user only when made now (userdir.c) */
	int rc = sup_user_dir(sp, sp->run_dir, "diag", err);
	if (!rc)
		rc = sup_user_dir(sp, sp->log_dir, "stacks", err);
	if (rc)
		return rc;
	return sup_write_text(w->site_dir, "sitecustomize.py", diag_sitecustomize_py(), err);
}

static void write_diagnostics(struct sup *sp);

void sup_watch_end(struct sup *sp)
{
	struct watch *w = sp->watch;
	if (!w)
		return;
	write_diagnostics(sp);
	regexes_free(w);
	diag_steps_free(w->steps);
	sbuf_release(&w->line);
	for (size_t i = 0; i < w->nt; i++)
		free(w->t[i].path);
	free(w->t);
	free(w->attempt_steps);
	free(w->sg_flag);
	free(w->sg_noted);
	free(w->sg_since);
	free(w->site_dir);
	free(w->stack_root);
	free(w->stack_dir);
	json_decref(w->hangs);
	json_decref(w->matches);
	json_decref(w->resume_warn);
	free(w);
	sp->watch = NULL;
}

int sup_watch_attempt(struct sup *sp, const char *resume, struct env_plan *plan,
		      struct tc_err *err)
{
	struct watch *w = sp->watch;
	sbuf_reset(&sp->fail_why);
	sp->fail_final = false;
	if (!w)
		return 0;
	w->phase = WATCHING;
	w->progress_ms = now_mono_ms();
	w->progressed = false;
	w->finishing = false;
	memset(w->attempt_steps, 0, (size_t)sp->n * sizeof(long long));
	memset(w->sg_flag, 0, (size_t)sp->n * sizeof(bool));
	memset(w->sg_noted, 0, (size_t)sp->n * sizeof(bool));
	w->attempt_max = 0;
	w->resume_step = resume ? diag_ckpt_step(resume) : -1;
	w->resume_checked = false;
	w->log_action = -1;
	w->next_check = 0;
	for (size_t i = 0; i < w->nt; i++)
		free(w->t[i].path);
	w->nt = 0;
	diag_steps_new_attempt(w->steps);
	metrics_ingest_mark_attempt(sp->mi); /* a resumed step that repeats the last one counts */
	if (!w->hang_on)
		return 0;
	/* a folder per attempt: a pid of an earlier attempt is not this one's */
	free(w->stack_dir);
	struct sbuf d = SBUF_INIT;
	sbuf_addf(&d, "%s/attempt-%d", w->stack_root, sp->attempt);
	/* a node's own: in a shared run folder another host's pid is no process of ours */
	if (sp->o->node)
		sbuf_addf(&d, "-node%d", sp->o->node->node_rank);
	w->stack_dir = sbuf_detach(&d);
	/* logs/stacks is the user's: a link planted there is refused, not followed */
	int rc = sup_user_dir(sp, w->stack_root, path_basename(w->stack_dir), err);
	if (rc)
		return rc;
	plan->site_dir = w->site_dir;
	plan->stack_dir = w->stack_dir;
	plan->stack_signal = w->stack_signal;
	return 0;
}

bool sup_watch_progressed(const struct sup *sp)
{
	return sp->watch && sp->watch->progressed;
}

static json_t *diagnostics_json(struct sup *sp);

int sup_watch_log_action(const struct sup *sp)
{
	return sp->watch ? sp->watch->log_action : -1;
}

json_t *sup_watch_summary(struct sup *sp)
{
	if (!sp->watch)
		return NULL;
	json_t *o = diagnostics_json(sp);
	json_object_del(o, "hangs"); /* the stacks went with the hang report */
	return o;
}

/* ---- progress ---- */

static void progress(struct watch *w, int local)
{
	w->progress_ms = now_mono_ms();
	w->progressed = true;
	if (local >= 0 && ++w->attempt_steps[local] > w->attempt_max)
		w->attempt_max = w->attempt_steps[local];
	w->dirty = true;
}

/* An event of the job: its row (jobs_note) and, for hangs and on_log matches, the webhooks. */
static void note(struct sup *sp, enum job_note n, const char *text)
{
	struct tc_err e = TC_ERR_INIT;
	/* a node's hang is one node's view: the driver records the job's (multinode.c) */
	if (sp->o->node && n == JOB_NOTE_HANG)
		return;
	if (sink_note(sp->sink, sp->job_id, n, text, &e))
		sup_say(sp, "warning: %s", e.msg);
	tc_err_release(&e);
	if (n == JOB_NOTE_HANG || n == JOB_NOTE_LOG_MATCH) {
		struct sbuf r = SBUF_INIT;
		sbuf_addf(&r, "%s: %s", job_note_name(n), text);
		sup_notify(sp, n == JOB_NOTE_HANG ? NOTIFY_HANG : NOTIFY_LOG_MATCH,
			   job_state_name(JOB_RUNNING), r.buf, -1);
		sbuf_release(&r);
	}
}

void sup_watch_step(void *ctx, int rank, long long epoch, long long iter, double own, double wall)
{
	struct sup *sp = ctx;
	struct watch *w = sp->watch;
	if (!w)
		return;
	int local = local_of(sp, rank);
	if (local < 0)
		return; /* a rank the worker started itself (torchrun under one worker) */
	progress(w, local);
	diag_steps_add(w->steps, local, wall, own);
	if (w->resume_step >= 0 && !w->resume_checked) {
		w->resume_checked = true;
		if (!diag_resume_continues(w->resume_step, epoch, iter)) {
			struct sbuf t = SBUF_INIT;
			sbuf_addf(&t, "the first step after resuming from checkpoint step %lld is ",
				  w->resume_step);
			if (epoch >= 0)
				sbuf_addf(&t, "epoch %lld ", epoch);
			if (iter >= 0)
				sbuf_addf(&t, "%siteration %lld ", epoch >= 0 ? "" : "step ", iter);
			sbuf_addf(&t, "(rank %d), not %lld: training did not resume where the "
				      "checkpoint was (the data loader replayed or skipped data)",
				  rank, w->resume_step + 1);
			sup_say(sp, "warning: %s", t.buf);
			note(sp, JOB_NOTE_RESUME_MISMATCH, t.buf);
			json_decref(w->resume_warn);
			w->resume_warn = json_pack("{s:i, s:I, s:I, s:I, s:s}", "attempt", sp->attempt,
						   "checkpoint_step", (json_int_t)w->resume_step,
						   "epoch", (json_int_t)epoch, "iteration",
						   (json_int_t)iter, "message", t.buf);
			sbuf_release(&t);
		}
	}
}

void sup_watch_exit(struct sup *sp, bool ok)
{
	struct watch *w = sp->watch;
	if (!w || !ok)
		return;
	/*
	 * A rank that finished its training is progress, and the others now
	 * tear down (destroy_process_group, the interpreter's exit), which on
	 * a loaded machine takes seconds that are no step.
	 */
	w->finishing = true;
	w->progress_ms = now_mono_ms();
}

/* ---- log lines: on_log and progress_pattern ---- */

static void log_match(struct sup *sp, int rank, size_t i, const char *line)
{
	struct watch *w = sp->watch;
	const struct spec_on_log *p = &sp->s->on_log[i];
	struct sbuf shown = SBUF_INIT, t = SBUF_INIT;
	sbuf_add(&shown, line, strnlen(line, LINE_SHOWN));
	sbuf_rtrim(&shown);
	sbuf_addf(&t, "rank %d: action %s: pattern '%s' matched: %s", rank,
		  spec_log_action_name(p->action), p->pattern, shown.buf);
	note(sp, JOB_NOTE_LOG_MATCH, t.buf);
	json_array_append_new(w->matches,
			      json_pack("{s:i, s:i, s:s, s:s, s:s, s:f}", "attempt", sp->attempt, "rank",
					rank, "pattern", p->pattern, "action",
					spec_log_action_name(p->action), "line", shown.buf, "time",
					now_wall()));
	w->dirty = true;
	sp->failed = true;
	sp->fail_rank = rank;
	sp->fail_status = 0;
	sbuf_reset(&sp->fail_why);
	sbuf_addf(&sp->fail_why, "on_log match: rank %d printed a line matching pattern '%s' "
				 "(action %s): %s", rank, p->pattern, spec_log_action_name(p->action),
		  shown.buf);
	/*
	 * A local job has no other node to move to: exclude_node ends it like
	 * fail.  A node of a multi-node job tells its driver the action
	 * (node-<n>.json), which decides for the job.
	 */
	sp->fail_final = p->action != LOG_ACTION_RESTART;
	w->log_action = (int)p->action;
	sup_event(sp, "%s; stopping the workers", sp->fail_why.buf);
	sup_begin_stop(sp);
	sbuf_release(&shown);
	sbuf_release(&t);
}

void sup_watch_lines(struct sup *sp, int rank, const char *data, size_t len)
{
	struct watch *w = sp->watch;
	if (!w || (!w->have_progress_re && !w->nlog))
		return;
	const char *p = data, *end = data + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		sbuf_reset(&w->line);
		sbuf_add(&w->line, p, n);
		p += n + (nl != NULL);
		if (w->have_progress_re && !regexec(&w->progress_re, w->line.buf, 0, NULL, 0)) {
			int local = local_of(sp, rank);
			progress(w, local);
			diag_steps_add(w->steps, local, now_wall(), NAN);
		}
		/* the first match of an attempt acts; the workers are stopping after it */
		for (size_t i = 0; i < w->nlog && !sp->failed && !sp->stopping; i++)
			if (!regexec(&w->log_re[i], w->line.buf, 0, NULL, 0))
				log_match(sp, rank, i, w->line.buf);
	}
}

/* ---- diagnostics.json ---- */

static json_t *diagnostics_json(struct sup *sp)
{
	struct watch *w = sp->watch;
	const struct spec_watchdog *wd = &sp->s->watchdog;
	json_t *o = json_object();
	json_object_set_new(o, "attempt", json_integer(sp->attempt));
	json_object_set_new(o, "steps", json_integer(diag_steps_count(w->steps)));
	double med = diag_steps_median(w->steps);
	json_object_set_new(o, "median_step_time", isfinite(med) ? json_real(med) : json_null());
	if (w->hang_on) {
		double to = diag_hang_timeout(&w->rule, w->attempt_max, med);
		json_object_set_new(o, "hang_timeout", to > 0 ? json_real(to) : json_null());
	}
	json_object_set_new(o, "straggler_percent", json_real(wd->straggler_percent));
	json_object_set_new(o, "straggler_steps", json_integer(wd->straggler_steps));
	json_t *ranks = json_array();
	int *sg = xcalloc((size_t)sp->n + 1, sizeof(int));
	double sgm;
	int nsg = diag_stragglers(w->steps, wd->straggler_percent, sg, sp->n, &sgm);
	for (int i = 0; i < sp->n; i++) {
		double t = diag_steps_rank_time(w->steps, i);
		json_array_append_new(ranks, json_pack("{s:i, s:I, s:o}", "rank", sp->w[i].rank,
						       "steps",
						       (json_int_t)diag_steps_rank_count(w->steps, i),
						       "step_time", isfinite(t) ? json_real(t) : json_null()));
	}
	json_object_set_new(o, "ranks", ranks);
	json_t *st = json_array();
	for (int k = 0; k < nsg; k++) {
		double t = diag_steps_rank_time(w->steps, sg[k]);
		json_array_append_new(st, json_pack("{s:i, s:f, s:f}", "rank", sp->w[sg[k]].rank,
						    "step_time", t, "slower_percent",
						    100 * (t / sgm - 1)));
	}
	free(sg);
	json_object_set_new(o, "stragglers", st);
	json_object_set_new(o, "hangs", json_incref(w->hangs));
	json_object_set_new(o, "log_matches", json_incref(w->matches));
	if (w->resume_warn)
		json_object_set_new(o, "resume_mismatch", json_incref(w->resume_warn));
	return o;
}

static void write_diagnostics(struct sup *sp)
{
	struct watch *w = sp->watch;
	json_t *o = diagnostics_json(sp);
	char *text = json_dumps(o, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	json_decref(o);
	struct tc_err e = TC_ERR_INIT;
	/* a node's own: the job's diagnostics.json is its driver's (multinode.c) */
	struct sbuf name = SBUF_INIT;
	if (sp->o->node)
		sbuf_addf(&name, "diagnostics-node%d.json", sp->o->node->node_rank);
	else
		run_leaf(&name, RUN_DIAGNOSTICS, 0);
	if (text && sup_write_text(sp->run_dir, name.buf, text, &e))
		sup_say(sp, "warning: %s", e.msg);
	tc_err_release(&e);
	sbuf_release(&name);
	free(text);
	w->dirty = false;
}

/* ---- stragglers ---- */

static void check_stragglers(struct sup *sp)
{
	struct watch *w = sp->watch;
	const struct spec_watchdog *wd = &sp->s->watchdog;
	int *sg = xcalloc((size_t)sp->n + 1, sizeof(int));
	double med;
	int n = diag_stragglers(w->steps, wd->straggler_percent, sg, sp->n, &med);
	bool *now = xcalloc((size_t)sp->n, sizeof(bool));
	for (int k = 0; k < n; k++)
		now[sg[k]] = true;
	for (int i = 0; i < sp->n; i++) {
		long long c = diag_steps_rank_count(w->steps, i);
		if (!now[i]) {
			w->sg_flag[i] = false;
			continue;
		}
		if (!w->sg_flag[i]) {
			w->sg_flag[i] = true;
			w->sg_since[i] = c;
			continue;
		}
		/* it persists: slower over another full window of its own steps */
		if (!w->sg_noted[i] && c - w->sg_since[i] >= wd->straggler_steps) {
			w->sg_noted[i] = true;
			double t = diag_steps_rank_time(w->steps, i);
			struct sbuf m = SBUF_INIT;
			sbuf_addf(&m, "rank %d is %.0f%% slower than the median rank (step %.3g s against "
				      "%.3g s over its last %d steps)", sp->w[i].rank,
				  100 * (t / med - 1), t, med, wd->straggler_steps);
			sup_say(sp, "warning: straggler: %s", m.buf);
			note(sp, JOB_NOTE_STRAGGLER, m.buf);
			sbuf_release(&m);
		}
	}
	free(now);
	free(sg);
}

/* ---- a hang: dump, compare, record, stop ---- */

/* The processes of the workers' groups that registered for stack dumps. */
static void find_targets(struct sup *sp)
{
	struct watch *w = sp->watch;
	DIR *d = opendir(w->stack_dir);
	struct dirent *de;
	size_t alloc = 0;
	while (d && (de = readdir(d))) {
		long pid;
		const char *dot = strstr(de->d_name, ".stack");
		if (!dot || dot[6])
			continue;
		char *num = xstrndup(de->d_name, (size_t)(dot - de->d_name));
		bool ok = parse_long(num, 1, INT32_MAX, &pid);
		free(num);
		if (!ok)
			continue;
		pid_t g = getpgid((pid_t)pid);
		for (int i = 0; g > 0 && i < sp->n; i++)
			if (!sp->w[i].reaped && sp->w[i].pid == g) {
				XGROW(w->t, w->nt + 1, alloc);
				w->t[w->nt++] = (struct target){ i, (pid_t)pid, sup_join(w->stack_dir, de->d_name),
								 -1 };
			}
	}
	if (d)
		closedir(d);
}

static void start_dump(struct sup *sp, int64_t now)
{
	struct watch *w = sp->watch;
	w->phase = DUMPING;
	w->dump_until = now + (int64_t)(sp->s->watchdog.dump_seconds * 1000);
	w->next_dump_poll = now + DUMP_POLL_MS;
	if (sp->s->watchdog.dump_seconds > 0)
		find_targets(sp);
	for (size_t i = 0; i < w->nt; i++)
		if (kill(w->t[i].pid, w->stack_signal) < 0)
			errno = 0; /* gone since: it has no stack to give */
	sup_event(sp, "no progress for %.1f s (hang timeout %.0f s): asking %zu process%s for their "
		      "stacks", w->silent_s, w->timeout_s, w->nt, w->nt == 1 ? "" : "es");
}

/* Every dump written (non-empty and unchanged since the last look)? */
static bool dumps_done(struct watch *w)
{
	bool done = true;
	for (size_t i = 0; i < w->nt; i++) {
		struct stat stt;
		off_t sz = stat(w->t[i].path, &stt) == 0 ? stt.st_size : 0;
		if (!sz || sz != w->t[i].size)
			done = false;
		w->t[i].size = sz;
	}
	return done;
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	size_t len = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3
		     : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
	if (!len || len > n || (len == 2 && s[0] < 0xc2) || (len == 4 && s[0] > 0xf4))
		return 0;
	for (size_t i = 1; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if ((len == 3 && s[0] == 0xe0 && s[1] < 0xa0) || (len == 3 && s[0] == 0xed && s[1] >= 0xa0) ||
	    (len == 4 && s[0] == 0xf0 && s[1] < 0x90) || (len == 4 && s[0] == 0xf4 && s[1] >= 0x90))
		return 0; /* overlong, surrogate, past U+10FFFF */
	return len;
}

/*
 * A stack dump as a JSON string: a path in it may be any bytes, a JSON
 * string must be UTF-8 (and NUL-free), so other bytes become '?'.
 */
static json_t *stack_string(const char *text, size_t len)
{
	struct sbuf sb = SBUF_INIT;
	const unsigned char *p = (const unsigned char *)text;
	for (size_t i = 0; i < len;) {
		size_t k = p[i] ? utf8_seq(p + i, len - i) : 0;
		if (k) {
			sbuf_add(&sb, text + i, k);
			i += k;
		} else {
			sbuf_addch(&sb, '?');
			i++;
		}
	}
	json_t *j = json_stringn(sb.buf ? sb.buf : "", sb.len);
	sbuf_release(&sb);
	return j;
}

/* The hang's timeout and silence, as the hang event and the root cause say them. */
static void hang_text(struct sup *sp, struct sbuf *m)
{
	struct watch *w = sp->watch;
	sbuf_addf(m, "no progress for %.1f s (timeout %.0f s: the larger of min_seconds %g and %g x "
		     "the median step time", w->silent_s, w->timeout_s, sp->s->watchdog.min_seconds,
		  sp->s->watchdog.factor);
	if (isfinite(w->median_s))
		sbuf_addf(m, " %.3g s", w->median_s);
	sbuf_adds(m, ")");
}

/*
 * A node of a multi-node job found a hang and dumped its ranks (their logs
 * have the stacks): its report goes to the driver now (sp->node_hang, node.c's), not
 * at the attempt's end, since a node may be killed once another stops;
 * the driver compares every node's stacks and records the job's hang.  The
 * workers are held for hold seconds, so that the other nodes dump theirs.
 */
static void node_hang(struct sup *sp, const struct sbuf *text, double util, const char *src)
{
	struct watch *w = sp->watch;
	struct sbuf m = SBUF_INIT;
	hang_text(sp, &m);
	json_t *stacks = json_array();
	for (int i = 0; i < sp->n; i++) {
		json_t *st = text[i].len ? stack_string(text[i].buf, text[i].len < REPORT_STACK
									  ? text[i].len
									  : REPORT_STACK)
					 : json_null();
		json_array_append_new(stacks, json_pack("{s:i, s:o}", "rank", sp->w[i].rank, "stack", st));
	}
	json_t *h = json_pack("{s:i, s:f, s:f, s:f, s:o, s:s?, s:s, s:o}", "attempt", sp->attempt,
			      "time", now_wall(), "silent_seconds", w->silent_s, "timeout", w->timeout_s,
			      "device_utilization", isfinite(util) ? json_real(util) : json_null(),
			      "utilization_source", src, "message", m.buf, "stacks", stacks);
	if (sp->node_hang)
		sp->node_hang(sp, h);
	json_object_set_new(h, "culprit", json_null());
	json_object_set_new(h, "why", json_string("the job's driver compares the stacks of every node"));
	json_array_append_new(w->hangs, h);
	w->dirty = true;
	write_diagnostics(sp);
	sbuf_reset(&sp->fail_why);
	sbuf_addf(&sp->fail_why, "hang detected: %s", m.buf);
	double hold = w->timeout_s / 10;
	hold = hold < HOLD_MIN_S ? HOLD_MIN_S : hold > HOLD_MAX_S ? HOLD_MAX_S : hold;
	w->phase = HOLDING;
	w->hold_until = now_mono_ms() + (int64_t)(hold * 1000);
	sup_event(sp, "hang detected on node %d: the stacks of ranks %d-%d are in their logs and sent "
		      "to the job's driver; stopping the workers in %.0f s (the other nodes dump theirs "
		      "meanwhile)", sp->o->node->node_rank, sp->w[0].rank, sp->w[sp->n - 1].rank, hold);
	sbuf_release(&m);
}

static void finish_hang(struct sup *sp)
{
	struct watch *w = sp->watch;
	w->phase = DONE;
	struct sbuf *text = xcalloc((size_t)sp->n, sizeof(struct sbuf));
	struct diag_stack *stacks = xcalloc((size_t)sp->n, sizeof(struct diag_stack));
	const struct diag_stack **sv = xcalloc((size_t)sp->n, sizeof(*sv));
	json_t *jst = json_array();
	for (int i = 0; i < sp->n; i++)
		sbuf_init(&text[i], 0);
	for (size_t k = 0; k < w->nt; k++) {
		struct sbuf dump = SBUF_INIT;
		if (read_file(w->t[k].path, &dump, NULL) || !dump.len) {
			sbuf_release(&dump);
			continue;
		}
		if (dump.len > MAX_STACK)
			sbuf_setlen(&dump, MAX_STACK);
		int i = w->t[k].widx;
		sbuf_addf(&text[i], "--- pid %ld ---\n", (long)w->t[k].pid);
		sbuf_add(&text[i], dump.buf, dump.len);
		diag_stack_parse(dump.buf, dump.len, &stacks[i]);
		sbuf_release(&dump);
	}
	for (int i = 0; i < sp->n; i++) {
		struct worker *wk = &sp->w[i];
		struct sbuf head = SBUF_INIT;
		if (text[i].len) {
			sv[i] = &stacks[i];
			sbuf_addf(&head, "trainctl: hang: the stack of rank %d, every thread "
					 "(most recent call first):\n", wk->rank);
			sbuf_add(&head, text[i].buf, text[i].len);
			sbuf_addf(&head, "trainctl: end of the stack of rank %d\n", wk->rank);
		} else {
			sbuf_addf(&head, "trainctl: hang: no stack of rank %d (not a Python process, or "
					 "it did not load trainctl's sitecustomize.py)\n", wk->rank);
		}
		if (wk->log.fd >= 0 && logcap_write(&wk->log, head.buf, head.len) < 0)
			sup_say(sp, "warning: cannot write rank %d log: %s", wk->rank, strerror(errno));
		json_array_append_new(jst, json_pack("{s:i, s:o}", "rank", wk->rank, "stack",
						     text[i].len ? stack_string(text[i].buf, text[i].len)
								 : json_null()));
		sbuf_release(&head);
	}
	const char *src = NULL;
	double util = report_sampler_last_util(sp->rsamp, &src);
	struct sbuf why = SBUF_INIT, m = SBUF_INIT;
	if (sp->o->node) {
		json_decref(jst); /* the report carries the stacks (node_hang) */
		node_hang(sp, text, util, src);
		goto out;
	}
	int culprit = diag_culprit(sv, sp->n, &why);
	/* diag names local indexes; the job names global ranks */
	int crank = culprit >= 0 ? sp->w[culprit].rank : -1;
	hang_text(sp, &m);
	if (crank >= 0)
		sbuf_addf(&m, "; likely culprit rank %d (%s)", crank, why.buf);
	else
		sbuf_addf(&m, "; %s", why.buf);
	if (isfinite(util))
		sbuf_addf(&m, "; device utilisation %.0f%% (%s)", util, src ? src : "telemetry");
	note(sp, JOB_NOTE_HANG, m.buf);
	json_array_append_new(w->hangs,
			      json_pack("{s:i, s:f, s:f, s:f, s:o, s:s, s:o, s:s?, s:o}", "attempt",
					sp->attempt, "time", now_wall(), "silent_seconds", w->silent_s,
					"timeout", w->timeout_s, "culprit",
					crank >= 0 ? json_integer(crank) : json_null(), "why", why.buf,
					"device_utilization", isfinite(util) ? json_real(util) : json_null(),
					"utilization_source", src, "stacks", jst));
	w->dirty = true;
	write_diagnostics(sp);
	if (!sp->failed) {
		sp->failed = true;
		sp->fail_rank = crank >= 0 ? crank : sp->w[0].rank;
		sp->fail_status = 0;
		sbuf_reset(&sp->fail_why);
		/* not "hang: ", which starts the note (jobs.h: job_note_of_reason) */
		sbuf_addf(&sp->fail_why, "hang detected: %s", m.buf);
		/* the whole text comes with the restart or the failure that follows */
		if (crank >= 0)
			sup_event(sp, "hang detected: likely culprit rank %d; stopping the workers", crank);
		else
			sup_event(sp, "hang detected; stopping the workers");
		sup_begin_stop(sp);
	}
out:
	sbuf_release(&m);
	sbuf_release(&why);
	for (int i = 0; i < sp->n; i++) {
		sbuf_release(&text[i]);
		diag_stack_release(&stacks[i]);
	}
	free(text);
	free(stacks);
	free(sv);
}

int sup_watch_tick(struct sup *sp, int64_t now)
{
	struct watch *w = sp->watch;
	if (!w || !w->hang_on)
		return -1;
	if (w->phase == DUMPING) {
		if (now >= w->dump_until || (now >= w->next_dump_poll && dumps_done(w))) {
			finish_hang(sp);
			return w->phase == HOLDING ? sup_watch_tick(sp, now) : -1;
		}
		if (now >= w->next_dump_poll)
			w->next_dump_poll = now + DUMP_POLL_MS;
		int64_t t = w->next_dump_poll < w->dump_until ? w->next_dump_poll : w->dump_until;
		return (int)(t - now);
	}
	if (w->phase == HOLDING) {
		if (now < w->hold_until && !sp->stopping)
			return (int)(w->hold_until - now);
		/* held long enough (or the workers are ending anyway, another node stopped) */
		w->phase = DONE;
		if (!sp->failed) {
			sp->failed = true;
			sp->fail_rank = sp->w[0].rank;
			sp->fail_status = 0;
			sup_event(sp, "hang detected; stopping the workers");
			sup_begin_stop(sp);
		}
		return -1;
	}
	if (w->phase == DONE || sp->stopping || sp->failed || !sp->up)
		return -1;
	if (now >= w->next_check) {
		w->next_check = now + CHECK_MS;
		w->cached_median = diag_steps_median(w->steps);
		check_stragglers(sp);
		if (w->dirty && now >= w->next_write) {
			w->next_write = now + WRITE_MS;
			write_diagnostics(sp);
		}
	}
	/* paused for want of space (on_disk_full: wait): not a hang; the clock starts again after */
	if (sup_disk_paused(sp))
		w->progress_ms = now;
	double to = diag_hang_timeout(&w->rule, w->attempt_max, w->cached_median);
	if (to > 0 && w->finishing && to < FINISH_SECONDS)
		to = FINISH_SECONDS;
	int64_t next = w->next_check;
	if (to > 0) {
		int64_t deadline = w->progress_ms + (int64_t)(to * 1000);
		if (now >= deadline) {
			w->silent_s = (double)(now - w->progress_ms) / 1000;
			w->timeout_s = to;
			w->median_s = w->cached_median;
			start_dump(sp, now);
			return sup_watch_tick(sp, now);
		}
		if (deadline < next)
			next = deadline;
	}
	return (int)(next - now);
}
