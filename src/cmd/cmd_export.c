/* cmd_export.c -- `trainctl export tb JOB DIR`: TensorBoard files of a stored job */
#include "cmd/cmd.h"
#include "core/util.h"
#include "metrics/ingest.h"
#include "source/source.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static const char usage[] =
	"usage: trainctl export tb JOB DIR [--server URL]\n"
	"\n"
	"Writes TensorBoard event files of JOB's stored metrics, one folder per\n"
	"rank (DIR/rank-<r>/events.out.tfevents.*); `tensorboard --logdir DIR`.\n";

int cmd_export(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	static const struct option opts[] = {
		CMD_OPT_SERVER,
		CMD_OPT_HELP,
		CMD_OPT_END,
	};
	const char *server = NULL;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (cmd_common_flag(c, NULL, &server))
			continue;
		switch (c) {
		case 'h': fputs(usage, stdout); return 0;
		default: return cmd_bad_option("export", "h", argc, argv, opts, err);
		}
	}
	if (optind >= argc || strcmp(argv[optind], "tb") != 0)
		return tc_error(err, TC_EUSAGE, "export: the only format is 'tb' (trainctl export tb JOB DIR)");
	if (optind + 3 != argc)
		return tc_error(err, TC_EUSAGE, "export: give a job and a directory (trainctl export tb JOB DIR)");
	struct job_source *src = NULL;
	struct source_job j = { 0 };
	struct store_mseries *v = NULL;
	size_t nv = 0, nfiles = 0, npoints = 0;
	int rc = cmd_source_open(ctx->home, server, argc, argv, &src, err);
	if (!rc)
		rc = source_job(src, argv[optind + 1], &j, err);
	if (!rc)
		rc = src->ops->metric_series(src, j.id, NULL, -1, &v, &nv, err);
	if (!rc)
		rc = metrics_export_tb_series(v, nv, argv[optind + 2], &nfiles, &npoints, err);
	if (!rc && !nfiles)
		rc = tc_error(err, TC_ENOTFOUND, "export: job %s has no stored metrics", j.id);
	if (!rc)
		printf("%zu point%s in %zu event file%s under %s\n", npoints, plural_s((long long)npoints),
		       nfiles, plural_s((long long)nfiles), argv[optind + 2]);
	store_mseries_free(v, nv);
	source_job_release(&j);
	source_close(src);
	return rc;
}
