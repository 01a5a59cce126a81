/* cmd_compare.c -- `trainctl compare JOB_A JOB_B [--metric M] [--rtol R] [--mean]` */
#include "cmd/cmd.h"
#include "compare/compare.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "store/store.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
	"usage: trainctl compare JOB_A JOB_B [options]\n"
	"\n"
	"JOB_A is the reference (e.g. the CUDA run); exit 0 aligned, 1 not.\n"
	"  -m, --metric M    metric to compare (default train.loss)\n"
	"  -r, --rank R      rank whose series is compared (default 0)\n"
	"      --rtol X      relative tolerance (default 0.01 = 1%)\n"
	"      --atol X      absolute tolerance where the reference is 0 (default 1e-8)\n"
	"      --mean        judge the mean relative error instead of the maximum\n"
	"      --steps       print every step, not only the summary\n"
	"      --json        the comparison as JSON (every step included)\n";

static void add_val(struct sbuf *sb, double v, bool present)
{
	if (!present)
		sbuf_addf(sb, "%-14s", "-");
	else
		sbuf_addf(sb, "%-14.8g", v);
}

static void print_text(const struct compare_jobs *c, const struct compare_opts *o, bool steps)
{
	const struct compare_result *r = &c->r;
	printf("reference  %s\ncandidate  %s\nmetric     %s (rank %d, %s records)\n", c->job_a,
	       c->job_b, c->metric, c->rank, c->kind);
	printf("steps      %zu compared, %zu only in the reference, %zu only in the candidate\n",
	       r->ncommon, r->only_a, r->only_b);
	if (steps) {
		struct sbuf line = SBUF_INIT;
		printf("\n  %-20s %-14s %-14s %-12s %s\n", "STEP", "REFERENCE", "CANDIDATE", "ERROR", "");
		for (size_t i = 0; i < r->nrows; i++) {
			const struct compare_row *w = &r->rows[i];
			sbuf_reset(&line);
			sbuf_addf(&line, "  %-20s ", w->step);
			add_val(&line, w->a, w->status != CMP_ONLY_B);
			sbuf_addch(&line, ' ');
			add_val(&line, w->b, w->status != CMP_ONLY_A);
			sbuf_addch(&line, ' ');
			if (w->status >= CMP_ONLY_A)
				sbuf_addf(&line, "%-12s %s", "-", w->status == CMP_ONLY_A ? "only in reference" : "only in candidate");
			else
				sbuf_addf(&line, "%-12.4e %s%s", w->err,
					  w->status == CMP_OK ? "ok" : w->status == CMP_OVER ? "OVER" : "NOT FINITE",
					  w->absolute ? " (absolute)" : "");
			puts(line.buf);
		}
		sbuf_release(&line);
		putchar('\n');
	}
	printf("max error  %.6g%s%s\n", r->max_err, r->max_step ? " at " : "",
	       r->max_step ? r->max_step : "");
	printf("mean error %.6g\n", r->mean_err);
	if (r->nabsolute)
		printf("absolute   %zu steps with a zero reference (atol %g)\n", r->nabsolute, o->atol);
	printf("tolerance  %g relative (%s error)\n", o->rtol, o->use_mean ? "mean" : "max");
	if (r->first_fail >= 0) {
		const struct compare_row *w = &r->rows[r->first_fail];
		printf("first fail %s (reference %.8g, candidate %.8g, %s)\n", w->step, w->a, w->b,
		       w->status == CMP_NONFINITE ? "not finite"
						  : w->absolute ? "absolute error over atol"
								: "relative error over rtol");
		printf("failing    %zu of %zu steps\n", r->nfail, r->ncommon);
	}
	printf("verdict    %s\n", r->aligned ? "aligned" : "NOT aligned");
}

static int tol_arg(const char *name, const char *s, double *out, struct tc_err *err)
{
	if (!parse_double(s, out) || !isfinite(*out) || *out < 0)
		return tc_error(err, TC_EUSAGE, "compare: %s must be a number >= 0, not '%s'", name, s);
	return 0;
}

int cmd_compare(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	static const struct option opts[] = {
		{ "metric", required_argument, NULL, 'm' },
		{ "rank", required_argument, NULL, 'r' },
		{ "rtol", required_argument, NULL, 'R' },
		{ "atol", required_argument, NULL, 'A' },
		{ "mean", no_argument, NULL, 'M' },
		{ "steps", no_argument, NULL, 'S' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct compare_job_opts o = { "train.loss", 0, { 0.01, 1e-8, false } };
	bool steps = false, as_json = false;
	long rank;
	int c, rc;
	optind = 1;
	while ((c = getopt_long(argc, argv, "m:r:h", opts, NULL)) != -1) {
		switch (c) {
		case 'm': o.metric = optarg; break;
		case 'r':
			if (!parse_long(optarg, 0, 1 << 20, &rank))
				return tc_error(err, TC_EUSAGE, "compare: --rank must be a rank number, not '%s'", optarg);
			o.rank = (int)rank;
			break;
		case 'R':
			if ((rc = tol_arg("--rtol", optarg, &o.o.rtol, err)))
				return rc;
			break;
		case 'A':
			if ((rc = tol_arg("--atol", optarg, &o.o.atol, err)))
				return rc;
			break;
		case 'M': o.o.use_mean = true; break;
		case 'S': steps = true; break;
		case 'j': as_json = true; break;
		case 'h': fputs(usage, stdout); return 0;
		default: return cmd_bad_option("compare", "m:r:h", argc, argv, opts, err);
		}
	}
	if (optind + 2 != argc)
		return tc_error(err, TC_EUSAGE, "compare: give two jobs: the reference, then the candidate");
	struct store *st = NULL;
	struct compare_jobs cj = { 0 };
	rc = store_open(ctx->home, &st, err);
	if (!rc)
		rc = compare_jobs(st, argv[optind], argv[optind + 1], &o, &cj, err);
	if (rc)
		goto out;
	if (as_json) {
		json_t *j = compare_jobs_json(&cj, &o.o);
		if (json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) < 0)
			rc = tc_error(err, TC_ESYS, "compare: cannot write the JSON");
		fputc('\n', stdout);
		json_decref(j);
	} else {
		print_text(&cj, &o.o, steps);
	}
	ctx->exit_status = cj.r.aligned ? 0 : 1;
out:
	compare_jobs_release(&cj);
	store_close(st);
	return rc;
}
