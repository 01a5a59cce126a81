/*
 * compare.h -- precision alignment: two jobs' metric series side by side.
 *
 * The Tecorigin model-zoo rule: a model adapted to an accelerator must track
 * the CUDA reference run of the same seed with a relative error of at most
 * 1% per step.  compare_series() is the pure part (unit-tested); compare_jobs()
 * reads the series from a job source (source/source.h: the store, or a server).  docs/compare.md states the rules.
 *
 * NOTES ON THE DESIGN
 * (1) Steps are matched by key: (epoch, iteration) when the record has them,
 *     otherwise the rank's step counter (seq).  A key logged twice (a
 *     restarted group repeats steps) keeps its last value.  Rows come out
 *     sorted by key, one-sided steps among them.
 * (2) A is the reference.  Per step, err = |b - a| / |a|; where |a| is 0
 *     (below atol) the error is the absolute |b - a| and passes when it is
 *     at most atol.  A NaN or infinity on either side fails the step (err is
 *     +Inf) and the verdict, whatever --mean says.
 * (3) Steps present in only one run are counted and listed, never compared;
 *     the verdict is over the common steps, and no common step at all is an
 *     error (TC_EINPUT), not a verdict.
 * (4) max_err and mean_err are over the relative rows (+Inf when a step is
 *     not finite).  Verdict: aligned when no step is non-finite, every
 *     absolute row is within atol, and max_err <= rtol (with use_mean:
 *     mean_err <= rtol).  The first failing step is the first common row
 *     whose own error breaks its own tolerance (reported in both modes).
 */
#ifndef TC_COMPARE_H
#define TC_COMPARE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/err.h"
#include "store/store.h"

struct compare_pt {
	long long epoch, iter, seq; /* epoch/iter -1 when none */
	const char *step;           /* as written; borrowed */
	double value;
};

struct compare_opts {
	double rtol;   /* default 0.01 */
	double atol;   /* where the reference is 0; default 1e-8 */
	bool use_mean; /* verdict on the mean error instead of the maximum */
};

enum compare_status { CMP_OK = 0, CMP_OVER = 1, CMP_NONFINITE = 2, CMP_ONLY_A = 3, CMP_ONLY_B = 4 };

struct compare_row {
	const char *step;  /* borrowed from the inputs */
	double a, b;       /* NaN for the missing side */
	double err;        /* relative (or absolute where a == 0); +Inf when not finite */
	bool absolute;     /* err is absolute (reference 0) */
	enum compare_status status;
};

struct compare_result {
	struct compare_row *rows; /* common steps and one-sided ones, see note 1 */
	size_t nrows;
	size_t ncommon, only_a, only_b, nfail, nabsolute;
	double max_err, mean_err; /* note 4; NaN when no relative row */
	const char *max_step;     /* borrowed; NULL when no common step */
	long first_fail;          /* index into rows, -1 when none */
	bool aligned;
};

/* Compare two series (each in log order); fills out (release it after). */
void compare_series(const struct compare_pt *a, size_t na, const struct compare_pt *b,
		    size_t nb, const struct compare_opts *o, struct compare_result *out);
void compare_result_release(struct compare_result *r);

/* A whole comparison of two stored jobs. */
struct compare_job_opts {
	const char *metric; /* default train.loss */
	int rank;           /* default 0 */
	struct compare_opts o;
};

struct compare_jobs {
	char *job_a, *job_b; /* resolved ids */
	char *metric;
	int rank;
	const char *kind;    /* the kind compared: "point", "epoch" or "summary" */
	struct store_mseries *sa, *sb;
	size_t nsa, nsb;
	struct compare_pt *pa, *pb;
	struct compare_result r;
};

/*
 * Read both jobs' series and compare them.  TC_ENOTFOUND for an unknown job
 * or a metric a job lacks; TC_EINPUT when the runs share no step.
 */
struct job_source;
int compare_jobs(struct job_source *src, const char *ref_a, const char *ref_b,
		 const struct compare_job_opts *o, struct compare_jobs *out, struct tc_err *err);
void compare_jobs_release(struct compare_jobs *c);
/* JSON of the comparison (non-finite numbers as null, "nan"/"inf" strings for values). */
json_t *compare_jobs_json(const struct compare_jobs *c, const struct compare_opts *o);

/* ---- more than two jobs (a sweep's trials, a series of runs) ----
 *
 * The same alignment by step (note 1) over n jobs: the union of their
 * steps in key order, each job's value at each step (NaN where it has
 * none).  The first job is the reference; no verdict, a table: the steps
 * cut into at most `ranges` consecutive ranges of equal count, each job's
 * mean over a range, and its relative difference from the reference's.
 */
struct compare_aligned {
	size_t nsteps, njobs;
	const char **step; /* nsteps labels, borrowed from the inputs */
	double *v;         /* nsteps * njobs, row by row; NaN: no value */
};
void compare_align(const struct compare_pt *const *pts, const size_t *npts, size_t njobs,
		   struct compare_aligned *out);
void compare_aligned_release(struct compare_aligned *a);

struct compare_range {
	size_t first, last; /* step indexes, inclusive */
	double *mean;       /* njobs means of the finite values; NaN when none */
};
/* Cut a into at most nranges ranges (release with compare_ranges_free). */
struct compare_range *compare_ranges(const struct compare_aligned *a, size_t nranges, size_t *nr);
void compare_ranges_free(struct compare_range *r, size_t nr);

struct compare_many_opts {
	const char *metric; /* default train.loss */
	int rank;
	size_t ranges;      /* rows of the table; default 10 */
};
struct compare_many {
	size_t njobs;
	char **ids, **names;
	char *metric;
	int rank;
	const char *kind;
	struct store_mseries **series;
	size_t *nseries;
	struct compare_pt **pts;
	size_t *npts;
	struct compare_aligned a;
	struct compare_range *r;
	size_t nr;
};
/*
 * Read n jobs' series (refs as everywhere: id, prefix or name) on the
 * finest kind they all have, align them.  TC_ENOTFOUND for an unknown job
 * or one without the metric; TC_EUSAGE for fewer than two jobs.
 */
int compare_many_jobs(struct job_source *src, const char *const *refs, size_t n,
		      const struct compare_many_opts *o, struct compare_many *out, struct tc_err *err);
void compare_many_release(struct compare_many *c);
/* {reference, jobs: [{id, name}], metric, rank, kind, ranges: [...], steps: [...]} */
json_t *compare_many_json(const struct compare_many *c);

#endif
