/* cmd_ckpt.c -- `trainctl ckpt list|inspect|transform` (docs/checkpoints.md) */
#include "ckpt/ckpt.h"
#include "cmd/cmd.h"
#include "core/util.h"
#include "cmd/client.h"
#include "source/source.h"
#include "store/store.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage[] =
	"usage: trainctl ckpt list JOB|DIR [--server URL]\n"
	"   or: trainctl ckpt list --nodes JOB   (each node's own disk: multi-node jobs via a hub)\n"
	"   or: trainctl ckpt inspect [--json] FILE.safetensors|FILE.pt\n"
	"   or: trainctl ckpt transform --src DIR --src-strategy S.json --dst DIR --dst-strategy D.json\n"
	"                               [--threads N] [--quiet]\n";

static const char *const layouts[] = { "flat", "ranked", "mindformers", "folder" };

/* An epoch for a table: "-" where the checkpoint carries none (-1). */
static const char *epoch_cell(long long epoch, char buf[24])
{
	if (epoch < 0)
		return "-";
	snprintf(buf, 24, "%lld", epoch);
	return buf;
}

static int list_dir(const char *dir, struct tc_err *err)
{
	struct ckpt_set set;
	int rc = ckpt_scan(dir, 0, false, &set, err);
	if (rc)
		return rc;
	printf("%-10s %-6s %-11s %-9s %5s %14s  %s\n", "STEP", "EPOCH", "LAYOUT", "STATE", "FILES",
	       "BYTES", "NAME");
	for (size_t i = 0; i < set.nr; i++) {
		const struct ckpt *c = &set.v[i];
		char eb[24];
		printf("%-10lld %-6s %-11s %-9s %5zu %14llu  %s\n", c->step, epoch_cell(c->epoch, eb),
		       layouts[c->layout], c->complete ? "complete" : "partial", c->nfiles,
		       (unsigned long long)c->bytes, c->name ? c->name : "");
	}
	if (set.have_meta)
		printf("meta.json: every rank has reached epoch %lld, step %lld\n", set.meta_epoch,
		       set.meta_step);
	ckpt_set_release(&set);
	return 0;
}

/* A job's checkpoints, from its job source (this machine's store or a server's). */
static int list_job(struct job_source *src, const char *ref, struct tc_err *err)
{
	struct source_job job = { 0 };
	struct store_ckpt *rows = NULL;
	size_t n = 0;
	int rc = source_job(src, ref, &job, err);
	if (!rc)
		rc = src->ops->checkpoints(src, job.id, &rows, &n, err);
	if (!rc) {
		printf("%-10s %-6s %-9s %5s %14s %-8s  %s\n", "STEP", "EPOCH", "STATE", "FILES", "BYTES",
		       "CRC32C", "PATH");
		for (size_t i = 0; i < n; i++) {
			char eb[24];
			printf("%-10lld %-6s %-9s %5lld %14lld %-8s  %s/%s\n", rows[i].step,
			       epoch_cell(rows[i].epoch, eb), rows[i].state, rows[i].nfiles, rows[i].bytes,
			       rows[i].checksum, rows[i].dir, rows[i].name);
		}
		if (!n)
			printf("job %s has recorded no complete checkpoint\n", job.id);
	}
	store_ckpt_free(rows, n);
	source_job_release(&job);
	return rc;
}

/* --nodes: what each node recorded of its own disk (store_ckpt_node_list). */
static int list_nodes(const char *home, const char *ref, struct tc_err *err)
{
	struct store *st = NULL;
	struct job_row job = { 0 };
	struct store_ckpt *rows = NULL;
	int *nodes = NULL;
	size_t n = 0;
	int rc = store_open_read(home, &st, err); /* a read: on a full disk too */
	if (!rc)
		rc = store_job_get(st, ref, &job, err);
	if (!rc)
		rc = store_ckpt_node_list(st, job.id, &rows, &nodes, &n, err);
	if (!rc) {
		printf("%-5s %-10s %-6s %-9s %5s %14s %-8s  %s\n", "NODE", "STEP", "EPOCH", "STATE",
		       "FILES", "BYTES", "CRC32C", "PATH");
		for (size_t i = 0; i < n; i++) {
			char eb[24];
			printf("%-5d %-10lld %-6s %-9s %5lld %14lld %-8s  %s/%s\n", nodes[i], rows[i].step,
			       epoch_cell(rows[i].epoch, eb), rows[i].state, rows[i].nfiles, rows[i].bytes,
			       rows[i].checksum, rows[i].dir, rows[i].name);
		}
		if (!n)
			printf("job %s: no node recorded a checkpoint of its own disk\n", job.id);
	}
	store_ckpt_free(rows, n);
	free(nodes);
	job_row_release(&job);
	store_close(st);
	return rc;
}

static int inspect(int argc, char **argv, struct tc_err *err)
{
	bool json = false;
	int i = 1;
	if (i < argc && !strcmp(argv[i], "--json")) {
		json = true;
		i++;
	}
	if (i + 1 != argc)
		return tc_error(err, TC_EUSAGE, "ckpt inspect: give one .safetensors or torch .pt file");
	struct sbuf out = SBUF_INIT;
	int rc = ckpt_inspect(argv[i], json, &out, err);
	if (!rc)
		fwrite(out.buf, 1, out.len, stdout);
	sbuf_release(&out);
	return rc;
}

