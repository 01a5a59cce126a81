/* cmd_metrics.c -- `trainctl metrics JOB [--name M] [--rank R] [--format F] [--points N]` */
#include "cmd/cmd.h"
#include "core/enc.h"
#include "core/json.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "metrics/query.h"
#include "source/source.h"

#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
	"usage: trainctl metrics JOB [--name METRIC] [--rank R] [--format table|csv|json] [--points N]\n"
	"                           [--server URL]\n"
	"\n"
	"      --name METRIC   only this metric (e.g. train.loss)\n"
	"  -r, --rank R        only rank R\n"
	"  -o, --format F      table (default), csv or json\n"
	"  -p, --points N      at most N points per series, keeping spikes (for charts)\n"
	"      --server URL    the job of this server ($TRAINCTL_SERVER)\n"
	"\n"
	"STEP is the step the job logged when it is one number (step 10), else the\n"
	"rank's count of step lines (seq); LOGGED is the step as written.\n";

enum fmt { F_TABLE, F_CSV, F_JSON };

struct out {
	enum fmt fmt;
	struct sbuf line;
	size_t n;
	int metric_width; /* table: the METRIC column, as wide as the longest name */
};

static void add_value(struct sbuf *sb, const struct store_mpoint *p, bool json)
{
	if (p->text && json)
		sbuf_adds(sb, "null");
	else if (p->text)
		sbuf_adds(sb, p->text);
	else if (isnan(p->value))
		sbuf_adds(sb, json ? "\"NaN\"" : "NaN");
	else if (isinf(p->value))
		sbuf_adds(sb, p->value > 0 ? (json ? "\"Infinity\"" : "Infinity")
					   : (json ? "\"-Infinity\"" : "-Infinity"));
	else
		json_add_number(sb, p->value); /* 0.05, not 0.050000000000000003 */
}

void cmd_add_csv(struct sbuf *sb, const char *s)
{
	csv_add(sb, s);
}

static void print_point(void *data, const struct metrics_point *pt)
{
	struct out *o = data;
	const struct store_mpoint *p = pt->p;
	struct sbuf *sb = &o->line;
	sbuf_reset(sb);
	if (o->fmt == F_JSON) {
		sbuf_adds(sb, o->n ? ",\n  {\"metric\": " : "  {\"metric\": ");
		json_add_str(sb, pt->metric);
		sbuf_addf(sb, ", \"rank\": %d, \"kind\": \"%s\", \"x\": %lld, \"seq\": %lld,"
			  " \"epoch\": %lld, \"iter\": %lld, \"step\": ", pt->rank, pt->kind,
			  store_mpoint_x(p), p->seq, p->epoch, p->iter);
		json_add_str(sb, p->step);
		sbuf_adds(sb, ", \"value\": ");
		add_value(sb, p, true);
		if (p->text) {
			sbuf_adds(sb, ", \"text\": ");
			json_add_str(sb, p->text);
		}
		sbuf_adds(sb, ", \"wall_time\": ");
		json_add_number(sb, p->wall_time);
		sbuf_addch(sb, '}');
	} else if (o->fmt == F_CSV) {
		cmd_add_csv(sb, pt->metric);
		sbuf_addf(sb, ",%d,%s,%lld,%lld,%lld,", pt->rank, pt->kind, p->seq, p->epoch, p->iter);
		cmd_add_csv(sb, p->step);
		sbuf_addch(sb, ',');
		struct sbuf v = SBUF_INIT;
		add_value(&v, p, false);
		cmd_add_csv(sb, v.buf);
		sbuf_release(&v);
		sbuf_addf(sb, ",%.6f,%lld\n", p->wall_time, store_mpoint_x(p));
	} else {
		sbuf_addf(sb, "%-*s %4d %-7s %7lld  %-18s ", o->metric_width, pt->metric, pt->rank,
			  pt->kind, store_mpoint_x(p), p->step);
		if (p->text)
			add_value(sb, p, false);
		else
			sbuf_addf(sb, "%.6g", p->value);
		sbuf_addch(sb, '\n');
	}
	fwrite(sb->buf, 1, sb->len, stdout);
	o->n++;
}

/* The width of the table's METRIC column: 24, or the longest name the job logged. */
static int metric_width(struct job_source *src, const char *job, const char *name)
{
	size_t w = 24;
	if (name)
		return (int)(strlen(name) > w ? strlen(name) : w);
	struct sbuf names = SBUF_INIT;
	struct tc_err e = TC_ERR_INIT;
	if (src->ops->metric_names(src, job, &names, &e) == 0) {
		json_t *root = json_loadb(names.buf, names.len, 0, NULL);
		json_t *series = json_object_get(root, "series"), *one;
		size_t i;
		json_array_foreach(series, i, one) {
			const char *m = json_string_value(json_object_get(one, "metric"));
			if (m && strlen(m) > w)
				w = strlen(m);
		}
		json_decref(root);
	}
	tc_err_release(&e); /* the points query reports a broken store */
	sbuf_release(&names);
	return w > 200 ? 200 : (int)w;
}

/*
 * --name before any output: 0 when the job has that metric (on that rank),
 * else a usage error naming the closest name and the names it has.
 */
