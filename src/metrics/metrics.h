/*
 * metrics.h -- training metrics read from worker log lines: line parsers,
 * summary math and downsampling for charts.  Pure C, no I/O; the supervisor
 * feeds it lines, the store keeps the records.  The TensorBoard writer has its
 * own header (tfevents.h).
 *
 * Formats recognised (docs/metrics.md has examples of each):
 *   "DLLL {json}"            NVIDIA DLLogger JSON stream backend
 *   "DLL <time> - <step> k : v unit ..."   DLLogger stdout backend
 *   "TCAPPDLL {json}"        Tecorigin tcap_dllogger, data = Python-repr string
 *   "TCAPPDLL <time> - ..."  tcap_dllogger stdout form
 *   "... { Epoch:[ e/ E], step:[ s/ S], loss: ..."   MindFormers loss monitor
 *   "... { step:[ s/ S], loss: ..., throughput: 1.36T }"   its current shape
 * and, for any other output, the job's own regular expressions
 * (metrics.patterns:, the matcher at the end of this header).
 *
 * NOTES ON THE DESIGN
 * (1) One entry point, metrics_parse_line(), dispatches through a table of
 *     {prefix, parser}.  A line without a known prefix is rejected after a
 *     few byte compares and one memchr, with no allocation.
 * (2) A parsed line yields zero or more records, one per data key.  The
 *     records and every string they point to live in the parser and stay
 *     valid until the next metrics_parse_line() or metrics_parser_free() on
 *     that parser.  Copy what you keep.  Buffers are reused, so a parser that
 *     has warmed up allocates nothing for lines of a size it has seen.
 * (3) A parser is not thread-safe; use one per reading thread.
 * (4) Lines are (ptr, len); they need not be NUL-terminated, may contain NUL
 *     bytes and may be cut short by the caller (e.g. at 1 MiB): a cut line is
 *     reported MALFORMED or parsed as far as it goes, never a crash.
 *     A trailing "\n" or "\r\n" is ignored.
 * (5) Values: a JSON number, or a string that is wholly a number ("0.5",
 *     "nan", "-inf", "1e-05", Python's "tensor(2.3010, device='cuda:0')"),
 *     is numeric (has_value, str == NULL).  Booleans are numeric 1/0.  Any
 *     other string is kept in str (has_value false, value NaN).  JSON null /
 *     Python None values are dropped.  NaN and +-Inf are kept as such,
 *     including the bare JSON tokens NaN / Infinity / -Infinity that Python's
 *     json.dumps writes.  A nested list or object value is kept in str as
 *     written ("[0.9, 0.999]").  Strings "True"/"False"/"None" (Python's
 *     str() of those, as tcap_dllogger writes every value) count as 1/0/null.
 * (6) A data key named exactly "rank" with an integer value is not a record:
 *     it sets the rank of every record of that line.
 * (7) A key repeated within one line gives a record per occurrence, in
 *     order; repeated steps across lines are the caller's (each line stands
 *     alone).
 * (8) JSON is read by a small in-place reader (parse.c), not jansson: 3x
 *     faster (no tree per line) and it takes NaN/Infinity.  It is strict
 *     otherwise (a cut line is MALFORMED) and refuses nesting past 64 levels.
 */
#ifndef TC_METRICS_METRICS_H
#define TC_METRICS_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- records ---------------------------------------------------------- */

enum metrics_kind {
	METRICS_POINT = 0, /* a training step: step [e, i, ...], or a plain line */
	METRICS_EPOCH,     /* epoch summary: step [e] */
	METRICS_SUMMARY,   /* whole-run summary: step [] */
	METRICS_PARAMETER, /* hyper-parameter: step "PARAMETER" */
	METRICS_METADATA,  /* DLLogger METADATA: name = metric, key = field */
};

