/* cmd_show.c -- `trainctl show JOB [--json]`: spec, states, workers, root cause */
#include "cmd/cmd.h"
#include "jobs/jobs.h"
#include "core/json.h"
#include "core/sbuf.h"
#include "source/source.h"

#include <getopt.h>
#include <jansson.h>
#include "core/enc.h"

#include <stdio.h>
#include <stdlib.h>

/* The job's JSON (jobs_show, here or on the server) as --json or as text. */
void show_print(json_t *job, bool as_json)
{
	if (as_json) {
		/* the stored spec's reals (a plan's step_time) as 0.05, not 0.050000000000000003 */
		char *t = json_dumps_shortest(job, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		if (t)
			fputs(t, stdout);
		free(t);
		fputc('\n', stdout);
		return;
	}
	struct sbuf text = SBUF_INIT, safe = SBUF_INIT;
	jobs_show_text(job, &text);
	term_escape(&safe, text.buf, text.len, true); /* names, root causes: job-written text */
	fwrite(safe.buf, 1, safe.len, stdout);
	sbuf_release(&text);
	sbuf_release(&safe);
}

int cmd_show(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	static const struct option opts[] = {
		CMD_OPT_JSON,
		CMD_OPT_SERVER,
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
		case 'h': fputs("usage: trainctl show JOB [--json] [--server URL]\n", stdout); return 0;
		default: return cmd_bad_option("show", "h", argc, argv, opts, err);
		}
	}
	if (optind + 1 != argc)
		return tc_error(err, TC_EUSAGE, "show: give one job");
	struct job_source *src = NULL;
	json_t *job = NULL;
	int rc = cmd_source_open(ctx->home, server, argc, argv, &src, err);
	if (!rc)
		rc = src->ops->job_json(src, argv[optind], &job, err);
	if (!rc)
		show_print(job, as_json);
	json_decref(job);
	source_close(src);
	return rc;
}
