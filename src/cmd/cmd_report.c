/* cmd_report.c -- `trainctl report JOB [--out DIR] [--single-server] [--tester URL] [--json]` */
#include "backend/backend.h"
#include "cmd/cmd.h"
#include "core/json.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "report/report.h"
#include "store/store.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
	"usage: trainctl report JOB [options]\n"
	"\n"
	"Write report.json and the Ais-Bench files (aisbench/) of a job.\n"
	"  -o, --out DIR       where to write them (default: the job's run folder)\n"
	"      --single-server per-server Ais-Bench files; throughput averaged over servers\n"
	"      --tester URL    POST report.json to a tester (exit 3 when it cannot be reached)\n"
	"      --tries N       POST attempts (default 3)\n"
	"      --json          print the report instead of a summary\n";

/* label, then v with prec decimals (-1: %.6g, as show prints metric values) and unit */
static void print_num(const char *label, json_t *v, int prec, const char *unit)
{
	if (!json_is_number(v))
		printf("%-12s -\n", label);
	else if (prec < 0)
		printf("%-12s %.6g%s\n", label, json_number_value(v), unit);
	else
		printf("%-12s %.*f%s\n", label, prec, json_number_value(v), unit);
}

static void print_summary(json_t *r, const char *dir)
{
	json_t *t = json_object_get(r, "throughput");
	printf("%-12s %s/report.json, %s/aisbench/\n", "written", dir, dir);
	printf("%-12s %s (%s)\n", "job", json_string_value(json_object_get(r, "job")),
	       json_string_value(json_object_get(r, "state")));
	print_num("throughput", json_object_get(t, "total"), 1, " samples/s"); /* as show */
	size_t i;
	json_t *x;
	json_array_foreach(json_object_get(t, "per_rank"), i, x) {
		struct sbuf l = SBUF_INIT;
		sbuf_addf(&l, "  rank %lld", (long long)json_integer_value(json_object_get(x, "rank")));
		print_num(l.buf, json_object_get(x, "throughput"), 1, " samples/s");
		sbuf_release(&l);
	}
	json_t *a = json_object_get(r, "accuracy");
	if (json_is_string(json_object_get(a, "metric")))
		print_num("accuracy", json_object_get(a, "value"), -1, "");
	const char *names[] = { "staging", "training", "upload", "total" };
	for (size_t k = 0; k < 4; k++)
		print_num(names[k], json_object_get(json_object_get(json_object_get(r, "phases"), names[k]), "seconds"), 1, " s");
	printf("%-12s %lld\n", "restarts", (long long)json_integer_value(json_object_get(r, "restarts")));
	json_t *d = json_object_get(r, "devices");
	print_num("utilization", json_object_get(d, "utilization_avg"), 1, " %");
	print_num("power avg", json_object_get(d, "power_avg_w"), 1, " W");
	print_num("power peak", json_object_get(d, "power_peak_w"), 1, " W");
	print_num("energy", json_object_get(d, "energy_j"), 0, " J");
}

int cmd_report(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	static const struct option opts[] = {
		{ "out", required_argument, NULL, 'o' },
		{ "single-server", no_argument, NULL, 'S' },
		{ "tester", required_argument, NULL, 'T' },
		{ "tries", required_argument, NULL, 'n' },
		CMD_OPT_JSON,
		CMD_OPT_HELP,
		CMD_OPT_END,
	};
	const char *out_dir = NULL, *tester = NULL;
	bool single = false, as_json = false;
	long tries = 3;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		if (cmd_common_flag(c, &as_json, NULL))
			continue;
		switch (c) {
		case 'o': out_dir = optarg; break;
		case 'S': single = true; break;
		case 'T': tester = optarg; break;
		case 'n':
			if (!parse_long(optarg, 1, 100, &tries))
				return tc_error(err, TC_EUSAGE, "report: --tries must be 1..100, not '%s'", optarg);
			break;
		case 'h': fputs(usage, stdout); return 0;
		default: return cmd_bad_option("report", "o:h", argc, argv, opts, err);
		}
	}
	if (optind + 1 != argc)
		return tc_error(err, TC_EUSAGE, "report: give one job");
	if (tester && strncmp(tester, "http://", 7) && strncmp(tester, "https://", 8))
		return tc_error(err, TC_EUSAGE, "report: --tester takes an http:// or https:// URL, not '%s'", tester);
	struct store *st = NULL;
	struct job_row j = { 0 };
	json_t *r = NULL;
	char *dir = NULL, *body = NULL;
	struct sbuf log = SBUF_INIT;
	int rc = store_open(ctx->home, &st, err);
	if (!rc)
		rc = store_job_get(st, argv[optind], &j, err);
	if (!rc)
		rc = backend_reconcile(st, &j, err);
	if (!rc)
		rc = report_build(st, &j, single, &r, err);
	if (rc)
		goto out;
	dir = out_dir ? path_absolute(out_dir, NULL) : xstrdup(j.run_dir);
	if ((rc = report_write(r, dir, err)))
		goto out;
	if (as_json) {
		char *t = json_dumps_shortest(r, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		if (!t || fputs(t, stdout) == EOF)
			rc = tc_error(err, TC_ESYS, "report: cannot write the JSON");
		free(t);
		fputc('\n', stdout);
	} else {
		print_summary(r, dir);
	}
	if (tester && !rc) {
		body = json_dumps(r, JSON_COMPACT | JSON_PRESERVE_ORDER);
		rc = body ? report_post(tester, body, (int)tries, &log, err)
			  : tc_error(err, TC_ESYS, "report: cannot encode the report");
		fputs(log.buf, stderr);
		if (rc)
			tc_error_prefix(err, "report: not sent (it is in %s/report.json)", dir);
	}
out:
	free(body);
	free(dir);
	sbuf_release(&log);
	json_decref(r);
	job_row_release(&j);
	store_close(st);
	return rc;
}