enum metrics_format {
	METRICS_FMT_DLLL = 0,      /* DLLL {json} */
	METRICS_FMT_DLL,           /* DLL ... (stdout backend) */
	METRICS_FMT_TCAP_JSON,     /* TCAPPDLL {json} */
	METRICS_FMT_TCAP_PLAIN,    /* TCAPPDLL ... (stdout form) */
	METRICS_FMT_MINDFORMERS,   /* { Epoch:[..], step:[..], ... */
	METRICS_FMT_PATTERN,       /* a line a job's metrics.patterns: matched */
	METRICS_FMT_TFEVENTS,      /* a scalar of a TensorBoard event file (tfread.h) */
};

struct metric_rec {
	enum metrics_kind kind;
	enum metrics_format format;
	int rank;          /* from the line, or -1: the caller knows the worker */
	long long epoch;   /* -1 when the line has none */
	long long iter;    /* iteration within the step, -1 when none */
	const char *step;  /* the step as written: "[0, 10]", "PARAMETER", "[]",
			      "Epoch: 0 Iteration: 10", "1/2 5/100"; never NULL */
	const char *name;  /* metric (or parameter) name; never NULL */
	const char *key;   /* METADATA only: "unit", "GOAL", ...; else NULL */
	bool has_value;    /* value is meaningful (may still be NaN/Inf) */
	double value;      /* NaN when !has_value */
	const char *str;   /* non-numeric value as text, else NULL */
	const char *unit;  /* unit written after the value ("imgs/s", "ms"), or NULL */
	double wall_time;  /* seconds since 1970 from the line, NaN when none:
			      the caller substitutes the time it read the line */
	double elapsed;    /* DLLogger elapsedtime in seconds, NaN when none */
};

enum metrics_result {
	METRICS_NONE = 0,       /* not a metrics line (the common case) */
	METRICS_PARSED = 1,     /* a metrics line; *nrecs may be 0 (empty data) */
	METRICS_MALFORMED = -1, /* has a metrics prefix but does not parse */
};

struct metrics_parser;

struct metrics_parser *metrics_parser_new(void);
void metrics_parser_free(struct metrics_parser *p);

/*
 * Parse one line.  On METRICS_PARSED, *recs and *nrecs hold the records (see
 * note 2 for their lifetime); otherwise *nrecs is 0.  On METRICS_MALFORMED,
 * metrics_parser_reason() says why, for the supervisor's log.
 */
/*
 * The length of the line's first record: up to where a second record marker
 * (TCAPPDLL, DLLL, DLL) starts inside it, as when workers sharing one stdout
 * ran two records together; len when there is none.  Feed each part to
 * metrics_parse_line() on its own.
 */
size_t metrics_first_record_len(const char *line, size_t len);

enum metrics_result metrics_parse_line(struct metrics_parser *p, const char *line,
				       size_t len, const struct metric_rec **recs,
				       size_t *nrecs);
const char *metrics_parser_reason(const struct metrics_parser *p);

const char *metrics_kind_name(enum metrics_kind k);     /* "point", ... */
const char *metrics_format_name(enum metrics_format f); /* "dlll", ... */

/*
 * Read a number the way the parsers do (note 5): whole text, surrounding
 * blanks allowed, nan/inf accepted, hex rejected.  s need not be terminated.
 */
bool metrics_parse_number(const char *s, size_t len, double *out);

/* ---- summary ---------------------------------------------------------- */

enum metrics_goal {
	METRICS_MINIMIZE = 0,
	METRICS_MAXIMIZE = 1,
};

/*
 * The goal of a metric: meta_goal (DLLogger METADATA "GOAL": "MINIMIZE" or
 * "MAXIMIZE", any case) wins when given; otherwise by name: names containing
 * acc, ips, throughput, speed, map, bleu, f1, auc, top1, top5, samples_per,
 * tokens_per or "per_sec" are MAXIMIZE; everything else (loss, error,
 * perplexity, time, lr, ...) is MINIMIZE.  Case-insensitive.
 */
enum metrics_goal metrics_goal_of(const char *name, const char *meta_goal);

