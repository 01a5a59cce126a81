/* cmd_run.c -- `trainctl run SPEC` or `trainctl run [--nproc N] -- CMD...` */
#include "cmd/cmd.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "backend/backend.h"
#include "launch/launch.h"
#include "secret/secret.h"
#include "spec/spec.h"
#include "storage/storage.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
	"usage: trainctl run [options] SPEC.yaml\n"
	"   or: trainctl run --resume JOB [options] [SPEC.yaml]\n"
	"   or: trainctl run [options] -- COMMAND [ARGS...]\n"
	"\n"
	"Options may come before or after SPEC.yaml; everything after -- is the command.\n"
	"\n"
	"      --set KEY=VALUE   override a spec key by its dotted path (repeatable;\n"
	"                        args.lr=0.1, devices.per_node=4; docs/spec.md)\n"
	"      --nproc N|all     workers on this node (ad hoc runs; default 1)\n"
	"  -d, --device TYPE     device type for ad hoc runs (default cpu)\n"
	"      --name NAME       job name\n"
	"      --max-restarts N  restart the group up to N times on failure\n"
	"  -q, --quiet           only errors, warnings and the result line on the console\n"
	"                        (worker output stays in the logs)\n"
	"      --no-metrics      do not read metrics from the workers' output\n"
	"      --raw             echo metric lines as printed; on a terminal they are\n"
	"                        otherwise shown as one progress line per rank\n"
	"      --backend NAME    local (this machine) or slurm (sbatch + srun; docs/slurm.md)\n"
	"      --resume JOB      a new run continuing JOB from its newest complete checkpoint\n"
	"                        (JOB's own spec unless SPEC is given)\n"
	"\n"
	"torchrun's spellings are read as trainctl's: --nproc-per-node and --nproc_per_node\n"
	"as --nproc, --max_restarts as --max-restarts, --nnodes N as --set nodes=N, and\n"
	"--standalone as nothing (one node is the default); its --rdzv-*, --master-*\n"
	"and --node-rank are refused with what to write instead.\n";

/*
 * The local store holds every {secret:} the spec names: a misspelt name is
 * refused now, with the closest one, not found by the supervisor (exit 3).
 */
static int check_secrets(const struct spec *s, const char *home, struct tc_err *err)
{
	char *dir = secret_local_dir(home);
	char *missing = secret_missing(s, dir);
	int rc = 0;
	if (missing)
		rc = tc_error(err, TC_ESPEC, "env: you have no secret %s (trainctl secret set NAME)",
			      missing);
	free(missing);
	free(dir);
	return rc;
}

/*
 * outputs.upload_to has credentials here (the spec's plain AWS_* and OBS_*
 * values first, as the supervisor sets them), and its endpoint answers: a
 * missing credential is refused now, an endpoint out of reach a warning
 * (storage_check_location says why).  A spec that brings its credentials
 * as {secret:} or {file:} values is checked when they are resolved.
 */
static int check_upload(const struct spec *s, struct tc_err *err)
{
	if (!s->upload_to)
		return 0;
	for (size_t i = 0; i < s->nenv; i++) {
		const char *k = s->env[i].key;
		if (strncmp(k, "AWS_", 4) && strncmp(k, "OBS_", 4))
			continue;
		if (s->env[i].from != ENV_FROM_VALUE)
			return 0;
		if (s->env[i].val && setenv(k, s->env[i].val, 1) < 0)
			return tc_error_errno(err, TC_ESYS, "setenv %s", k);
	}
	struct sbuf warning = SBUF_INIT;
	int rc = storage_check_location(s->upload_to, &warning, err);
	if (rc)
		tc_error_prefix(err, "outputs.upload_to");
	else if (warning.len)
		fprintf(stderr, "trainctl: warning: outputs.upload_to: %s\n", warning.buf);
	sbuf_release(&warning);
	return rc;
}

