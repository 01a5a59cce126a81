/*
 * cmd_sweep.c -- `trainctl sweep FILE` (here, or queued on the server),
 * `trainctl sweep show SWEEP`, `trainctl sweep ls`.
 *
 * Here, this process is the sweep's driver: each trial is a child
 * `trainctl run -q --name NAME --set KEY=VALUE... SPEC` (the ordinary
 * local path: devices are leased by each run), at most parallel at once;
 * sweep_tick (sweep/engine.c) decides what starts and stops.  A trial's
 * console goes to $TRAINCTL_HOME/sweeps/<id>/trial-<n>.log, where the root
 * cause of a trial that never became a job is read from.
 */
#include "cmd/cmd.h"
#include "backend/backend.h"
#include "core/proc.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "devices/devices.h"
#include "jobs/jobs.h"
#include "spec/spec.h"
#include "server/server.h"
#include "cmd/client.h"
#include "store/store.h"
#include "sweep/sweep.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char usage[] =
	"usage: trainctl sweep SWEEP.yaml [--server URL] [--json]\n"
	"   or: trainctl sweep show SWEEP [--json]\n"
	"   or: trainctl sweep ls [--json]\n"
	"\n"
	"Runs every trial of a sweep file (docs/sweeps.md): here, parallel at a\n"
	"time, in the foreground; or, with --server (or $TRAINCTL_SERVER), queued\n"
	"on the server, which drives it.  show lists the trials best first and\n"
	"names the best.\n";

/* ---- printing ---- */

static void fmt_num(struct sbuf *sb, json_t *v)
{
	if (json_is_number(v))
		sbuf_addf(sb, "%.6g", json_number_value(v));
	else
		sbuf_adds(sb, "-");
}

/* The trials counted in state t (sweep show's "counts"). */
static long long count(json_t *counts, enum trial_state t)
{
	return json_integer_value(json_object_get(counts, trial_state_name(t)));
}

static void print_sweep(json_t *o)
{
	json_t *keys = json_object_get(o, "parameters"), *trials = json_object_get(o, "trials");
	json_t *c = json_object_get(o, "counts");
	printf("sweep      %s (%s)\n", json_string_value(json_object_get(o, "id")),
	       json_string_value(json_object_get(o, "name")));
	printf("state      %s", json_string_value(json_object_get(o, "state")));
	const char *note = json_string_value(json_object_get(o, "note"));
	printf("%s%s\n", note ? ": " : "", note ? note : "");
	printf("objective  %s, %s (%s)\n", json_string_value(json_object_get(o, "metric")),
	       json_string_value(json_object_get(o, "mode")),
	       json_string_value(json_object_get(json_object_get(json_object_get(o, "definition"), "objective"), "reduce")));
	printf("trials     %zu: %lld succeeded, %lld failed, %lld failed-objective, %lld stopped early, %lld killed, %lld running, %lld pending\n",
	       json_array_size(trials), count(c, TRIAL_SUCCEEDED), count(c, TRIAL_FAILED),
	       count(c, TRIAL_FAILED_OBJECTIVE), count(c, TRIAL_STOPPED), count(c, TRIAL_KILLED),
	       count(c, TRIAL_RUNNING), count(c, TRIAL_PENDING));
	/* columns: trial, state, objective, steps, each parameter, job */
	size_t np = json_array_size(keys);
	int *w = xcalloc(np + 1, sizeof(*w));
	for (size_t k = 0; k < np; k++) {
		const char *key = json_string_value(json_array_get(keys, k));
		const char *dot = strrchr(key, '.');
		w[k] = (int)strlen(dot ? dot + 1 : key);
		size_t i;
		json_t *t;
		json_array_foreach(trials, i, t) {
			char *txt = sweep_value_text(json_object_get(json_object_get(t, "params"), key));
			if ((int)strlen(txt) > w[k])
				w[k] = (int)strlen(txt);
			free(txt);
		}
	}
	struct sbuf line = SBUF_INIT;
	sbuf_addf(&line, "\n  %-5s %-9s %-11s %-5s", "TRIAL", "STATE", "OBJECTIVE", "STEPS");
	for (size_t k = 0; k < np; k++) {
		const char *key = json_string_value(json_array_get(keys, k));
		const char *dot = strrchr(key, '.');
		sbuf_addf(&line, " %-*s", w[k], dot ? dot + 1 : key);
	}
	sbuf_adds(&line, " JOB");
	puts(line.buf);
	size_t i;
	json_t *t;
	json_array_foreach(trials, i, t) {
		sbuf_reset(&line);
		sbuf_addf(&line, "  %-5lld %-9s ", json_integer_value(json_object_get(t, "trial")),
			  json_string_value(json_object_get(t, "state")));
		size_t at = line.len;
		fmt_num(&line, json_object_get(t, "objective"));
		sbuf_addf(&line, "%*s %-5lld", (int)(11 - (line.len - at)) > 0 ? (int)(11 - (line.len - at)) : 0, "",
			  json_integer_value(json_object_get(t, "steps")));
		for (size_t k = 0; k < np; k++) {
			char *txt = sweep_value_text(json_object_get(json_object_get(t, "params"),
								      json_string_value(json_array_get(keys, k))));
			sbuf_addf(&line, " %-*s", w[k], txt);
			free(txt);
		}
		const char *job = json_string_value(json_object_get(t, "job"));
		sbuf_addf(&line, " %s", job ? job : "-");
		puts(line.buf);
		const char *tn = json_string_value(json_object_get(t, "note"));
		if (tn && *tn)
			printf("        %s: %s\n", json_is_true(json_object_get(t, "early_stopped")) ? "stopped early" : "root cause", tn);
	}
	sbuf_release(&line);
	free(w);
	json_t *best = json_object_get(o, "best");
	if (json_is_object(best)) {
		struct sbuf sb = SBUF_INIT;
		fmt_num(&sb, json_object_get(best, "objective"));
		const char *job = json_string_value(json_object_get(best, "job"));
		printf("\nbest       trial %lld: %s %s (job %s)\n", json_integer_value(json_object_get(best, "trial")),
		       json_string_value(json_object_get(o, "metric")), sb.buf, job ? job : "-");
		if (job)
			printf("re-run     trainctl clone %s   (through the server)\n", job);
		printf("       or  %s\n", json_string_value(json_object_get(best, "rerun")));
		sbuf_release(&sb);
	} else {
		printf("\nbest       none yet (no trial has a value of %s)\n",
		       json_string_value(json_object_get(o, "metric")));
	}
}

