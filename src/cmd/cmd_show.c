/* cmd_show.c -- `trainctl show JOB [--json]`: spec, states, workers, root cause */
#include "backend/backend.h"
#include "cmd/cmd.h"
#include "server/server.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "metrics/query.h"
#include "store/store.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_time(const char *label, double t)
{
	struct sbuf sb = SBUF_INIT;
	if (t > 0)
		format_time_utc(&sb, t);
	else
		sbuf_adds(&sb, "-");
	printf("%-10s %s\n", label, sb.buf);
	sbuf_release(&sb);
}

/* The planner's choice for `parallel: {strategy: auto}` jobs. */
static void print_plan(const char *spec_json)
{
	json_t *spec = json_loads(spec_json, 0, NULL);
	json_t *plan = json_object_get(json_object_get(spec, "parallel"), "plan");
	if (plan)
		printf("%-10s dp=%lld tp=%lld pp=%lld micro-batch=%lld, layers per stage %s"
		       " (estimated step %.3f s)\n", "plan",
		       (long long)json_integer_value(json_object_get(plan, "dp")),
		       (long long)json_integer_value(json_object_get(plan, "tp")),
		       (long long)json_integer_value(json_object_get(plan, "pp")),
		       (long long)json_integer_value(json_object_get(plan, "micro_batch")),
		       json_string_value(json_object_get(plan, "partition")),
		       json_real_value(json_object_get(plan, "step_time")));
	json_decref(spec);
}

static void worker_end(struct sbuf *sb, const struct worker_row *w)
{
	if (w->ended <= 0)
		sbuf_adds(sb, "running");
	else if (w->signal)
		sbuf_addf(sb, "killed by signal %d (%s)", w->signal, strsignal(w->signal));
	else
		sbuf_addf(sb, "exit %d", w->exit_code);
}

static json_t *job_json(const struct job_row *j, const struct event_row *ev, size_t nev,
			const struct worker_row *wk, size_t nwk)
{
	json_t *spec = json_loads(j->spec_json, 0, NULL);
	json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:f, s:f, s:f, s:i, s:i, s:i, s:s?}", "id", j->id,
			      "name", j->name, "state", j->state, "run_dir", j->run_dir, "created",
			      j->created, "started", j->started, "ended", j->ended, "exit_code",
			      j->exit_code, "restarts", j->restarts, "workers", j->world_size,
			      "root_cause", j->root_cause);
	json_object_set_new(o, "spec", spec ? spec : json_null());
	store_history_json(o, ev, nev, wk, nwk);
	return o;
}

int cmd_show(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	if (client_configured(argc, argv))
		return remote_show(argc, argv, ctx, err);
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool as_json = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j': as_json = true; break;
		case 'h': fputs("usage: trainctl show JOB [--json]\n", stdout); return 0;
		default: return tc_error(err, TC_EUSAGE, "show: bad option");
		}
	}
	if (optind + 1 != argc)
		return tc_error(err, TC_EUSAGE, "show: give one job");
	struct store *st = NULL;
	struct job_row j = { 0 };
	struct event_row *ev = NULL;
	struct worker_row *wk = NULL;
	size_t nev = 0, nwk = 0;
	struct metrics_job_summary ms = { 0 };
	struct store_slurm sl = { 0 };
	int rc = store_open(ctx->home, &st, err);
	if (!rc)
		rc = store_job_get(st, argv[optind], &j, err);
	if (!rc)
		rc = backend_reconcile(st, &j, err);
	if (!rc)
		rc = store_events(st, j.id, &ev, &nev, err);
	if (!rc)
		rc = store_workers(st, j.id, &wk, &nwk, err);
	if (!rc)
		rc = metrics_job_summary(st, &j, &ms, err);
	if (rc)
		goto out;
	if (!rc)
		rc = store_slurm_get(st, j.id, &sl, err);
	if (rc)
		goto out;
	if (as_json) {
		json_t *o = job_json(&j, ev, nev, wk, nwk);
		if (sl.job)
			json_object_set_new(o, "slurm", json_pack("{s:s, s:s?, s:s?}", "job", sl.job,
								  "nodes", sl.nodes, "state", sl.state));
		json_object_set_new(o, "metrics", metrics_job_summary_json(&ms));
		json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		fputc('\n', stdout);
		json_decref(o);
		goto out;
	}
	printf("%-10s %s\n%-10s %s\n%-10s %s\n", "job", j.id, "name", j.name, "state", j.state);
	printf("%-10s %s\n", "run dir", j.run_dir);
	if (sl.job)
		printf("%-10s %s (%s) on %s\n", "slurm job", sl.job, sl.state ? sl.state : "?",
		       sl.nodes ? sl.nodes : "no nodes yet");
	print_time("created", j.created);
	print_time("started", j.started);
	print_time("ended", j.ended);
	printf("%-10s %d\n%-10s %d\n", "workers", j.world_size, "restarts", j.restarts);
	print_plan(j.spec_json);
	if (j.ended > 0)
		printf("%-10s %d\n", "exit", j.exit_code);
	printf("\nspec:\n%s\n", j.spec_json);
	printf("\nevents:\n");
	for (size_t i = 0; i < nev; i++) {
		struct sbuf t = SBUF_INIT;
		format_time_utc(&t, ev[i].time);
		printf("  %s  %-10s %s\n", t.buf, ev[i].state, ev[i].reason);
		sbuf_release(&t);
	}
	printf("\nworkers:\n  %-7s %-5s %-8s %s\n", "ATTEMPT", "RANK", "PID", "END");
	for (size_t i = 0; i < nwk; i++) {
		struct sbuf e = SBUF_INIT;
		worker_end(&e, &wk[i]);
		printf("  %-7d %-5d %-8ld %s\n", wk[i].attempt, wk[i].rank, (long)wk[i].pid, e.buf);
		sbuf_release(&e);
	}
	struct sbuf msum = SBUF_INIT;
	metrics_job_summary_text(&ms, &msum);
	printf("\n%s", msum.buf);
	sbuf_release(&msum);
	if (j.root_cause)
		printf("\nroot cause: %s\n", j.root_cause);
out:
	store_slurm_release(&sl);
	metrics_job_summary_release(&ms);
	event_rows_free(ev, nev);
	free(wk);
	job_row_release(&j);
	store_close(st);
	return rc;
}
