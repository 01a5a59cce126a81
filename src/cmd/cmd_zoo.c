/* cmd_zoo.c -- `trainctl zoo check|test|new`: ModelZoo conventions (zoo/zoo.h) */
#include "cmd/cmd.h"
#include "core/sbuf.h"
#include "core/strvec.h"
#include "core/util.h"
#include "zoo/zoo.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
	"usage: trainctl zoo check MODEL_DIR [--python PY]\n"
	"   or: trainctl zoo test model.yaml [--root DIR] [--junit FILE] [--python PY] [--verbose]\n"
	"   or: trainctl zoo new NAME [DIR]\n"
	"\n"
	"  check   the folder structure and the run file's arguments (exit 0 conforms, 1 not)\n"
	"  test    per case: the check, then `cd run_dir && PY run_file --key value ...` as a job;\n"
	"          passes on exit 0 with train.loss and train.ips in the logs (exit 1 if any fails)\n"
	"  new     a conforming model folder DIR/NAME to start from (DIR default .)\n"
	"\n"
	"  --python PY   interpreter for run files (default $TRAINCTL_PYTHON, else python3)\n"
	"  --root DIR    where run_dir paths start (default: the folder of model.yaml)\n"
	"  --junit FILE  also write the results as JUnit XML\n"
	"  --verbose     copy the workers' output to the console\n";

static void progress(void *ctx, const char *line)
{
	(void)ctx;
	fprintf(stderr, "zoo: %s\n", line);
}

static int do_check(const char *dir, const char *python, struct cmd_ctx *ctx, struct tc_err *err)
{
	struct strvec problems = STRVEC_INIT;
	int rc = zoo_check(dir, python, &problems, err);
	if (!rc) {
		if (!problems.nr)
			printf("%s: conforms\n", dir);
		else
			printf("%s: %zu problem%s\n", dir, problems.nr, problems.nr == 1 ? "" : "s");
		for (size_t i = 0; i < problems.nr; i++)
			printf("  - %s\n", problems.v[i]);
		ctx->exit_status = problems.nr ? 1 : 0;
	}
	strvec_clear(&problems);
	return rc;
}

static int do_test(const char *yaml, const char *root, const char *junit, const char *python,
		   bool verbose, struct cmd_ctx *ctx, struct tc_err *err)
{
	struct zoo_case *cases = NULL;
	struct zoo_result *res = NULL;
	size_t n = 0;
	int rc = zoo_cases_load(yaml, root, &cases, &n, err);
	if (rc)
		return rc;
	struct zoo_test_opts o = { ctx->home, python, !verbose, progress, NULL };
	rc = zoo_test(&o, cases, n, &res, err);
	if (!rc) {
		struct sbuf out = SBUF_INIT;
		zoo_results_table(res, n, &out);
		fputs(out.buf, stdout);
		size_t failed = 0;
		for (size_t i = 0; i < n; i++)
			failed += !res[i].passed;
		ctx->exit_status = failed ? 1 : 0;
		if (junit) {
			sbuf_reset(&out);
			zoo_junit_xml(yaml, res, n, &out);
			rc = write_file_atomic(junit, out.buf, out.len, err);
			if (rc)
				tc_error_prefix(err, "zoo test: --junit");
		}
		sbuf_release(&out);
	}
	zoo_results_free(res, n);
	zoo_cases_free(cases, n);
	return rc;
}

int cmd_zoo(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	static const struct option opts[] = {
		{ "python", required_argument, NULL, 'p' },
		{ "root", required_argument, NULL, 'r' },
		{ "junit", required_argument, NULL, 'j' },
		{ "verbose", no_argument, NULL, 'v' },
		CMD_OPT_HELP,
		CMD_OPT_END,
	};
	const char *python = getenv("TRAINCTL_PYTHON");
	const char *root = NULL, *junit = NULL;
	bool verbose = false;
	int c;
	if (!python || !*python)
		python = "python3";
	optind = 1;
	while ((c = getopt_long(argc, argv, "vh", opts, NULL)) != -1) {
		switch (c) {
		case 'p': python = optarg; break;
		case 'r': root = optarg; break;
		case 'j': junit = optarg; break;
		case 'v': verbose = true; break;
		case 'h': fputs(usage, stdout); return 0;
		default: return cmd_bad_option("zoo", "vh", argc, argv, opts, err);
		}
	}
	int nargs = argc - optind;
	const char *sub = nargs ? argv[optind] : "";
	if (strcmp(sub, "test") && (root || junit))
		return tc_error(err, TC_EUSAGE, "zoo: --root and --junit are for zoo test");
	if (!strcmp(sub, "check") && nargs == 2)
		return do_check(argv[optind + 1], python, ctx, err);
	if (!strcmp(sub, "test") && nargs == 2)
		return do_test(argv[optind + 1], root, junit, python, verbose, ctx, err);
	if (!strcmp(sub, "new") && (nargs == 2 || nargs == 3)) {
		char *made = NULL;
		int rc = zoo_new(argv[optind + 1], nargs == 3 ? argv[optind + 2] : ".", &made, err);
		if (!rc)
			printf("%s: written; check it with trainctl zoo check %s\n", made, made);
		free(made);
		return rc;
	}
	return tc_error(err, TC_EUSAGE, "zoo: give check MODEL_DIR, test model.yaml or new NAME [DIR]");
}
