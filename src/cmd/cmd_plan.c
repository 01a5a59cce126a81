/* cmd_plan.c -- `trainctl plan`: synth, partition, eval, strategy (plan/plan.h). */
#include "cmd/cmd.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "plan/plan.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage_text[] =
	"usage: trainctl plan synth --graph-size G --num-split S [--count N] [--seed X] [-o FILE]\n"
	"       trainctl plan partition FILE [--objective train|pipeline] [--micro-batches B] [--format json|table] [-o FILE]\n"
	"       trainctl plan eval FILE [--against PARTITIONS] [--objective ...] [--micro-batches B] [--format text|json]\n"
	"       trainctl plan strategy --model NAME|FILE --devices N [--nodes N] --global-batch N\n"
	"                              [--cluster FILE] [--memory SIZE] [--seq-len N] [--top N] [--format table|json]\n";

enum { O_G = 1 << 0, O_S = 1 << 1, O_N = 1 << 2, O_SEED = 1 << 3, O_OUT = 1 << 4, O_OBJ = 1 << 5,
       O_B = 1 << 6, O_FMT = 1 << 7, O_AG = 1 << 8, O_MODEL = 1 << 9, O_DEV = 1 << 10,
       O_NODES = 1 << 11, O_GB = 1 << 12, O_CL = 1 << 13, O_MEM = 1 << 14, O_SEQ = 1 << 15,
       O_TOP = 1 << 16 };

static const struct option opts[] = {
	{ "graph-size", required_argument, NULL, O_G }, { "num-split", required_argument, NULL, O_S },
	{ "seed", required_argument, NULL, O_SEED }, { "objective", required_argument, NULL, O_OBJ },
	{ "micro-batches", required_argument, NULL, O_B }, { "format", required_argument, NULL, O_FMT },
	{ "against", required_argument, NULL, O_AG }, { "model", required_argument, NULL, O_MODEL },
	{ "devices", required_argument, NULL, O_DEV }, { "nodes", required_argument, NULL, O_NODES },
	{ "global-batch", required_argument, NULL, O_GB }, { "cluster", required_argument, NULL, O_CL },
	{ "memory", required_argument, NULL, O_MEM }, { "seq-len", required_argument, NULL, O_SEQ },
	{ "top", required_argument, NULL, O_TOP }, { "output", required_argument, NULL, O_OUT },
	{ "count", required_argument, NULL, O_N },
	CMD_OPT_HELP, CMD_OPT_END,
};

static const struct sub {
	const char *name;
	int allowed, needs_file;
} subs[] = {
	{ "synth", O_G | O_S | O_N | O_SEED | O_OUT, 0 },
	{ "partition", O_OBJ | O_B | O_FMT | O_OUT, 1 },
	{ "eval", O_OBJ | O_B | O_FMT | O_AG, 1 },
	{ "strategy", O_MODEL | O_DEV | O_NODES | O_GB | O_CL | O_MEM | O_SEQ | O_TOP | O_FMT, 0 },
};

static int num(const char *flag, const char *v, long min, long max, long *out, struct tc_err *err)
{
	if (!parse_long(v, min, max, out))
		return tc_error(err, TC_EUSAGE, "--%s: '%s' is not an integer in [%ld, %ld]", flag, v, min, max);
	return 0;
}

/*
 * -o FILE, written whole or not at all: into a hidden name beside FILE,
 * renamed over it only when everything was written (a bad instance half
 * way leaves FILE as it was).  No FILE or "-": standard output.
 */
struct outfile {
	FILE *f;
	char *path, *tmp;
};

static int outfile_open(struct outfile *o, const char *path, struct tc_err *err)
{
	memset(o, 0, sizeof(*o));
	if (!path || !strcmp(path, "-")) {
		o->f = stdout;
		return 0;
	}
	char *dir = path_dirname(path);
	struct sbuf tmp = SBUF_INIT;
	sbuf_addf(&tmp, "%s/.%s.tmp-%ld", dir, path_basename(path), (long)getpid());
	free(dir);
	o->f = fopen(tmp.buf, "w");
	if (!o->f) {
		int rc = tc_error_errno(err, TC_EINPUT, "cannot create '%s'", path);
		sbuf_release(&tmp);
		return rc;
	}
	o->path = xstrdup(path);
	o->tmp = sbuf_detach(&tmp);
	return 0;
}

/* Finish what rc says: rename into place after a success, else remove. */
static int outfile_close(struct outfile *o, int rc, struct tc_err *err)
{
	if (o->f == stdout || !o->f)
		return rc;
	if (fclose(o->f) != 0 && !rc)
		rc = tc_error_errno(err, TC_ESYS, "cannot write '%s'", o->path);
	if (!rc && rename(o->tmp, o->path) != 0)
		rc = tc_error_errno(err, TC_ESYS, "cannot rename into '%s'", o->path);
	if (rc)
		(void)unlink(o->tmp); /* best effort: nothing half written stays */
	free(o->tmp);
	free(o->path);
	o->f = NULL;
	return rc;
}

