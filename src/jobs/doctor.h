/*
 * doctor.h -- `trainctl doctor`: the checks of a state folder, and the
 * repairs that are safe (docs/reliability.md).
 *
 * In this order, each finding one entry of a list the caller prints:
 *   database     trainctl.db opens, passes PRAGMA integrity_check, and has
 *                this trainctl's schema.  A damaged one is never repaired
 *                here (no row is deleted to make it pass): the message says
 *                how to move it aside.  An older schema is migrated, as any
 *                command would.  The checks below that read the database
 *                are skipped when it cannot be trusted.
 *   permissions  the state folder, trainctl.db(-wal, -shm), runs/ and
 *                journal/ belong to this account (or root) and nobody else
 *                may write them; trainctl.db and each run folder's job.env
 *                and job.yaml (they hold the job's environment) are 0600.
 *                Fixed by chmod, only on what is ours (root: all).
 *   job          a job marked starting, running or restarting whose
 *                supervisor is gone (backend_reconcile's test); fixed by
 *                that reconcile, which records it lost (jobs_mark_lost).
 *   lease        a device lease whose holder is gone or whose job ended;
 *                fixed by dropping exactly that row.
 *   orphan       a run folder with no job row, or a job row whose run
 *                folder is missing: reported only (a folder may hold the
 *                user's outputs).
 *
 * Nothing here prints.  Without fix nothing is changed: the database is
 * opened as it is (store_open_as_is), not created, tightened or migrated.
 */
#ifndef TC_JOBS_DOCTOR_H
#define TC_JOBS_DOCTOR_H

#include <stdbool.h>
#include <stddef.h>

#include "core/err.h"

enum doctor_kind {
	DOCTOR_DATABASE,
	DOCTOR_PERMISSIONS,
	DOCTOR_JOB,
	DOCTOR_LEASE,
	DOCTOR_ORPHAN,
};

struct doctor_finding {
	enum doctor_kind kind;
	char *path;    /* the file or folder, or NULL */
	char *job;     /* the job id, or NULL */
	char *message; /* what is wrong, then what --fix does (or did) or what the user can do */
	bool fixed;    /* repaired by this run */
};

struct doctor_report {
	struct doctor_finding *v;
	size_t nr, alloc;
};
#define DOCTOR_REPORT_INIT { NULL, 0, 0 }

/*
 * Check the state folder home (a missing one has nothing wrong) into out,
 * repairing what is safe when fix.  Returns 0 when the checks ran, whatever
 * they found; an error only for what stops the walk itself (out of memory
 * aborts).  A problem remains when a finding is not fixed.
 */
int doctor_check(const char *home, bool fix, struct doctor_report *out, struct tc_err *err);
/* Findings not fixed. */
size_t doctor_unfixed(const struct doctor_report *r);
/* "database", "permissions", "job", "lease", "orphan" */
const char *doctor_kind_name(enum doctor_kind k);
void doctor_report_release(struct doctor_report *r);

#endif
