/*
 * report.h -- the benchmark report of a job (ModelArts benchmark stubs,
 * docs/formats.md): report.json and the Ais-Bench files, written into
 * the run folder when a job ends and by `trainctl report JOB` on demand,
 * and sent to a tester over HTTP.
 *
 * Sources: the job row and its events (phase times, restarts), the stored
 * metrics through metrics_job_summary() (throughput per rank after warm-up,
 * accuracy), and telemetry.json in the run folder, which the supervisor's
 * sampler writes at the end of the job (device utilisation, power, energy,
 * the time the final upload ended).  docs/report.md lists every field.
 *
 * Ownership: report_build() returns a new JSON reference (json_decref it).
 * Nothing here changes a job: a report that cannot be written is an error
 * for `trainctl report`, and one warning line for the supervisor.
 */
#ifndef TC_REPORT_H
#define TC_REPORT_H

#include <jansson.h>
#include <stdbool.h>

#include "core/err.h"
#include "core/sbuf.h"
#include "store/store.h"

/* ---- telemetry while the job runs ---- */

struct report_sampler;

/*
 * Start a thread that samples the job's devices every interval_ms (0: 1000,
 * or $TRAINCTL_SAMPLE_MS): utilisation and power of its GPUs through NVML
 * (devices_discover), the machine's CPU use from /proc/stat for cpu jobs.
 * Returns NULL (and samples nothing) when the thread cannot start.
 */
struct report_sampler *report_sampler_start(const char *device_type, const int *ids, int n,
					    int interval_ms);
/*
 * The latest utilisation sample (percent; NaN before the first or for a
 * NULL s) and its source ("nvml", "proc_stat", ...; static).  Any thread.
 */
double report_sampler_last_util(struct report_sampler *s, const char **source);
/*
 * Stop the thread and write run_dir/telemetry.json (averages, peak power,
 * energy, and "finished": now).  NULL s writes only "finished"; NULL
 * run_dir stops and frees s and writes nothing.
 */
int report_sampler_stop(struct report_sampler *s, const char *run_dir, struct tc_err *err);

/* ---- the report ---- */

/* The report object of a stored job (single_server: averaged per server). */
int report_build(struct store *st, const struct job_row *job, bool single_server,
		 json_t **out, struct tc_err *err);
/*
 * Write dir/report.json and the Ais-Bench files under dir/aisbench/
 * (ranksize.json, throughput_<rank>.json, accuracy.json; single-server:
 * <server>/throughput_<rank>.json and accuracy_<server>.json).
 */
int report_write(const json_t *report, const char *dir, struct tc_err *err);
/*
 * The same files, each handed to put with its path relative to the run
 * folder ("report.json", "aisbench/ranksize.json"): for a writer that is
 * not a plain folder (a root server's, as the job's account: hub.h).
 */
typedef int (*report_put_fn)(void *ctx, const char *rel, const char *text, size_t len,
			     struct tc_err *err);
int report_put_files(const json_t *report, report_put_fn put, void *ctx, struct tc_err *err);

/*
 * POST body (JSON) to url, up to tries times with a growing pause (0.5 s,
 * 1 s, 2 s...); a 2xx answer is success, a 4xx other than 408/429 is final.
 * On failure TC_EBACKEND with the last reason.  log gets one line per try.
 */
int report_post(const char *url, const char *body, int tries, struct sbuf *log,
		struct tc_err *err);

/*
 * The supervisor's end-of-job step: stop the sampler, then build and write
 * the report into the job's run folder.  Never fails the job: problems go
 * to warn (one line each).
 */
void report_job_end(struct store *st, const char *job_id, struct report_sampler *s,
		    void (*warn)(void *ctx, const char *msg), void *warn_ctx);

#endif