static int print_json(json_t *o, struct tc_err *err)
{
	int rc = json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) < 0
			 ? tc_error(err, TC_ESYS, "sweep: cannot write the JSON")
			 : 0;
	fputc('\n', stdout);
	return rc;
}

/* ---- the local driver ---- */

struct child {
	struct proc p;
	bool live;
};

struct local {
	const char *home;
	char *self;
	char *dir; /* $TRAINCTL_HOME/sweeps/<id> */
	char *spec_file;
	struct child *kids;
	size_t nkids;
	struct store *st;
};

static volatile sig_atomic_t got_signal;
static void on_signal(int sig)
{
	got_signal = sig;
}

static char *trial_log(const struct local *l, int idx)
{
	struct sbuf sb = SBUF_INIT;
	sbuf_addf(&sb, "%s/trial-%d.log", l->dir, idx);
	return sbuf_detach(&sb);
}

static int local_launch(void *arg, const struct sweep_row *sw, const struct sweep_def *d,
			struct trial_row *t, struct tc_err *err)
{
	struct local *l = arg;
	(void)d;
	if ((size_t)t->idx >= l->nkids)
		return tc_error(err, TC_EINPUT, "trial %d is beyond the sweep's trials", t->idx);
	struct child *k = &l->kids[t->idx];
	char *name = sweep_trial_name(sw, t->idx);
	char *log = trial_log(l, t->idx);
	int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int rc = 0;
	if (fd < 0) {
		rc = tc_error_errno(err, TC_ESYS, "cannot create %s", log);
		goto out;
	}
	struct proc p = PROC_INIT;
	const char *head[] = { l->self, "run", "-q", "--name", name };
	for (size_t i = 0; i < sizeof(head) / sizeof(head[0]); i++)
		strvec_push(&p.args, head[i]);
	json_t *o = json_loads(t->params_json, 0, NULL);
	const char *key;
	json_t *v;
	json_object_foreach(o, key, v) {
		char *txt = sweep_value_text(v);
		struct sbuf set = SBUF_INIT;
		sbuf_addf(&set, "%s=%s", key, txt);
		strvec_push(&p.args, "--set");
		strvec_push(&p.args, set.buf);
		sbuf_release(&set);
		free(txt);
	}
	json_decref(o);
	strvec_push(&p.args, l->spec_file);
	proc_env_inherit(&p.env);
	env_set(&p.env, "TRAINCTL_HOME", l->home);
	p.in.how = PROC_IO_NULL;
	p.out = (struct proc_io){ PROC_IO_FD, fd };
	p.err = (struct proc_io){ PROC_IO_FD, fd };
	p.death_sig = SIGTERM; /* a driver killed takes its trials with it */
	rc = proc_start(&p, err);
	close(fd);
	if (rc) {
		proc_clear(&p);
		goto out;
	}
	k->p = p;
	k->live = true;
out:
	free(name);
	free(log);
	return rc;
}

