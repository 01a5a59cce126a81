/* cmd_logs.c -- `trainctl logs JOB [--rank R] [--tail N] [-f] [--timestamps] [--merge]` */
#include "cmd/cmd.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "source/source.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static const char logs_usage[] =
	"usage: trainctl logs JOB [-r R] [-n N] [-f] [--timestamps] [--merge] [--supervisor] [--server URL]\n"
	"\n"
	"  -r, --rank R      only rank R (default: every rank, lines prefixed [r])\n"
	"  -n, --tail N      the last N lines of each rank (as tail -n)\n"
	"  -f, --follow      keep printing while the job runs\n"
	"      --timestamps  each line after the time it was written (UTC, ms)\n"
	"      --merge       every rank's lines in one stream, ordered by time\n"
	"      --supervisor  the supervisor's own log (this machine's run folder only)\n"
	"      --server URL  the job of this server ($TRAINCTL_SERVER)\n";

/*
 * A job with no worker log gets a note ("queued: no logs yet", 0) or, once
 * ended, TC_EJOB ("failed before any worker started: see `trainctl show JOB`").
 */
static int explain_none(const char *id, const char *state, bool ended, struct tc_err *err)
{
	if (ended)
		return tc_error(err, TC_EJOB, "logs: job %s: %s before any worker started: see `trainctl show %s`",
				id, state, id);
	fprintf(stderr, "trainctl: logs: job %s is %s: no logs yet\n", id, state);
	return 0;
}

int cmd_logs(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	static const struct option opts[] = {
		{ "rank", required_argument, NULL, 'r' },
		{ "tail", required_argument, NULL, 'n' },
		{ "follow", no_argument, NULL, 'f' },
		{ "supervisor", no_argument, NULL, 's' },
		{ "timestamps", no_argument, NULL, 'T' },
		{ "merge", no_argument, NULL, 'M' },
		CMD_OPT_SERVER,
		CMD_OPT_HELP,
		CMD_OPT_END,
	};
	struct source_logs o = { -1, -1, false, false, false };
	const char *server = NULL;
	bool supervisor = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "r:n:fh", opts, NULL)) != -1) {
		if (cmd_common_flag(c, NULL, &server))
			continue;
		switch (c) {
		case 'r':
			if (!parse_long(optarg, 0, 1 << 20, &o.rank))
				return tc_error(err, TC_EUSAGE, "logs: --rank must be a rank number, not '%s'", optarg);
			break;
		case 'n':
			/* the server's limit too (api_data.c): one limit both ways */
			if (!parse_long(optarg, 0, 10000000, &o.tail))
				return tc_error(err, TC_EUSAGE, "logs: --tail must be a number of lines, not '%s'", optarg);
			break;
		case 'f': o.follow = true; break;
		case 's': supervisor = true; break;
		case 'T': o.timestamps = true; break;
		case 'M': o.merge = true; break;
		case 'h': fputs(logs_usage, stdout); return 0;
		default: return cmd_bad_option("logs", "r:n:fh", argc, argv, opts, err);
		}
	}
	if (optind + 1 != argc)
		return tc_error(err, TC_EUSAGE, "logs: give one job");
	/* --timestamps and --merge read what is written */
	if (o.follow && (o.timestamps || o.merge))
		return tc_error(err, TC_EUSAGE, "logs: %s reads the logs written so far: not with -f",
				o.merge ? "--merge" : "--timestamps");
	struct job_source *src = NULL;
	struct source_job j = { 0 };
	int rc = cmd_source_open(ctx->home, server, argc, argv, &src, err);
	if (!rc)
		rc = source_job(src, argv[optind], &j, err);
	if (rc)
		goto out;
	if (supervisor) {
		struct sbuf text = SBUF_INIT;
		rc = src->ops->supervisor_log(src, &j, &text, err);
		if (!rc)
			fwrite(text.buf, 1, text.len, stdout);
		sbuf_release(&text);
		goto out;
	}
	if ((rc = cmd_check_rank("logs", j.id, o.rank, j.world_size, err)))
		goto out;
	bool none = false;
	rc = src->ops->logs(src, &j, &o, stdout, &none, err);
	if (!rc && none)
		rc = explain_none(j.id, j.state, j.ended, err);
out:
	source_job_release(&j);
	source_close(src);
	return rc;
}
