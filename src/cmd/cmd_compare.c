/*
 * cmd_compare.c -- `trainctl compare JOB_A JOB_B [--metric M] [--rtol R] [--mean]`,
 * and with more jobs or --sweep SWEEP a table of them by step range.
 */
#include "cmd/cmd.h"
#include "compare/compare.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/strvec.h"
#include "core/xalloc.h"
#include "source/source.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
	"usage: trainctl compare JOB_A JOB_B [options]\n"
	"   or: trainctl compare JOB_A JOB_B JOB_C... [options]\n"
	"   or: trainctl compare --sweep SWEEP [options]\n"
	"\n"
	"JOB_A is the reference (e.g. the CUDA run); exit 0 aligned, 1 not.\n"
	"With more jobs, or a sweep's trials (the best one is the reference), a\n"
	"table of each job's mean per step range and its difference from the\n"
	"reference's.\n"
	"      --sweep SWEEP the trials of a sweep (metric: its objective's)\n"
	"      --ranges N    rows of the many-job table (default 10)\n"
	"  -m, --metric M    metric to compare (default train.loss)\n"
	"  -r, --rank R      rank whose series is compared (default 0)\n"
	"      --rtol X      relative tolerance (default 0.01 = 1%)\n"
	"      --atol X      absolute tolerance where the reference is 0 (default 1e-8)\n"
	"      --mean        judge the mean relative error instead of the maximum\n"
	"      --steps       print every step, not only the summary\n"
	"      --json        the comparison as JSON (every step included)\n"
	"      --server URL  the jobs of this server ($TRAINCTL_SERVER)\n";

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

/* "A".."Z", then "#27"...: a column's short name */
static void label(struct sbuf *sb, size_t i)
{
	if (i < 26)
		sbuf_addch(sb, (char)('A' + i));
	else
		sbuf_addf(sb, "#%zu", i + 1);
}

static void put_trimmed(struct sbuf *line)
{
	while (line->len && line->buf[line->len - 1] == ' ')
		line->buf[--line->len] = '\0';
	puts(line->buf);
}

static void print_many(const struct compare_many *c, bool steps)
{
	struct sbuf line = SBUF_INIT;
	for (size_t i = 0; i < c->njobs; i++) {
		sbuf_reset(&line);
		label(&line, i);
		printf("%-10s %s = %s%s%s%s\n", i ? (i == 1 ? "compared" : "") : "reference", line.buf,
		       c->ids[i], c->names[i] ? " (" : "", c->names[i] ? c->names[i] : "",
		       c->names[i] ? ")" : "");
	}
	printf("metric     %s (rank %d, %s records), %zu steps in %zu ranges\n\n", c->metric, c->rank,
	       c->kind, c->a.nsteps, c->nr);
	sbuf_reset(&line);
	sbuf_addf(&line, "  %-24s", "STEPS");
	for (size_t j = 0; j < c->njobs; j++) {
		struct sbuf l = SBUF_INIT;
		label(&l, j);
		sbuf_addf(&line, " %-*s", j ? 22 : 12, l.buf);
		sbuf_release(&l);
	}
	put_trimmed(&line);
	for (size_t i = 0; i < c->nr; i++) {
		const struct compare_range *r = &c->r[i];
		struct sbuf st = SBUF_INIT;
		if (r->first == r->last)
			sbuf_adds(&st, c->a.step[r->first]);
		else
			sbuf_addf(&st, "%s .. %s", c->a.step[r->first], c->a.step[r->last]);
		sbuf_reset(&line);
		sbuf_addf(&line, "  %-24s", st.buf);
		sbuf_release(&st);
		for (size_t j = 0; j < c->njobs; j++) {
			double v = r->mean[j], ref = r->mean[0];
			struct sbuf cell = SBUF_INIT;
			if (isfinite(v))
				sbuf_addf(&cell, "%.6g", v);
			else
				sbuf_adds(&cell, "-");
			if (j && isfinite(v) && isfinite(ref) && ref != 0)
				sbuf_addf(&cell, " (%+.2f%%)", 100 * (v - ref) / fabs(ref));
			sbuf_addf(&line, " %-*s", j ? 22 : 12, cell.buf);
			sbuf_release(&cell);
		}
		put_trimmed(&line);
	}
	if (steps) {
		printf("\n  %-24s\n", "STEP");
		for (size_t s = 0; s < c->a.nsteps; s++) {
			sbuf_reset(&line);
			sbuf_addf(&line, "  %-24s", c->a.step[s]);
			for (size_t j = 0; j < c->njobs; j++) {
				double v = c->a.v[s * c->njobs + j];
				if (isfinite(v))
					sbuf_addf(&line, " %-*.6g", j ? 22 : 12, v);
				else
					sbuf_addf(&line, " %-*s", j ? 22 : 12, "-");
			}
			put_trimmed(&line);
		}
	}
	sbuf_release(&line);
}