/* The progress line of a transform, on a terminal: written so far, share, speed. */
struct progress {
	double t0;
	bool open;  /* a line without its newline is on the terminal */
};

static void show_progress(void *arg, uint64_t done, uint64_t total)
{
	struct progress *p = arg;
	double dt = now_wall() - p->t0;
	struct sbuf line = SBUF_INIT;
	sbuf_adds(&line, "\r");
	format_bytes(&line, (double)done);
	sbuf_adds(&line, " of ");
	format_bytes(&line, (double)total);
	sbuf_addf(&line, " written (%.0f%%), ", total ? 100.0 * (double)done / (double)total : 100.0);
	format_bytes(&line, dt > 0 ? (double)done / dt : 0);
	sbuf_adds(&line, "/s\033[K");
	p->open = done < total;
	if (!p->open)
		sbuf_addch(&line, '\n');
	fwrite(line.buf, 1, line.len, stderr);
	fflush(stderr);
	sbuf_release(&line);
}

static int transform(int argc, char **argv, struct tc_err *err)
{
	static const struct option opts[] = {
		{ "src", required_argument, NULL, 's' },
		{ "src-strategy", required_argument, NULL, 'S' },
		{ "dst", required_argument, NULL, 'd' },
		{ "dst-strategy", required_argument, NULL, 'D' },
		{ "threads", required_argument, NULL, 't' },
		{ "quiet", no_argument, NULL, 'q' },
		CMD_OPT_END,
	};
	struct transform_opts o = { 0 };
	struct progress prog = { now_wall(), false };
	/* a progress line on a terminal; piped, the summary alone */
	if (isatty(STDERR_FILENO)) {
		o.progress = show_progress;
		o.progress_arg = &prog;
	}
	int c;
	long n;
	optind = 1;
	while ((c = getopt_long(argc, argv, "q", opts, NULL)) != -1) {
		switch (c) {
		case 's': o.src_dir = optarg; break;
		case 'S': o.src_strategy = optarg; break;
		case 'd': o.dst_dir = optarg; break;
		case 'D': o.dst_strategy = optarg; break;
		case 't':
			if (!parse_long(optarg, 1, 256, &n))
				return tc_error(err, TC_EUSAGE, "ckpt transform: --threads must be 1..256");
			o.threads = (int)n;
			break;
		case 'q': o.progress = NULL; break;
		default: return cmd_bad_option("ckpt transform", "q", argc, argv, opts, err);
		}
	}
	if (!o.src_dir || !o.src_strategy || !o.dst_dir || !o.dst_strategy || optind != argc)
		return tc_error(err, TC_EUSAGE,
				"ckpt transform: --src, --src-strategy, --dst and --dst-strategy are required");
	struct transform_stats st;
	int rc = ckpt_transform(&o, &st, err);
	if (prog.open)
		fputc('\n', stderr); /* a failed transform's message starts on its own line */
	if (!rc) {
		struct sbuf bytes = SBUF_INIT, rate = SBUF_INIT;
		format_bytes(&bytes, (double)st.bytes_written);
		format_bytes(&rate, st.seconds > 0 ? (double)st.bytes_written / st.seconds : 0.0);
		printf("%llu tensors, %s written in %.2f s (%s/s)\n", (unsigned long long)st.tensors,
		       bytes.buf, st.seconds, rate.buf);
		sbuf_release(&bytes);
		sbuf_release(&rate);
	}
	return rc;
}

static int list_cmd(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	static const struct option opts[] = {
		{ "nodes", no_argument, NULL, 'N' },
		CMD_OPT_SERVER,
		CMD_OPT_HELP,
		CMD_OPT_END,
	};
	const char *server = NULL;
	bool nodes = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (cmd_common_flag(c, NULL, &server))
			continue;
		switch (c) {
		case 'N': nodes = true; break;
		case 'h': fputs(usage, stdout); return 0;
		default: return cmd_bad_option("ckpt list", "h", argc, argv, opts, err);
		}
	}
	if (optind + 1 != argc)
		return tc_error(err, TC_EUSAGE, "ckpt list: give a job or a folder");
	const char *what = argv[optind];
	bool remote = server || client_configured(argc, argv);
	if (nodes && remote)
		return tc_error(err, TC_EUSAGE, "ckpt list: --nodes reads this machine's store: not through a server");
	if (nodes)
		return list_nodes(ctx->home, what, err);
	if (!remote && is_dir(what))
		return list_dir(what, err);
	struct job_source *src = NULL;
	int rc = cmd_source_open(ctx->home, server, argc, argv, &src, err);
	if (!rc)
		rc = list_job(src, what, err);
	source_close(src);
	return rc;
}

int cmd_ckpt(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? tc_error(err, TC_EUSAGE, "ckpt: give a subcommand") : 0;
	}
	const char *sub = argv[1];
	if (!strcmp(sub, "list"))
		return list_cmd(argc - 1, argv + 1, ctx, err);
	if (!strcmp(sub, "inspect"))
		return inspect(argc - 1, argv + 1, err);
	if (!strcmp(sub, "transform"))
		return transform(argc - 1, argv + 1, err);
	return tc_error(err, TC_EUSAGE, "ckpt: '%s' is not a subcommand (list, inspect, transform)", sub);
}
