/*
 * diag.h -- the pure parts of a job's diagnostics (docs/diagnostics.md):
 * the progress watchdog's step times and hang timeout, stragglers, the
 * stacks of a hang and which rank is the likely culprit, the resume check,
 * and the sitecustomize.py that gives Python ranks their stack dumps.
 * No I/O, no clock: the supervisor (launch/watch.c) feeds times in.
 *
 * Invariants: a diag_steps keeps a bounded window per rank and per job
 * (memory does not grow with the job's length); adding a step is O(1), so
 * that a job printing 10,000 step records a second costs the supervisor
 * nothing it can measure (bench/watchdog_bench.py).
 *
 * Ownership: every struct here owns what it points to; *_release/free
 * take NULL.  Strings returned are heap unless said otherwise.
 */
#ifndef TC_DIAG_H
#define TC_DIAG_H

#include <stdbool.h>
#include <stddef.h>

#include "core/sbuf.h"

/* ---- numbers ---- */

/* The median of n values (v is reordered); NaN when n is 0. */
double diag_median(double *v, size_t n);

/* The hang rule of watchdog: (docs/diagnostics.md). */
struct diag_hang_rule {
	int warmup_steps;       /* steps before the rule applies */
	double min_seconds;     /* the timeout is at least this ... */
	double factor;          /* ... and at least factor x the median step time */
	double startup_seconds; /* before the first step; 0 = off */
};
/*
 * Seconds without progress that make a hang, for a job that has made
 * steps steps so far with median step time median (NaN when unknown), or
 * 0 when no rule applies yet (warm-up; before the first step with
 * startup_seconds off).
 */
double diag_hang_timeout(const struct diag_hang_rule *r, long long steps, double median);

/* ---- step times per rank ---- */

struct diag_steps;

/* window: the steps per rank a straggler is judged over (at least 2). */
struct diag_steps *diag_steps_new(int nranks, int window);
void diag_steps_free(struct diag_steps *d);
/*
 * A new step record of rank at time t (seconds).  own: the step time the
 * record itself reports (a step_time metric), NaN when it has none: then
 * the time since the rank's previous step is the step time.  A rank
 * beyond the world given is ignored.
 */
void diag_steps_add(struct diag_steps *d, int rank, double t, double own);
/* Forget the ranks' previous step times (a new attempt: its first step starts afresh). */
void diag_steps_new_attempt(struct diag_steps *d);
/* Steps seen: the most any rank made (warm-up counts these). */
long long diag_steps_count(const struct diag_steps *d);
/* The median step time so far (the last 4096 of every rank), NaN when none. */
double diag_steps_median(const struct diag_steps *d);
/* A rank's median over its last window steps, NaN when it has fewer than 2. */
double diag_steps_rank_time(const struct diag_steps *d, int rank);
/* A rank's steps so far. */
long long diag_steps_rank_count(const struct diag_steps *d, int rank);
int diag_steps_ranks(const struct diag_steps *d);

/*
 * Ranks whose step time (diag_steps_rank_time, needing a full window) is
 * more than percent slower than the median of the ranks' step times: their
 * ranks into out (at most max), how many returned; *median gets that
 * median (NaN when fewer than 2 ranks have a full window).
 */
int diag_stragglers(const struct diag_steps *d, double percent, int *out, int max,
		    double *median);
/* The same rule over given step times (NaN: no full window), for the unit tests and readers. */
int diag_stragglers_of(const double *times, int n, double percent, int *out, int max,
		       double *median);

/* ---- stacks (faulthandler's text) ---- */

struct diag_frame {
	char *file, *func;
	int line;
};
struct diag_thread {
	bool current;            /* "Current thread" */
	struct diag_frame *f;    /* most recent call first */
	size_t nf;
};
struct diag_stack {
	struct diag_thread *t;
	size_t nt;
};

/* Parse faulthandler's dump_traceback(all_threads=True) text (appends to out). */
void diag_stack_parse(const char *text, size_t len, struct diag_stack *out);
void diag_stack_release(struct diag_stack *s);
/*
 * Is some thread waiting in a collective (all_reduce, barrier, ... in
 * torch.distributed, MindSpore, Paddle, DeepSpeed, Horovod)?  *where (not
 * heap, may be NULL) gets that frame's function.
 */
bool diag_stack_in_collective(const struct diag_stack *s, const char **where);
/*
 * The likely culprit of a hang among n ranks (stacks[i] NULL: no stack of
 * rank i): the one rank not in a collective while others are; without
 * collectives, with 3 or more stacks, the one whose innermost frames
 * differ from those the others share.  Returns its index or -1, with the
 * reason appended to why.
 */
int diag_culprit(const struct diag_stack *const *stacks, int n, struct sbuf *why);

/* ---- resume check ---- */

/* The step a checkpoint path names: the last run of digits of its last component, or -1. */
long long diag_ckpt_step(const char *path);
/*
 * Does the first step record after resuming from checkpoint step ckpt
 * continue it?  epoch and iter as parsed (-1: none): iter == ckpt + 1, or
 * for an epoch checkpoint, epoch == ckpt + 1.
 */
bool diag_resume_continues(long long ckpt, long long epoch, long long iter);

/* ---- the exception line ---- */

/* Bytes kept of an exception line. */
#define DIAG_EXCEPTION_MAX 200
/*
 * The exception a Python traceback ends in ("KeyError: 'missing_key'"),
 * heap, or NULL: the first unindented line after the last "Traceback (most
 * recent call last):" in text; without one, NULL when traceback is set,
 * else text's first line when it reads like an exception (torch's @record
 * message).  At most DIAG_EXCEPTION_MAX bytes.
 */
char *diag_exception_line(const char *text, size_t len, bool traceback);

/* ---- the stack dump hook ---- */

/* sitecustomize.py text (static): see docs/diagnostics.md. */
const char *diag_sitecustomize_py(void);

#endif
