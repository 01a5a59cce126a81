/*
 * summary.c -- per-metric statistics, goals, throughput and downsampling for
 * charts; pure functions over values (see metrics.h).
 */
#include "metrics/metrics.h"

#include <ctype.h>
#include <math.h>
#include <string.h>
#include <strings.h>

/* Case-insensitive substring test. */
static bool contains_ci(const char *hay, const char *needle)
{
	size_t n = strlen(needle);
	for (; *hay; hay++)
		if (!strncasecmp(hay, needle, n))
			return true;
	return false;
}

/* Name fragments of metrics where higher is better; everything else is
 * minimised (loss, error, perplexity, time, memory, lr...). */
static const char *const maximize_words[] = {
	"acc", "ips", "throughput", "speed", "map", "bleu", "f1", "auc", "top1", "top5",
	"samples_per", "tokens_per", "per_sec", "precision", "recall", "dice", "iou",
};

enum metrics_goal metrics_goal_of(const char *name, const char *meta_goal)
{
	if (meta_goal && !strcasecmp(meta_goal, "MAXIMIZE"))
		return METRICS_MAXIMIZE;
	if (meta_goal && !strcasecmp(meta_goal, "MINIMIZE"))
		return METRICS_MINIMIZE;
	if (!name)
		return METRICS_MINIMIZE;
	/* "loss" wins over the word list: "loss_scale_speedup" is odd, but
	 * "val.loss_map" must not be maximised */
	if (contains_ci(name, "loss") || contains_ci(name, "error") || contains_ci(name, "time"))
		return METRICS_MINIMIZE;
	for (size_t i = 0; i < sizeof(maximize_words) / sizeof(maximize_words[0]); i++)
		if (contains_ci(name, maximize_words[i]))
			return METRICS_MAXIMIZE;
	return METRICS_MINIMIZE;
}

bool metrics_is_ips_name(const char *name)
{
	static const char *const suffixes[] = { ".ips", "_ips", ".speed", "_speed",
						".throughput", "_throughput" };
	size_t n = strlen(name);
	if (!strcasecmp(name, "ips") || !strcasecmp(name, "speed") ||
	    !strcasecmp(name, "throughput"))
		return true;
	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		size_t k = strlen(suffixes[i]);
		if (n > k && !strcasecmp(name + n - k, suffixes[i]))
			return true;
	}
	return false;
}

void metrics_stat_init(struct metrics_stat *st, enum metrics_goal goal)
{
	memset(st, 0, sizeof(*st));
	st->goal = goal;
	st->last = st->best = st->min = st->max = NAN;
}

void metrics_stat_add(struct metrics_stat *st, double v)
{
	size_t idx = st->n++;
	st->last = v;
	if (!isfinite(v))
		return;
	if (!st->n_finite++) {
		st->min = st->max = st->best = v;
		st->best_index = idx;
		st->sum = v;
		return;
	}
	st->sum += v;
	if (v < st->min)
		st->min = v;
	if (v > st->max)
		st->max = v;
	/* strict: the first of equal best values is the best */
	if (st->goal == METRICS_MAXIMIZE ? v > st->best : v < st->best) {
		st->best = v;
		st->best_index = idx;
	}
}

double metrics_stat_mean(const struct metrics_stat *st)
{
	return st->n_finite ? st->sum / (double)st->n_finite : NAN;
}

void metrics_stat_series(struct metrics_stat *st, enum metrics_goal goal, const double *v,
			 size_t n)
{
	metrics_stat_init(st, goal);
	for (size_t i = 0; i < n; i++)
		metrics_stat_add(st, v[i]);
}

double metrics_tput_from_ips(const double *ips, size_t n, size_t warmup)
{
	double sum = 0;
	size_t k = 0;
	for (size_t i = warmup; i < n; i++)
		if (isfinite(ips[i])) {
			sum += ips[i];
			k++;
		}
	return k ? sum / (double)k : NAN;
}

double metrics_tput_from_steptime(const double *ms, size_t n, size_t warmup, double batch)
{
	double sum = 0;
	size_t k = 0;
	if (!(batch > 0))
		return NAN;
	for (size_t i = warmup; i < n; i++)
		if (isfinite(ms[i]) && ms[i] > 0) {
			sum += ms[i];
			k++;
		}
	return k ? batch * 1000.0 / (sum / (double)k) : NAN;
}

double metrics_tput_from_times(const double *t, size_t n, size_t warmup, double batch)
{
	size_t w = warmup ? warmup : 1;
	if (!(batch > 0) || n <= w)
		return NAN;
	double span = t[n - 1] - t[w - 1];
	if (!isfinite(span) || span <= 0)
		return NAN;
	return (double)(n - w) * batch / span;
}

double metrics_tput_job(const double *per_rank, size_t nranks)
{
	double sum = 0;
	size_t k = 0;
	for (size_t i = 0; i < nranks; i++)
		if (isfinite(per_rank[i])) {
			sum += per_rank[i];
			k++;
		}
	return k ? sum : NAN;
}

/* ---- downsampling (M4: first, last, min, max per x slice) -------------- */

static size_t slice_of(double x, double x0, double width, size_t buckets, size_t floor_b)
{
	double f = width > 0 ? (x - x0) / width : 0;
	size_t b = f <= 0 ? 0 : f >= (double)buckets ? buckets - 1 : (size_t)f;
	return b < floor_b ? floor_b : b;
}

size_t metrics_downsample(const struct metrics_xy *in, size_t n, size_t buckets,
			  struct metrics_xy *out)
{
	size_t first = n, last = 0, nout = 0;
	if (!buckets)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (isfinite(in[i].x) && isfinite(in[i].y)) {
			if (first == n)
				first = i;
			last = i;
		}
	if (first == n)
		return 0;
	double x0 = in[first].x, x1 = in[last].x;
	double width = (x1 - x0) / (double)buckets;

	/* Slices are numbered in input order and never go back, even if x
	 * does: so there are at most `buckets` groups of at most 4 points,
	 * whatever the input. */
	size_t i = first, b = 0;
	while (i <= last) {
		if (!isfinite(in[i].x) || !isfinite(in[i].y)) {
			i++;
			continue;
		}
		b = slice_of(in[i].x, x0, width, buckets, b);
		size_t f = i, l = i, lo = i, hi = i;
		size_t j = i + 1;
		for (; j <= last; j++) {
			if (!isfinite(in[j].x) || !isfinite(in[j].y))
				continue;
			if (slice_of(in[j].x, x0, width, buckets, b) != b)
				break;
			l = j;
			if (in[j].y < in[lo].y)
				lo = j;
			if (in[j].y > in[hi].y)
				hi = j;
		}
		/* emit the (up to 4) distinct indexes in input order */
		size_t idx[4] = { f, lo, hi, l };
		for (int a = 1; a < 4; a++)
			for (int c = a; c > 0 && idx[c] < idx[c - 1]; c--) {
				size_t t = idx[c];
				idx[c] = idx[c - 1];
				idx[c - 1] = t;
			}
		for (int a = 0; a < 4; a++)
			if (a == 0 || idx[a] != idx[a - 1])
				out[nout++] = in[idx[a]];
		i = j;
	}
	return nout;
}
