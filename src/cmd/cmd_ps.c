/* cmd_ps.c -- `trainctl ps [-a] [--json]`: jobs on this machine, newest first */
#include "backend/backend.h"
#include "cmd/cmd.h"
#include "jobs/jobs.h"
#include "server/server.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "store/store.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

static const char usage[] =
	"usage: trainctl ps [-a] [--json]\n"
	"\n"
	"  -a, --all   every job (default: active jobs and the 20 newest)\n"
	"      --json  one JSON array\n";

static void duration(struct sbuf *sb, const struct job_row *j)
{
	double end = j->ended > 0 ? j->ended : now_wall();
	double d = end - (j->started > 0 ? j->started : j->created);
	if (d < 0)
		d = 0;
	if (d < 60)
		sbuf_addf(sb, "%.1fs", d);
	else if (d < 3600)
		sbuf_addf(sb, "%dm%02ds", (int)d / 60, (int)d % 60);
	else
		sbuf_addf(sb, "%dh%02dm", (int)d / 3600, ((int)d % 3600) / 60);
}

int cmd_ps(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	if (client_configured(argc, argv))
		return remote_ps(argc, argv, ctx, err);
	static const struct option opts[] = {
		{ "all", no_argument, NULL, 'a' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool all = false, as_json = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "ah", opts, NULL)) != -1) {
		switch (c) {
		case 'a': all = true; break;
		case 'j': as_json = true; break;
		case 'h': fputs(usage, stdout); return 0;
		default: return tc_error(err, TC_EUSAGE, "ps: bad option (see trainctl ps --help)");
		}
	}
	if (optind != argc)
		return tc_error(err, TC_EUSAGE, "ps: takes no arguments");
	struct store *st = NULL;
	struct job_row *jobs = NULL;
	size_t n = 0;
	int rc = store_open(ctx->home, &st, err);
	if (!rc)
		rc = store_job_list(st, all, &jobs, &n, err);
	if (rc)
		goto out;
	for (size_t i = 0; i < n && !rc; i++)
		rc = backend_reconcile(st, &jobs[i], err);
	if (rc)
		goto out;
	if (as_json) {
		json_t *arr = json_array();
		for (size_t i = 0; i < n; i++)
			json_array_append_new(arr, job_to_json(&jobs[i], JOB_JSON_BRIEF));
		json_dumpf(arr, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		fputc('\n', stdout);
		json_decref(arr);
		goto out;
	}
	printf("%-29s %-20s %-10s %7s %8s %9s\n", "JOB", "NAME", "STATE", "WORKERS", "RESTARTS",
	       "DURATION");
	for (size_t i = 0; i < n; i++) {
		struct sbuf d = SBUF_INIT;
		duration(&d, &jobs[i]);
		printf("%-29s %-20s %-10s %7d %8d %9s\n", jobs[i].id, jobs[i].name,
		       job_state_name(jobs[i].state), jobs[i].world_size, jobs[i].restarts, d.buf);
		sbuf_release(&d);
	}
out:
	job_rows_free(jobs, n);
	store_close(st);
	return rc;
}