/* The last non-empty line of a trial's console: its root cause when no job came to be. */
static char *last_line(const char *path)
{
	struct sbuf text = SBUF_INIT;
	struct tc_err e = TC_ERR_INIT;
	char *out = NULL;
	if (!read_file(path, &text, &e)) {
		while (text.len && (text.buf[text.len - 1] == '\n' || text.buf[text.len - 1] == ' '))
			text.buf[--text.len] = '\0';
		char *nl = strrchr(text.buf, '\n');
		const char *line = nl ? nl + 1 : text.buf;
		if (!strncmp(line, "trainctl: ", 10))
			line += 10;
		if (*line)
			out = xstrdup(line);
	}
	tc_err_release(&e);
	sbuf_release(&text);
	return out;
}

static void local_poll(void *arg, const struct sweep_row *sw, const struct trial_row *t,
		       char **job_id, bool *ended, char **cause)
{
	struct local *l = arg;
	*ended = false;
	struct child *k = (size_t)t->idx < l->nkids ? &l->kids[t->idx] : NULL;
	int status = 0;
	if (!k || !k->live) {
		*ended = true; /* a trial of a driver that is gone */
	} else if (waitpid(k->p.pid, &status, WNOHANG) == k->p.pid) {
		k->live = false;
		proc_clear(&k->p);
		*ended = true;
	}
	if (!t->job_id) {
		/* its job is the one of its name made since the sweep began */
		char *name = sweep_trial_name(sw, t->idx);
		struct job_row j = { 0 };
		struct tc_err e = TC_ERR_INIT;
		if (!store_job_get(l->st, name, &j, &e) && !strcmp(j.name, name) &&
		    j.created >= sw->created - 1)
			*job_id = xstrdup(j.id);
		job_row_release(&j);
		tc_err_release(&e);
		free(name);
	}
	if (*ended && !t->job_id && !*job_id) {
		char *log = trial_log(l, t->idx);
		struct sbuf sb = SBUF_INIT;
		proc_describe_exit(&sb, status);
		char *line = last_line(log);
		struct sbuf c = SBUF_INIT;
		sbuf_addf(&c, "%s", line ? line : sb.buf);
		*cause = sbuf_detach(&c);
		free(line);
		free(log);
		sbuf_release(&sb);
	}
}

static int local_stop(void *arg, const struct trial_row *t, const char *why, struct tc_err *err)
{
	struct local *l = arg;
	struct backend_env env = { .home = l->home, .say = NULL, .say_arg = NULL };
	struct job_row j = { 0 };
	(void)why;
	int rc = store_job_get(l->st, t->job_id, &j, err);
	if (!rc)
		rc = jobs_stop(&env, l->st, &j, JOB_STOP_STOPPED, err);
	job_row_release(&j);
	return rc;
}

