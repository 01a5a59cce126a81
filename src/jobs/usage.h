/*
 * usage.h -- usage accounting and retention, over the store: the one JSON
 * form of a usage report (`trainctl usage --format json`, the CLI's other
 * formats and GET /api/v1/usage all come from it), the words of its
 * window (dates, ages), and the removal of old finished jobs
 * (`trainctl gc`, the server's --retention), through jobs_delete, the one
 * door that deletes a job and its run folder.
 *
 * Nothing here prints.  JSON returned is a new reference (the caller's).
 */
#ifndef TC_JOBS_USAGE_H
#define TC_JOBS_USAGE_H

#include <stdbool.h>

#include <jansson.h>

#include "core/err.h"
#include "core/sbuf.h"
#include "store/store.h"

/* "2026-11-01" (UTC midnight) or "2026-11-01T12:30:00[Z]" (UTC): seconds since the epoch. */
bool usage_parse_date(const char *s, double *out);
/* "30d", "12h", "90m", "45s", "2w" (a positive whole number and a unit): seconds. */
bool usage_parse_age(const char *s, double *out);
/* "user" or "team" */
bool usage_parse_by(const char *s, enum usage_by *out);
const char *usage_by_name(enum usage_by by);

/*
 * The window and grouping of a report from their words (each may be NULL:
 * until now, since 30 days before until, by user), into q (q->user is
 * left as it is).  TC_EUSAGE naming the word that is wrong.
 */
int usage_query_parse(const char *since, const char *until, const char *by, double now,
		      struct usage_query *q, struct tc_err *err);

/*
 * The report of q as {"since", "until" (ISO dates, UTC), "by", "rows": [{
 * "group", "device_type", "device_seconds", "device_hours", "jobs",
 * "waited", "wait_mean_seconds", "wait_max_seconds"}]}.
 */
int usage_report_json(struct store *st, const struct usage_query *q, json_t **out,
		      struct tc_err *err);

/*
 * A report (usage_report_json's) as CSV, appended to out: the header
 * "BY,device_type,device_hours,device_seconds,jobs,wait_mean_seconds,
 * wait_max_seconds", then a line per row (a wait left empty where none was
 * measured).  `trainctl usage --format csv` and GET /api/v1/usage?format=csv.
 */
void usage_report_csv(json_t *rep, struct sbuf *out);

/*
 * Remove finished jobs that ended before `before` (seconds since the
 * epoch): rows and run folder, each through jobs_delete; with dry_run,
 * nothing.  A job not finished is never a candidate.  *out: the jobs
 * removed (or that would be) as [{"id", "name", "state", "ended",
 * "run_dir"}]; a job that could not be removed stops the walk with its
 * error, and *out holds those removed before it.  before_of, when not
 * NULL, gives each candidate its own time (the server's retention per
 * team): it is removed only when it ended before that one too.
 */
struct job_row;
struct jobs_gc_rule {
	double (*before_of)(void *ctx, const struct job_row *r);
	void *ctx;
};
int jobs_gc(struct store *st, double before, bool dry_run, const struct jobs_gc_rule *rule,
	    json_t **out, struct tc_err *err);

#endif
