/* cmd_run.c -- `trainctl run SPEC` or `trainctl run [--nproc N] -- CMD...` */
#include "cmd/cmd.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "backend/backend.h"
#include "launch/launch.h"
#include "spec/spec.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
	"usage: trainctl run [options] SPEC.yaml\n"
	"   or: trainctl run --resume JOB [options] [SPEC.yaml]\n"
	"   or: trainctl run [options] -- COMMAND [ARGS...]\n"
	"\n"
	"      --nproc N|all     workers on this node (ad hoc runs; default 1)\n"
	"  -d, --device TYPE     device type for ad hoc runs (default cpu)\n"
	"      --name NAME       job name\n"
	"      --max-restarts N  restart the group up to N times on failure\n"
	"  -q, --quiet           only errors, warnings and the result line on the console\n"
	"                        (worker output stays in the logs)\n"
	"      --no-metrics      do not read metrics from the workers' output\n"
	"      --backend NAME    local (this machine) or slurm (sbatch + srun; docs/slurm.md)\n"
	"      --resume JOB      a new run continuing JOB from its newest complete checkpoint\n"
	"                        (JOB's own spec unless SPEC is given)\n";

int cmd_run(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	static const struct option opts[] = {
		{ "nproc", required_argument, NULL, 'n' },
		{ "device", required_argument, NULL, 'd' },
		{ "name", required_argument, NULL, 'N' },
		{ "max-restarts", required_argument, NULL, 'r' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "no-metrics", no_argument, NULL, 'M' },
		{ "resume", required_argument, NULL, 'R' },
		{ "backend", required_argument, NULL, 'B' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *nproc = NULL, *device = NULL, *name = NULL, *restarts = NULL;
	const char *resume_job = NULL, *backend = NULL;
	char *resume_path = NULL, *resume_spec = NULL;
	struct launch_opts lo = { .home = ctx->home };
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "+d:qh", opts, NULL)) != -1) {
		switch (c) {
		case 'n': nproc = optarg; break;
		case 'd': device = optarg; break;
		case 'N': name = optarg; break;
		case 'r': restarts = optarg; break;
		case 'q': lo.quiet = lo.brief = true; break;
		case 'M': lo.no_metrics = true; break;
		case 'R': resume_job = optarg; break;
		case 'B': backend = optarg; break;
		case 'h': fputs(usage, stdout); return 0;
		default: return tc_error(err, TC_EUSAGE, "run: bad option (see trainctl run --help)");
		}
	}
	bool adhoc = optind > 1 && !strcmp(argv[optind - 1], "--");
	if (optind >= argc && !resume_job)
		return tc_error(err, TC_EUSAGE, "run: give a spec file or -- COMMAND");
	struct spec *s = NULL;
	int rc;
	if (resume_job) {
		if (adhoc)
			return tc_error(err, TC_EUSAGE, "run: --resume takes JOB's spec or a spec file, not a command");
		struct sbuf report = SBUF_INIT;
		rc = launch_resume_point(ctx->home, resume_job, &resume_path, &resume_spec, &report, err);
		for (char *line = report.buf, *nl; (nl = strchr(line, '\n')); line = nl + 1)
			fprintf(stderr, "trainctl: %.*s\n", (int)(nl - line), line);
		sbuf_release(&report);
		if (rc)
			return rc;
	}
	if (!adhoc) {
		if (optind + 1 < argc || (optind >= argc && !resume_spec)) {
			rc = tc_error(err, TC_EUSAGE, "run: one spec file, or use -- before a command");
			goto resume_out;
		}
		if (nproc || device) {
			rc = tc_error(err, TC_EUSAGE, "run: --nproc and --device are for ad hoc runs; set devices: in the spec");
			goto resume_out;
		}
		if ((rc = spec_load_backend(optind < argc ? argv[optind] : resume_spec, backend, &s, err)))
			goto resume_out;
		if (resume_path) {
			s->resume = RESUME_PATH;
			free(s->resume_path);
			s->resume_path = resume_path;
			resume_path = NULL;
		}
		if (name) {
			free(s->name);
			s->name = xstrdup(name);
		}
	} else {
		s = xmalloc(sizeof(*s));
		spec_init(s);
		for (int i = optind; i < argc; i++)
			strvec_push(&s->argv, argv[i]);
		if (name)
			s->name = xstrdup(name);
		if (device) {
			free(s->device_type);
			s->device_type = xstrdup(device);
		}
		long n = 1;
		if (nproc && !strcmp(nproc, "all"))
			n = 0; /* spec_finish counts the devices */
		else if (nproc && !parse_long(nproc, 1, 1024, &n)) {
			spec_free(s);
			return tc_error(err, TC_EUSAGE, "run: --nproc must be 1..1024 or 'all', not '%s'", nproc);
		}
		s->per_node = (int)n;
		if ((rc = spec_finish(s, err))) {
			spec_free(s);
			return rc;
		}
	}
	if (restarts) {
		long r;
		if (!parse_long(restarts, 0, 1000, &r)) {
			spec_free(s);
			return tc_error(err, TC_EUSAGE, "run: --max-restarts must be 0..1000");
		}
		s->max_restarts = (int)r;
	}
	char *job_id = NULL;
	const struct backend_ops *be = backend_find(backend ? backend : s->backend);
	if (!be) {
		struct sbuf names = SBUF_INIT;
		backend_names_add(&names);
		rc = tc_error(err, TC_EUSAGE, "run: '%s' is not a backend (%s)", backend, names.buf);
		sbuf_release(&names);
	} else if (adhoc && be != &backend_local) {
		rc = tc_error(err, TC_EUSAGE, "run: backend %s needs a spec file", backend_name(be));
	} else if (be != &backend_local || !(rc = spec_check_command(s, err))) {
		/* slurm: the program is the nodes' question, not this machine's */
		rc = be->run(s, &lo, &job_id, &ctx->exit_status, err);
	}
	free(job_id);
	spec_free(s);
resume_out:
	free(resume_path);
	free(resume_spec);
	return rc;
}