int cmd_run(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	static const struct option opts[] = {
		{ "nproc", required_argument, NULL, 'n' },
		{ "device", required_argument, NULL, 'd' },
		{ "name", required_argument, NULL, 'N' },
		{ "max-restarts", required_argument, NULL, 'r' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "no-metrics", no_argument, NULL, 'M' },
		{ "raw", no_argument, NULL, 'W' },
		{ "resume", required_argument, NULL, 'R' },
		{ "backend", required_argument, NULL, 'B' },
		{ "set", required_argument, NULL, 's' },
		CMD_OPT_HELP,
		/* torchrun's spellings that mean the same here (docs/spec.md, "From torchrun") */
		{ "nproc-per-node", required_argument, NULL, 'n' },
		{ "nproc_per_node", required_argument, NULL, 'n' },
		{ "max_restarts", required_argument, NULL, 'r' },
		{ "nnodes", required_argument, NULL, 'U' },
		{ "standalone", no_argument, NULL, 'S' },
		CMD_OPT_END,
	};
	struct strvec sets = STRVEC_INIT;
	const char *nnodes = NULL;
	const char *nproc = NULL, *device = NULL, *name = NULL, *restarts = NULL;
	const char *resume_job = NULL, *backend = NULL;
	char *resume_path = NULL, *resume_spec = NULL;
	struct launch_opts lo = { .home = ctx->home };
	int c, rc;
	/* options anywhere before --; after it, the command's own */
	int dashdash = cmd_dashdash(argc, argv);
	optind = 1;
	while ((c = getopt_long(dashdash, argv, "d:qh", opts, NULL)) != -1) {
		switch (c) {
		case 'n': nproc = optarg; break;
		case 'd': device = optarg; break;
		case 'N': name = optarg; break;
		case 'r': restarts = optarg; break;
		case 'q': lo.quiet = lo.brief = true; break;
		case 'M': lo.no_metrics = true; break;
		case 'W': lo.raw = true; break;
		case 'R': resume_job = optarg; break;
		case 'B': backend = optarg; break;
		case 'U': nnodes = optarg; break;
		case 'S': break; /* one node, its own rendezvous: what run does anyway */
		case 's':
			if ((rc = spec_set_check(optarg, err))) {
				strvec_clear(&sets);
				return rc;
			}
			strvec_push(&sets, optarg);
			break;
		case 'h': strvec_clear(&sets); fputs(usage, stdout); return 0;
		default:
			strvec_clear(&sets);
			return cmd_bad_option("run", "d:qh", argc, argv, opts, err);
		}
	}
	bool adhoc = dashdash < argc;
	/* torchrun's --nnodes N is the spec's nodes: N; elastic ranges are not */
	if (nnodes && strcmp(nnodes, "1") != 0) {
		if (strchr(nnodes, ':')) {
			rc = tc_error(err, TC_EUSAGE,
				      "run: --nnodes %s: an elastic range (torchrun's MIN:MAX) is not"
				      " supported: give a node count",
				      nnodes);
			goto sets_out;
		}
		if (adhoc) {
			rc = tc_error(err, TC_EUSAGE,
				      "run: --nnodes %s: ad hoc runs are one node; write a spec with"
				      " nodes: %s and --backend slurm (docs/slurm.md)",
				      nnodes, nnodes);
			goto sets_out;
		}
		struct sbuf set = SBUF_INIT;
		sbuf_addf(&set, "nodes=%s", nnodes);
		if ((rc = spec_set_check(set.buf, err))) {
			sbuf_release(&set);
			goto sets_out;
		}
		strvec_push(&sets, set.buf);
		sbuf_release(&set);
	}
	/* the spec file, before --; the command, after it */
	int nfiles = dashdash - optind;
	struct spec *s = NULL;
	if (adhoc && nfiles > 0) {
		rc = tc_error(err, TC_EUSAGE, "run: one spec file, or use -- before a command");
		goto sets_out;
	}
	if (adhoc)
		optind = dashdash + 1;
	if (adhoc && optind >= argc) {
		rc = tc_error(err, TC_EUSAGE, "run: give a spec file or -- COMMAND");
		goto sets_out;
	}
	if (!adhoc && nfiles <= 0 && !resume_job) {
		rc = tc_error(err, TC_EUSAGE, "run: give a spec file or -- COMMAND");
		goto sets_out;
	}
	if (adhoc && sets.nr) {
		rc = tc_error(err, TC_EUSAGE, "run: --set needs a spec file (ad hoc runs take --nproc, --device, --name)");
		goto sets_out;
	}
	if (resume_job) {
		if (adhoc) {
			rc = tc_error(err, TC_EUSAGE, "run: --resume takes JOB's spec or a spec file, not a command");
			goto sets_out;
		}
		struct sbuf report = SBUF_INIT;
		rc = launch_resume_point(ctx->home, resume_job, &resume_path, &resume_spec, &report, err);
		for (char *line = report.buf, *nl; (nl = strchr(line, '\n')); line = nl + 1)
			fprintf(stderr, "trainctl: %.*s\n", (int)(nl - line), line);
		sbuf_release(&report);
		if (rc)
			goto resume_out;
	}
	if (!adhoc) {
		if (nfiles > 1 || (nfiles <= 0 && !resume_spec)) {
			rc = tc_error(err, TC_EUSAGE, "run: one spec file, or use -- before a command");
			goto resume_out;
		}
		if (nproc || device) {
			rc = tc_error(err, TC_EUSAGE, "run: --nproc and --device are for ad hoc runs; set devices: in the spec");
			goto resume_out;
		}
		if ((rc = spec_load_set(nfiles > 0 ? argv[optind] : resume_spec, backend, &sets, &s,
					err)))
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
			rc = tc_error(err, TC_EUSAGE, "run: --nproc must be 1..1024 or 'all', not '%s'", nproc);
			goto sets_out;
		}
		s->per_node = (int)n;
		if ((rc = spec_finish(s, err))) {
			spec_free(s);
			goto sets_out;
		}
	}
	if (restarts) {
		long r;
		if (!parse_long(restarts, 0, 1000, &r)) {
			spec_free(s);
			rc = tc_error(err, TC_EUSAGE, "run: --max-restarts must be 0..1000");
			goto resume_out;
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
	} else if ((rc = backend_prepare(be, s, err))) {
		/* refused before anything is recorded or submitted */
	} else if (be != &backend_local ||
		   (!(rc = spec_check_command(s, err)) && !(rc = check_secrets(s, ctx->home, err)) &&
		    !(rc = check_upload(s, err)))) {
		/* slurm: the program is the nodes' question, not this machine's */
		rc = be->run(s, &lo, &job_id, &ctx->exit_status, err);
	}
	free(job_id);
	spec_free(s);
resume_out:
	free(resume_path);
	free(resume_spec);
sets_out:
	strvec_clear(&sets);
	return rc;
}