/* Running statistics of one metric series (last, best, min, max, mean). */
struct metrics_stat {
	enum metrics_goal goal;
	size_t n;          /* values seen, NaN included */
	size_t n_finite;   /* of which finite */
	double last;       /* last value seen, NaN/Inf included; NaN when n == 0 */
	double best;       /* best finite value by goal; NaN when none */
	size_t best_index; /* 0-based index of best among all values seen */
	double min, max;   /* over finite values; NaN when none */
	double sum;        /* over finite values */
};

void metrics_stat_init(struct metrics_stat *st, enum metrics_goal goal);
void metrics_stat_add(struct metrics_stat *st, double v);
/* Mean of the finite values, NaN when none. */
double metrics_stat_mean(const struct metrics_stat *st);
/* The same over an array. */
void metrics_stat_series(struct metrics_stat *st, enum metrics_goal goal,
			 const double *v, size_t n);

/*
 * Throughput of one rank, three ways, in samples per second; each returns
 * NaN when it cannot tell.  The values are one rank's step records in log
 * order (METRICS_POINT only); the first warmup of them are not counted.
 *
 *   from_ips:      mean of the finite *.ips values after warm-up.
 *   from_steptime: batch x 1000 / mean step time in ms after warm-up
 *                  (MindFormers per_step_time).
 *   from_times:    wall times of the step records (when each step ended):
 *                  (n - w) x batch / (t[n-1] - t[w-1]) with w = max(warmup, 1),
 *                  i.e. counted steps over the time from the start of the
 *                  first counted step (= end of the step before it) to the
 *                  end of the last (Ais-Bench's rule, docs/formats.md).
 * batch is the per-rank batch size.
 */
double metrics_tput_from_ips(const double *ips, size_t n, size_t warmup);
double metrics_tput_from_steptime(const double *ms, size_t n, size_t warmup, double batch);
double metrics_tput_from_times(const double *t, size_t n, size_t warmup, double batch);
/* Job throughput: the sum of the finite per-rank values; NaN when none. */
double metrics_tput_job(const double *per_rank, size_t nranks);

/* Is this metric a throughput in samples/s ("train.ips", "QA.speed"...)? */
bool metrics_is_ips_name(const char *name);

/* ---- downsampling ----------------------------------------------------- */

struct metrics_xy {
	double x, y;
};

/*
 * Reduce a series sorted by x to at most 4 x buckets points for a chart.
 * The x range is cut into `buckets` equal slices; each keeps its first,
 * last, lowest and highest point, so spikes survive.  Points whose x or y is
 * not finite are dropped.  Output is sorted by x (input order for ties),
 * without duplicates.  out must hold 4 x buckets points (or n, if smaller);
 * returns the count written.  buckets == 0 writes nothing.
 */
size_t metrics_downsample(const struct metrics_xy *in, size_t n, size_t buckets,
			  struct metrics_xy *out);

/* ---- the job's own patterns (patterns.c) -------------------------------- */

/*
 * One entry of metrics.patterns: a POSIX extended regex, the capture group
 * holding the step (0: none) and, per metric name, the group holding its
 * value.  The spec owns these (spec/rules.c checks them); the matcher
 * compiles them once per job.
 */
struct metrics_pattern {
	char *regex;
	int step;
	size_t nvalues;
	char **names;
	int *groups;
};
void metrics_pattern_release(struct metrics_pattern *p);

struct metrics_matcher;

/*
 * Compile n patterns (copied: p may go after).  NULL when one does not
 * compile; *bad is then its index.
 */
struct metrics_matcher *metrics_matcher_new(const struct metrics_pattern *p, size_t n,
					    size_t *bad);
void metrics_matcher_free(struct metrics_matcher *m);
/*
 * Every pattern is tried on the line; each that matches gives a POINT
 * record per value whose group took part (METRICS_FMT_PATTERN, the step as
 * the step group wrote it, iter = that step when it is an integer; a value
 * that is not a number is kept as text).  Returns the record count; the
 * records live until the next call (as metrics_parse_line's, note 2).
 */
size_t metrics_matcher_match(struct metrics_matcher *m, const char *line, size_t len,
			     const struct metric_rec **recs);

/* What a job that printed lines but gave no metric record is told (one line). */
extern const char metrics_none_hint[];

#endif