static int check_name(struct job_source *src, const char *id, const char *name, int rank,
		      struct tc_err *err)
{
	struct sbuf text = SBUF_INIT, hint = SBUF_INIT, all = SBUF_INIT;
	int rc = src->ops->metric_names(src, id, &text, err);
	json_t *o = rc ? NULL : json_loadb(text.buf, text.len, 0, NULL);
	json_t *series = json_object_get(o, "series"), *one;
	const char *best = NULL, *prev = NULL;
	size_t best_d = 4, i, names = 0;
	bool on_other_rank = false, found = false;
	json_array_foreach(series, i, one) {
		const char *m = json_string_value(json_object_get(one, "metric"));
		if (!m)
			continue;
		if (!strcmp(m, name)) {
			int r = (int)json_integer_value(json_object_get(one, "rank"));
			if (rank < 0 || r == rank)
				found = true;
			on_other_rank = true;
		}
		if (prev && !strcmp(prev, m))
			continue; /* series come by metric, then rank */
		prev = m;
		sbuf_addf(&all, "%s%s", names++ ? ", " : "", m);
		size_t d = edit_distance(m, name);
		if (d < best_d && d <= strlen(name) / 2) {
			best_d = d;
			best = m;
		}
	}
	if (rc || found)
		goto out;
	if (on_other_rank)
		sbuf_addf(&hint, " on rank %d", rank);
	else if (best)
		sbuf_addf(&hint, " (did you mean '%s'?)", best);
	if (!names)
		sbuf_adds(&hint, "; it has no stored metrics (`trainctl show` says why)");
	else
		sbuf_addf(&hint, "; it has: %s%s%s%s", all.buf, best ? "" : " (`trainctl show ",
			  best ? "" : id, best ? "" : "` summarises them)");
	rc = tc_error(err, TC_EUSAGE, "metrics: job %s has no metric '%s'%s", id, name, hint.buf);
out:
	json_decref(o);
	sbuf_release(&text);
	sbuf_release(&hint);
	sbuf_release(&all);
	return rc;
}

int cmd_metrics(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	static const struct option opts[] = {
		{ "name", required_argument, NULL, 'n' },
		{ "rank", required_argument, NULL, 'r' },
		{ "format", required_argument, NULL, 'o' },
		{ "points", required_argument, NULL, 'p' },
		CMD_OPT_SERVER,
		CMD_OPT_HELP,
		CMD_OPT_END,
	};
	const char *name = NULL, *server = NULL;
	long rank = -1, points = 0;
	struct out o = { F_TABLE, SBUF_INIT, 0, 24 };
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "r:o:p:h", opts, NULL)) != -1) {
		if (cmd_common_flag(c, NULL, &server))
			continue;
		switch (c) {
		case 'n': name = optarg; break;
		case 'r':
			if (!parse_long(optarg, 0, 1 << 20, &rank))
				return tc_error(err, TC_EUSAGE, "metrics: --rank must be a rank number, not '%s'", optarg);
			break;
		case 'o':
			if (!strcmp(optarg, "table"))
				o.fmt = F_TABLE;
			else if (!strcmp(optarg, "csv"))
				o.fmt = F_CSV;
			else if (!strcmp(optarg, "json"))
				o.fmt = F_JSON;
			else
				return tc_error(err, TC_EUSAGE, "metrics: --format is table, csv or json, not '%s'", optarg);
			break;
		case 'p':
			if (!parse_long(optarg, 1, 1L << 30, &points))
				return tc_error(err, TC_EUSAGE, "metrics: --points must be a positive number, not '%s'", optarg);
			break;
		case 'h': fputs(usage, stdout); return 0;
		default: return cmd_bad_option("metrics", "r:o:p:h", argc, argv, opts, err);
		}
	}
	if (optind + 1 != argc)
		return tc_error(err, TC_EUSAGE, "metrics: give one job");
	struct job_source *src = NULL;
	struct source_job j = { 0 };
	struct store_mseries *v = NULL;
	size_t nv = 0, count = 0;
	int rc = cmd_source_open(ctx->home, server, argc, argv, &src, err);
	if (!rc)
		rc = source_job(src, argv[optind], &j, err);
	if (!rc)
		rc = cmd_check_rank("metrics", j.id, rank, j.world_size, err);
	if (!rc && name)
		rc = check_name(src, j.id, name, (int)rank, err);
	if (!rc)
		rc = src->ops->metric_series(src, j.id, name, (int)rank, &v, &nv, err);
	if (rc)
		goto out;
	if (o.fmt == F_JSON)
		fputs("[\n", stdout);
	else if (o.fmt == F_CSV)
		fputs("metric,rank,kind,seq,epoch,iter,step,value,wall_time,x\n", stdout);
	else {
		o.metric_width = metric_width(src, j.id, name);
		printf("%-*s %4s %-7s %7s  %-18s %s\n", o.metric_width, "METRIC", "RANK", "KIND", "STEP",
		       "LOGGED", "VALUE");
	}
	metrics_series_points(v, nv, (size_t)points, print_point, &o, &count);
	if (o.fmt == F_JSON)
		fputs(o.n ? "\n]\n" : "]\n", stdout);
out:
	sbuf_release(&o.line);
	store_mseries_free(v, nv);
	source_job_release(&j);
	source_close(src);
	return rc;
}