/* One line per trial that changed state since the last round. */
static void report_changes(struct store *st, const char *id, char **last, size_t n)
{
	struct trial_row *t = NULL;
	size_t nt = 0;
	struct tc_err e = TC_ERR_INIT;
	if (store_sweep_trials(st, id, &t, &nt, &e)) {
		tc_err_release(&e);
		return;
	}
	for (size_t i = 0; i < nt && i < n; i++) {
		if (last[i] && !strcmp(last[i], t[i].state))
			continue;
		free(last[i]);
		last[i] = xstrdup(t[i].state);
		if (trial_state_is(t[i].state, TRIAL_PENDING))
			continue;
		char *params = sweep_params_text(t[i].params_json);
		if (trial_state_is(t[i].state, TRIAL_RUNNING)) {
			printf("trial %d started: %s\n", t[i].idx, params);
		} else {
			printf("trial %d %s", t[i].idx, t[i].state);
			if (isfinite(t[i].objective))
				printf(": objective %.6g", t[i].objective);
			if (t[i].job_id)
				printf(" (job %s)", t[i].job_id);
			if (t[i].note)
				printf("%s%s", isfinite(t[i].objective) || t[i].job_id ? "; " : ": ", t[i].note);
			putchar('\n');
		}
		fflush(stdout);
		free(params);
	}
	trial_rows_free(t, nt);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/*
 * Trials take their devices as any `trainctl run` does (leases): no more of
 * them at once than the machine's accelerators hold, or the extra ones would
 * fail for want of a device.  cpu workers are not leased.
 */
static void cap_parallel(struct sweep_def *d, const json_t *trials, bool quiet)
{
	struct spec *s0 = NULL;
	struct tc_err e = TC_ERR_INIT;
	char *p = json_dumps(json_array_get(trials, 0), JSON_COMPACT | JSON_REAL_PRECISION(15));
	if (p && !sweep_trial_spec(d, p, NULL, &s0, &e) && strcmp(s0->device_type, "cpu")) {
		struct device_list dl = DEVICE_LIST_INIT;
		devices_discover(&dl);
		int have = devices_count(&dl, s0->device_type);
		int fit = s0->per_node > 0 && have > 0 ? have / s0->per_node : 0;
		if (fit >= 1 && fit < d->parallel) {
			if (!quiet)
				printf("parallel: %d trials of %d %s each fit this machine's %d (not %d)\n", fit,
				       s0->per_node, s0->device_type, have, d->parallel);
			d->parallel = fit;
		}
		device_list_release(&dl);
	}
	spec_free(s0);
	free(p);
	tc_err_release(&e);
}

/* An accuracy-like objective minimised picks the worst trial: say so at the start. */
static void warn_mode(const struct sweep_def *d)
{
	if (d->mode == SWEEP_MIN && sweep_metric_maximised(d->metric))
		fprintf(stderr, "trainctl: warning: objective %s looks like a score to maximise, but mode "
			"is min: the best trial will be the lowest (set objective: {mode: max})\n",
			d->metric);
}

static int run_here(const char *home, const char *file, bool as_json, struct cmd_ctx *ctx,
		    struct tc_err *err)
{
	struct sweep_def *d = NULL;
	struct local l = { .home = home };
	struct sweep_row sw = { 0 };
	json_t *trials = NULL;
	char **last = NULL;
	int rc = sweep_load(file, &d, err);
	if (rc)
		return rc;
	if ((rc = store_open(home, &l.st, err)))
		goto out;
	trials = sweep_trials(d);
	if ((rc = sweep_check_trials(d, trials, NULL, err)))
		goto out;
	cap_parallel(d, trials, as_json);
	warn_mode(d);
	l.nkids = json_array_size(trials);
	l.kids = xcalloc(l.nkids + 1, sizeof(*l.kids));
	last = xcalloc(l.nkids + 1, sizeof(*last));
	l.self = path_self_exe();
	sw.id = store_new_job_id();
	sw.name = xstrdup(d->name);
	sw.state = xstrdup(sweep_state_name(SWEEP_RUNNING));
	sw.created = now_wall();
	sw.driver_pid = getpid();
	sw.driver_ticks = proc_start_ticks(getpid());
	struct sbuf dir = SBUF_INIT;
	sbuf_addf(&dir, "%s/sweeps/%s", home, sw.id);
	l.dir = sbuf_detach(&dir);
	if ((rc = mkdir_p(l.dir, err)))
		goto out;
	if (d->spec_path) {
		l.spec_file = xstrdup(d->spec_path);
	} else {
		/* an inline spec becomes a file the trials (and a re-run) can name */
		struct sbuf p = SBUF_INIT;
		sbuf_addf(&p, "%s/spec.json", l.dir);
		l.spec_file = sbuf_detach(&p);
		if ((rc = write_file_atomic(l.spec_file, d->spec_text, strlen(d->spec_text), err)))
			goto out;
		d->spec_path = xstrdup(l.spec_file);
	}
	json_t *dj = sweep_def_to_json(d);
	sw.def_json = json_dumps(dj, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
	json_decref(dj);
	struct trial_row *rows = xcalloc(l.nkids + 1, sizeof(*rows));
	for (size_t i = 0; i < l.nkids; i++) {
		rows[i].sweep_id = sw.id;
		rows[i].idx = (int)i;
		rows[i].params_json = json_dumps(json_array_get(trials, i),
						 JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
		rows[i].state = (char *)trial_state_name(TRIAL_PENDING);
	}
	rc = store_sweep_create(l.st, &sw, rows, l.nkids, err);
	for (size_t i = 0; i < l.nkids; i++)
		free(rows[i].params_json);
	free(rows);
	if (rc)
		goto out;
	if (!as_json) {
		printf("sweep %s (%s): %zu trial%s, %d at a time, objective %s (%s)\n", sw.id,
		       sw.name, l.nkids, l.nkids == 1 ? "" : "s", d->parallel, d->metric, d->mode == SWEEP_MAX ? "max" : "min");
		fflush(stdout);
	}
	struct sigaction sa = { 0 }, old_int, old_term;
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	struct sweep_ops ops = { .launch = local_launch, .poll = local_poll, .stop = local_stop, .arg = &l };
	bool done = false;
	while (!rc && !done) {
		if (got_signal) {
			/* stop: each trial's run ends its job killed; then the sweep is stopped */
			struct proc_stopping *v = xcalloc(l.nkids ? l.nkids : 1, sizeof(*v));
			for (size_t i = 0; i < l.nkids; i++)
				v[i].pid = l.kids[i].live ? l.kids[i].p.pid : -1;
			proc_stop_all(v, l.nkids, SIGTERM, -1, NULL, NULL); /* each run stops its job */
			free(v);
			for (size_t i = 0; i < l.nkids; i++)
				if (l.kids[i].live) {
					l.kids[i].p.pid = -1;
					proc_clear(&l.kids[i].p);
					l.kids[i].live = false;
				}
			/* record their ends, start nothing */
			struct sweep_ops rec = ops;
			struct tc_err e2 = TC_ERR_INIT;
			rec.record_only = true;
			(void)sweep_tick(l.st, sw.id, &rec, &done, &e2);
			tc_err_release(&e2);
			rc = store_sweep_set_state(l.st, sw.id, sweep_state_name(SWEEP_STOPPED), "stopped by a signal", true, err);
			if (!rc)
				rc = tc_error(err, TC_EJOB, "sweep %s stopped by a signal", sw.id);
			break;
		}
		rc = sweep_tick(l.st, sw.id, &ops, &done, err);
		if (!as_json)
			report_changes(l.st, sw.id, last, l.nkids);
		if (!rc && !done)
			sleep_ms(300);
	}
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	if (!rc) {
		json_t *o = NULL;
		rc = sweep_show_json(l.st, sw.id, &o, err);
		if (!rc) {
			if (as_json) {
				rc = print_json(o, err);
			} else {
				putchar('\n');
				print_sweep(o);
			}
			/* exit 1 when no trial succeeded; 2 when the objective is never logged (a wrong name) */
			const char *state = json_string_value(json_object_get(o, "state"));
			if (sweep_state_is(state, SWEEP_FAILED))
			{
				const char *note = json_string_value(json_object_get(o, "note"));
				rc = tc_error(err, TC_ESPEC, "sweep %s: %s", sw.id, note ? note : "failed");
			}
			else if (!count(json_object_get(o, "counts"), TRIAL_SUCCEEDED))
				ctx->exit_status = 1;
		}
		json_decref(o);
	}
out:
	for (size_t i = 0; i < l.nkids; i++) {
		if (l.kids[i].live)
			(void)proc_stop(&l.kids[i].p, -1, NULL);
		proc_clear(&l.kids[i].p);
	}
	for (size_t i = 0; last && i < l.nkids; i++)
		free(last[i]);
	free(last);
	free(l.kids);
	free(l.self);
	free(l.dir);
	free(l.spec_file);
	json_decref(trials);
	sweep_row_release(&sw);
	store_close(l.st);
	sweep_def_free(d);
	return rc;
}

/* ---- through the server ---- */

static int submit_remote(const char *server, const char *file, bool as_json, struct tc_err *err)
{
	struct sbuf text = SBUF_INIT;
	struct sweep_def *d = NULL;
	/* checked here first: errors name this file's lines */
	int rc = sweep_load(file, &d, err);
	if (rc)
		goto out;
	warn_mode(d);
	if ((rc = read_file(file, &text, err)))
		goto out;
	/* a spec file beside it travels inline, as the server may not read this folder */
	json_t *extra = d->spec_path ? json_pack("{s:s}", "spec", d->spec_text) : NULL;
	rc = cmd_post_file(server, "/api/v1/sweeps", "sweep", file, text.buf, text.len, extra,
			   as_json, err);
out:
	sweep_def_free(d);
	sbuf_release(&text);
	return rc;
}

static int get_remote(const char *server, const char *path, json_t **out, struct tc_err *err)
{
	struct client *cl = NULL;
	struct sbuf resp = SBUF_INIT;
	int rc = client_open(server, &cl, err);
	if (!rc)
		rc = client_json(cl, "GET", path, NULL, &resp, err);
	if (!rc && !(*out = json_loadb(resp.buf, resp.len, 0, NULL)))
		rc = tc_error(err, TC_EBACKEND, "server: the answer is not JSON");
	client_close(cl);
	sbuf_release(&resp);
	return rc;
}

/* ---- the command ---- */

int cmd_sweep(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	static const struct option opts[] = {
		CMD_OPT_SERVER,
		CMD_OPT_JSON,
		CMD_OPT_HELP,
		CMD_OPT_END,
	};
	const char *server = NULL;
	bool as_json = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (cmd_common_flag(c, &as_json, &server))
			continue;
		switch (c) {
		case 'h': fputs(usage, stdout); return 0;
		default: return tc_error(err, TC_EUSAGE, "sweep: bad option (see trainctl sweep --help)");
		}
	}
	bool remote = server || client_configured(argc, argv);
	if (optind >= argc)
		return tc_error(err, TC_EUSAGE, "sweep: give a sweep file, or show SWEEP, or ls");
	const char *verb = argv[optind];
	json_t *o = NULL;
	int rc;
	if (!strcmp(verb, "show") || !strcmp(verb, "ls")) {
		bool show = !strcmp(verb, "show");
		if (optind + (show ? 2 : 1) != argc)
			return tc_error(err, TC_EUSAGE, show ? "sweep show: give one sweep" : "sweep ls: no arguments");
		if (remote) {
			struct sbuf path = SBUF_INIT;
			sbuf_adds(&path, "/api/v1/sweeps");
			if (show)
				sbuf_addf(&path, "/%s", argv[optind + 1]);
			rc = get_remote(server, path.buf, &o, err);
			sbuf_release(&path);
		} else {
			struct store *st = NULL;
			rc = store_open(ctx->home, &st, err);
			if (!rc && show) {
				rc = sweep_show_json(st, argv[optind + 1], &o, err);
			} else if (!rc) {
				struct sweep_row *v = NULL;
				size_t n = 0;
				rc = store_sweep_list(st, false, &v, &n, err);
				o = json_pack("{s:[]}", "sweeps");
				for (size_t i = 0; !rc && i < n; i++)
					json_array_append_new(json_object_get(o, "sweeps"), sweep_brief_json(&v[i]));
				sweep_rows_free(v, n);
			}
			store_close(st);
		}
		if (!rc && as_json) {
			rc = print_json(o, err);
		} else if (!rc && show) {
			print_sweep(o);
		} else if (!rc) {
			size_t i;
			json_t *x;
			printf("%-26s %-20s %-8s %s\n", "SWEEP", "NAME", "STATE", "NOTE");
			json_array_foreach(json_object_get(o, "sweeps"), i, x) {
				const char *note = json_string_value(json_object_get(x, "note"));
				printf("%-26s %-20s %-8s %s\n", json_string_value(json_object_get(x, "id")),
				       json_string_value(json_object_get(x, "name")),
				       json_string_value(json_object_get(x, "state")), note ? note : "");
			}
		}
		json_decref(o);
		return rc;
	}
	if (optind + 1 != argc)
		return tc_error(err, TC_EUSAGE, "sweep: give one sweep file");
	if (remote)
		return submit_remote(server, verb, as_json, err);
	return run_here(ctx->home, verb, as_json, ctx, err);
}