int cmd_plan(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	(void)ctx;
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(usage_text, argc < 2 ? stderr : stdout);
		return argc < 2 ? tc_error(err, TC_EUSAGE, "plan: which subcommand?") : 0;
	}
	const struct sub *sub = NULL;
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
		if (!strcmp(argv[1], subs[i].name))
			sub = &subs[i];
	if (!sub)
		return tc_error(err, TC_EUSAGE, "plan: unknown subcommand '%s' (synth, partition, eval, strategy)", argv[1]);

	long g = -1, s = -1, n = 1000, seed = 1234, b = 0, dev = 0, nodes = 0, gb = 0, seq = 0, top = 10;
	const char *out = NULL, *fmt = NULL, *against = NULL, *model = NULL, *cluster = NULL;
	double mem = 0;
	enum plan_objective obj = PLAN_OBJ_TRAIN;
	int seen = 0, c, rc = 0;
	optind = 0;
	while ((c = getopt_long(argc - 1, argv + 1, "o:h", opts, NULL)) != -1) {
		int bit = c == 'o' ? O_OUT : c;
		if (c == 'h') {
			fputs(usage_text, stdout);
			return 0;
		}
		if (c == '?') {
			char cmd[32];
			snprintf(cmd, sizeof(cmd), "plan %s", sub->name);
			if (optopt == 'n' && !(sub->allowed & O_N)) /* --count is synth's alone */
				return tc_error(err, TC_EUSAGE, "%s: unknown option '-n' (see trainctl"
						" plan --help)", cmd);
			return cmd_bad_option(cmd, "o:h", argc - 1, argv + 1, opts, err);
		}
		if (!(bit & sub->allowed)) {
			const char *on = "output";
			for (const struct option *o = opts; o->name; o++)
				if (o->val == bit)
					on = o->name;
			return tc_error(err, TC_EUSAGE, "plan %s: option --%s does not apply", sub->name, on);
		}
		seen |= bit;
		switch (bit) {
		case O_G: rc = num("graph-size", optarg, 1, 100000, &g, err); break;
		case O_S: rc = num("num-split", optarg, 0, 100000, &s, err); break;
		case O_N: rc = num("count", optarg, 0, 1000000000, &n, err); break;
		case O_SEED: rc = num("seed", optarg, 0, 0x7fffffffffffffffL, &seed, err); break;
		case O_B: rc = num("micro-batches", optarg, 1, 1000000000, &b, err); break;
		case O_DEV: rc = num("devices", optarg, 1, 1000000, &dev, err); break;
		case O_NODES: rc = num("nodes", optarg, 1, 100000, &nodes, err); break;
		case O_GB: rc = num("global-batch", optarg, 1, 1000000000, &gb, err); break;
		case O_SEQ: rc = num("seq-len", optarg, 1, 10000000, &seq, err); break;
		case O_TOP: rc = num("top", optarg, 0, 1000000, &top, err); break;
		case O_OUT: out = optarg; break;
		case O_FMT: fmt = optarg; break;
		case O_AG: against = optarg; break;
		case O_MODEL: model = optarg; break;
		case O_CL: cluster = optarg; break;
		case O_MEM:
			if (!plan_parse_size(optarg, &mem) || mem <= 0)
				rc = tc_error(err, TC_EUSAGE, "--memory: '%s' is not a size like 80GiB", optarg);
			break;
		case O_OBJ:
			if (!strcmp(optarg, "train") || !strcmp(optarg, "pipeline"))
				obj = optarg[0] == 't' ? PLAN_OBJ_TRAIN : PLAN_OBJ_PIPELINE;
			else
				rc = tc_error(err, TC_EUSAGE, "--objective: '%s' is not train or pipeline", optarg);
			break;
		}
		if (rc)
			return rc;
	}
	int nargs = argc - 1 - optind;
	char **args = argv + 1 + optind;
	if (nargs != sub->needs_file)
		return tc_error(err, TC_EUSAGE, "plan %s: %s", sub->name,
				sub->needs_file ? "needs one instance file" : "takes no file argument");
	bool json = fmt && !strcmp(fmt, "json"), table = fmt && !strcmp(fmt, "table");
	if (fmt && !json && !table && strcmp(fmt, "text"))
		return tc_error(err, TC_EUSAGE, "--format: '%s' is not json, table or text", fmt);
	if ((seen & O_B) && obj != PLAN_OBJ_PIPELINE)
		return tc_error(err, TC_EUSAGE, "--micro-batches applies to --objective pipeline");

	if (!strcmp(sub->name, "synth")) {
		if (g < 0 || s < 0)
			return tc_error(err, TC_EUSAGE, "plan synth: --graph-size and --num-split are required");
		struct outfile of;
		if ((rc = outfile_open(&of, out, err)))
			return rc;
		rc = plan_synth_write(of.f, (int)g, (int)s, n, (uint64_t)seed, err);
		return outfile_close(&of, rc, err);
	}
	if (!strcmp(sub->name, "partition")) {
		/* instances are read and solved one by one: stdout stops at the first bad one */
		struct outfile of;
		if ((rc = outfile_open(&of, out, err)))
			return rc;
		rc = plan_partition_file(args[0], obj, b, table, of.f, err);
		return outfile_close(&of, rc, err);
	}
	if (!strcmp(sub->name, "eval")) {
		struct plan_eval_opts eo = { obj, b, against, NULL };
		struct plan_eval e;
		if ((rc = plan_eval_file(args[0], &eo, &e, err)))
			return rc;
		plan_eval_print(&e, obj, json, stdout);
		return 0;
	}
	if (!model || !gb || (!dev && !cluster))
		return tc_error(err, TC_EUSAGE, "plan strategy: --model, --global-batch and --devices (or --cluster) are required");
	struct plan_strategy_req req = { model, (int)dev, (int)nodes, gb, cluster, mem, (int)seq };
	struct plan_strategy *st = NULL;
	if ((rc = plan_strategy_search(&req, &st, err)))
		return rc;
	plan_strategy_print(st, (int)top, json, stdout);
	plan_strategy_free(st);
	return 0;
}