/* The trials of a sweep that have a job, best first (sweep_show_json's order). */
static int sweep_jobs(struct job_source *src, const char *ref, struct strvec *jobs, char **metric,
		      struct tc_err *err)
{
	json_t *o = NULL;
	int rc = src->ops->sweep_json(src, ref, &o, err);
	if (rc)
		return rc;
	size_t i;
	json_t *t;
	json_array_foreach(json_object_get(o, "trials"), i, t) {
		const char *job = json_string_value(json_object_get(t, "job"));
		if (job && json_integer_value(json_object_get(t, "steps")) > 0)
			strvec_push(jobs, job);
	}
	*metric = xstrdup(json_string_value(json_object_get(o, "metric")));
	if (jobs->nr < 2)
		rc = tc_error(err, TC_EINPUT, "compare: sweep %s has %zu trial%s with values of %s; two are needed",
			      json_string_value(json_object_get(o, "id")), jobs->nr, jobs->nr == 1 ? "" : "s",
			      *metric);
	json_decref(o);
	return rc;
}

static int compare_many_cmd(struct job_source *src, const struct compare_job_opts *o, const char *sweep,
			    char **refs, size_t nrefs, size_t ranges, bool steps, bool as_json,
			    bool metric_given, struct tc_err *err)
{
	struct strvec jobs = STRVEC_INIT;
	char *metric = NULL;
	int rc = 0;
	if (sweep)
		rc = sweep_jobs(src, sweep, &jobs, &metric, err);
	for (size_t i = 0; !rc && i < nrefs; i++)
		strvec_push(&jobs, refs[i]);
	if (rc)
		goto out;
	struct compare_many_opts mo = { metric && !metric_given ? metric : o->metric, o->rank, ranges };
	struct compare_many cm = { 0 };
	rc = compare_many_jobs(src, (const char *const *)jobs.v, jobs.nr, &mo, &cm, err);
	if (!rc && as_json) {
		json_t *j = compare_many_json(&cm);
		if (json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) < 0)
			rc = tc_error(err, TC_ESYS, "compare: cannot write the JSON");
		fputc('\n', stdout);
		json_decref(j);
	} else if (!rc) {
		print_many(&cm, steps);
	}
	compare_many_release(&cm);
out:
	free(metric);
	strvec_clear(&jobs);
	return rc;
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
		{ "steps", no_argument, NULL, 'T' },
		CMD_OPT_JSON,
		{ "sweep", required_argument, NULL, 'W' },
		{ "ranges", required_argument, NULL, 'G' },
		CMD_OPT_SERVER,
		CMD_OPT_HELP,
		CMD_OPT_END,
	};
	struct compare_job_opts o = { "train.loss", 0, { 0.01, 1e-8, false } };
	bool steps = false, as_json = false, metric_given = false;
	const char *sweep = NULL, *server = NULL;
	long rank, ranges = 10;
	int c, rc;
	optind = 1;
	while ((c = getopt_long(argc, argv, "m:r:h", opts, NULL)) != -1) {
		if (cmd_common_flag(c, &as_json, &server))
			continue;
		switch (c) {
		case 'm': o.metric = optarg; metric_given = true; break;
		case 'W': sweep = optarg; break;
		case 'G':
			if (!parse_long(optarg, 1, 1000, &ranges))
				return tc_error(err, TC_EUSAGE, "compare: --ranges must be 1..1000, not '%s'", optarg);
			break;
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
		case 'T': steps = true; break;
		case 'h': fputs(usage, stdout); return 0;
		default: return cmd_bad_option("compare", "m:r:h", argc, argv, opts, err);
		}
	}
	struct job_source *src = NULL;
	struct compare_jobs cj = { 0 };
	if (sweep || argc - optind > 2) {
		rc = cmd_source_open(ctx->home, server, argc, argv, &src, err);
		if (!rc)
			rc = compare_many_cmd(src, &o, sweep, argv + optind, (size_t)(argc - optind),
					      (size_t)ranges, steps, as_json, metric_given, err);
		source_close(src);
		return rc;
	}
	if (optind + 2 != argc)
		return tc_error(err, TC_EUSAGE, "compare: give two jobs: the reference, then the candidate");
	rc = cmd_source_open(ctx->home, server, argc, argv, &src, err);
	if (!rc)
		rc = compare_jobs(src, argv[optind], argv[optind + 1], &o, &cj, err);
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
	source_close(src);
	return rc;
}
