/* doctor.c -- `trainctl doctor`: a state folder's checks and safe repairs; see doctor.h. */
#include "jobs/doctor.h"
#include "jobs/jobs.h"
#include "jobs/runpath.h"
#include "backend/backend.h"
#include "core/proc.h"
#include "core/sbuf.h"
#include "core/strvec.h"
#include "core/upath.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "store/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The supervisor writes this beside job.yaml (launch/supervisor.c); runpath.h has no name for it. */
#define JOB_ENV "job.env"

struct doc {
	const char *home;
	bool fix;
	struct doctor_report *out;
	struct store *st;       /* NULL: no database, or none to trust */
	bool skipped;           /* the database checks stopped the ones that read it */
	int runs_fd;            /* STATE/runs, or -1 */
	struct strvec runs;     /* the names in it */
	struct job_row *jobs;   /* every job row, when st */
	size_t njobs;
};

static const char *const kind_names[] = {
	[DOCTOR_DATABASE] = "database", [DOCTOR_PERMISSIONS] = "permissions",
	[DOCTOR_JOB] = "job",           [DOCTOR_LEASE] = "lease",
	[DOCTOR_ORPHAN] = "orphan",
};

const char *doctor_kind_name(enum doctor_kind k)
{
	return (unsigned)k < sizeof(kind_names) / sizeof(kind_names[0]) ? kind_names[k] : "?";
}

static void add(struct doc *d, enum doctor_kind k, const char *path, const char *job, bool fixed,
		const char *fmt, ...) TC_PRINTF(6, 7);

static void add(struct doc *d, enum doctor_kind k, const char *path, const char *job, bool fixed,
		const char *fmt, ...)
{
	struct doctor_report *r = d->out;
	XGROW(r->v, r->nr + 1, r->alloc);
	struct doctor_finding *f = &r->v[r->nr++];
	struct sbuf msg = SBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	sbuf_vaddf(&msg, fmt, ap);
	va_end(ap);
	f->kind = k;
	f->path = path ? xstrdup(path) : NULL;
	f->job = job ? xstrdup(job) : NULL;
	f->message = sbuf_detach(&msg);
	f->fixed = fixed;
}

/* ---- 1. the database ---- */

static void check_database(struct doc *d)
{
	struct sbuf db = SBUF_INIT;
	struct tc_err e = TC_ERR_INIT;
	struct stat sb;
	sbuf_addf(&db, "%s/trainctl.db", d->home);
	const char *skip = "; the checks of jobs, leases and run folders need it and were skipped";
	if (lstat(db.buf, &sb) < 0) {
		/* a state folder no job has used yet: nothing to check */
		sbuf_release(&db);
		return;
	}
	d->skipped = true;
	char *damage = NULL;
	int have = 0, want = 0;
	if (!S_ISREG(sb.st_mode)) {
		add(d, DOCTOR_DATABASE, db.buf, NULL, false,
		    "not a regular file (trainctl refuses it): move it aside and put the database file"
		    " itself there%s", skip);
	} else if (store_open_as_is(d->home, &d->st, &e) ||
		   store_integrity(d->st, &damage, &e)) {
		add(d, DOCTOR_DATABASE, db.buf, NULL, false,
		    "cannot be checked (%s): see that no other process holds it and that this account"
		    " may read and write it, then run doctor again%s", e.msg, skip);
	} else if (damage) {
		add(d, DOCTOR_DATABASE, db.buf, NULL, false,
		    "damaged (%s): stop every trainctl using this folder, move it aside with its -wal"
		    " and -shm (mv trainctl.db trainctl.db.damaged), then restore a copy or let the"
		    " next command start an empty one; `sqlite3 trainctl.db.damaged .recover` may"
		    " save its rows (doctor never deletes rows to make it pass)%s", damage, skip);
	} else if (store_schema_versions(d->st, &have, &want, &e)) {
		add(d, DOCTOR_DATABASE, db.buf, NULL, false, "cannot read its schema version (%s)%s",
		    e.msg, skip);
	} else if (have > want) {
		add(d, DOCTOR_DATABASE, db.buf, NULL, false,
		    "schema %d was written by a newer trainctl (this one knows %d): use that trainctl"
		    " on this folder%s", have, want, skip);
	} else if (have < want && !d->fix) {
		add(d, DOCTOR_DATABASE, db.buf, NULL, false,
		    "schema %d is older than this trainctl's (%d): --fix migrates it, as the next"
		    " command would%s", have, want, skip);
	} else if (have < want) {
		/* the migration is store_open's, the same as every command's */
		store_close(d->st);
		d->st = NULL;
		if (store_open(d->home, &d->st, &e)) {
			add(d, DOCTOR_DATABASE, db.buf, NULL, false, "schema %d: migration to %d failed (%s)%s",
			    have, want, e.msg, skip);
		} else {
			d->skipped = false;
			add(d, DOCTOR_DATABASE, db.buf, NULL, true, "schema %d was older than this"
			    " trainctl's: migrated to %d", have, want);
		}
	} else {
		d->skipped = false;
	}
	if (d->skipped) {
		store_close(d->st);
		d->st = NULL;
	}
	free(damage);
	tc_err_release(&e);
	sbuf_release(&db);
}

/* ---- 2. permissions ---- */

/* fchmod the file open on fd (ours to close) unless it is no longer was; 0 or -1 with errno. */
static int chmod_fd(int fd, const struct stat *was, mode_t mode)
{
	struct stat now;
	int rc = -1;
	if (fstat(fd, &now) == 0) {
		if (now.st_dev != was->st_dev || now.st_ino != was->st_ino)
			errno = ESTALE; /* replaced since it was looked at: leave it */
		else
			rc = fchmod(fd, mode);
	}
	int saved = errno;
	close(fd);
	errno = saved;
	return rc;
}

/*
 * One file or folder: name below dirfd (path, for the message), which must
 * have none of the bits in bad (why: what they let others do); --fix takes
 * them away when it is ours (as root: anyone's).  own_check: it must be
 * ours or root's.  Missing is fine.
 */
static void check_mode(struct doc *d, int dirfd, const char *name, const char *path, bool is_dir,
		       mode_t bad, bool own_check, const char *why)
{
	struct stat sb;
	if (fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != ENOENT)
			add(d, DOCTOR_PERMISSIONS, path, NULL, false, "cannot be looked at (%s)",
			    strerror(errno));
		return;
	}
	if (S_ISLNK(sb.st_mode) || (is_dir ? !S_ISDIR(sb.st_mode) : !S_ISREG(sb.st_mode))) {
		add(d, DOCTOR_PERMISSIONS, path, NULL, false,
		    "not a %s (a link, or another kind of file): trainctl refuses it; put the %s there",
		    is_dir ? "folder" : "regular file", is_dir ? "folder" : "file");
		return;
	}
	uid_t me = geteuid();
	bool ours = sb.st_uid == me || me == 0;
	if (own_check && sb.st_uid != me && sb.st_uid != 0)
		add(d, DOCTOR_PERMISSIONS, path, NULL, false,
		    "owned by uid %u, not by this account (uid %u) or root: run trainctl as its owner,"
		    " or chown it", (unsigned)sb.st_uid, (unsigned)me);
	mode_t mode = sb.st_mode & 07777;
	if (!(mode & bad))
		return;
	mode_t want = mode & ~bad;
	if (!ours) {
		add(d, DOCTOR_PERMISSIONS, path, NULL, false,
		    "mode %04o, %s: owned by uid %u, who can make it %04o (doctor changes only its"
		    " own files)", (unsigned)mode, why, (unsigned)sb.st_uid, (unsigned)want);
		return;
	}
	if (!d->fix) {
		add(d, DOCTOR_PERMISSIONS, path, NULL, false, "mode %04o, %s: --fix makes it %04o",
		    (unsigned)mode, why, (unsigned)want);
		return;
	}
	struct tc_err e = TC_ERR_INIT;
	int fd = -1;
	int rc = is_dir ? upath_dir(dirfd, name, UPATH_ANY, &fd, &e)
			: upath_open(dirfd, name, UPATH_ANY, &fd, &e);
	if (!rc && chmod_fd(fd, &sb, want) < 0)
		rc = tc_error_errno(&e, TC_ESYS, "chmod");
	if (rc)
		add(d, DOCTOR_PERMISSIONS, path, NULL, false, "mode %04o, %s: cannot make it %04o (%s)",
		    (unsigned)mode, why, (unsigned)want, e.msg);
	else
		add(d, DOCTOR_PERMISSIONS, path, NULL, true, "mode %04o, %s: made %04o", (unsigned)mode,
		    why, (unsigned)want);
	tc_err_release(&e);
}

/* job.env and job.yaml of the run folder runs/name hold the job's environment: 0600. */
static void check_run_files(struct doc *d, const char *name)
{
	struct stat sb;
	if (fstatat(d->runs_fd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(sb.st_mode))
		return;
	struct sbuf dir = SBUF_INIT;
	run_path(&dir, d->home, name, RUN_DIR, 0);
	struct tc_err e = TC_ERR_INIT;
	int rfd = -1;
	if (upath_dir(d->runs_fd, name, UPATH_ANY, &rfd, &e)) {
		add(d, DOCTOR_PERMISSIONS, dir.buf, name, false, "cannot look into it (%s)", e.msg);
	} else {
		struct sbuf spec = SBUF_INIT;
		run_leaf(&spec, RUN_SPEC, 0);
		const char *leaves[] = { JOB_ENV, spec.buf };
		for (size_t i = 0; i < 2; i++) {
			struct sbuf p = SBUF_INIT;
			sbuf_addf(&p, "%s/%s", dir.buf, leaves[i]);
			check_mode(d, rfd, leaves[i], p.buf, false, 077, false,
				   "others may read it (it holds the job's environment)");
			sbuf_release(&p);
		}
		sbuf_release(&spec);
		close(rfd);
	}
	tc_err_release(&e);
	sbuf_release(&dir);
}

static void check_permissions(struct doc *d)
{
	struct tc_err e = TC_ERR_INIT;
	int hfd = -1;
	if (upath_base(d->home, &hfd, &e)) {
		add(d, DOCTOR_PERMISSIONS, d->home, NULL, false, "cannot be opened (%s)", e.msg);
		tc_err_release(&e);
		return;
	}
	const char *dirw = "others may write in it";
	check_mode(d, hfd, ".", d->home, true, 022, true, dirw);
	static const char *const dbs[] = { "trainctl.db", "trainctl.db-wal", "trainctl.db-shm" };
	for (size_t i = 0; i < 3; i++) {
		struct sbuf p = SBUF_INIT;
		sbuf_addf(&p, "%s/%s", d->home, dbs[i]);
		check_mode(d, hfd, dbs[i], p.buf, false, 077, true,
			   "others may read it (it holds every job's spec and environment)");
		sbuf_release(&p);
	}
	struct sbuf runs = SBUF_INIT, journal = SBUF_INIT;
	run_runs(&runs, d->home);
	sbuf_addf(&journal, "%s/journal", d->home);
	/* runs/ and journal/ are the state folder's own, one level below it */
	const char *rname = strrchr(runs.buf, '/') ? strrchr(runs.buf, '/') + 1 : runs.buf;
	check_mode(d, hfd, rname, runs.buf, true, 022, true, dirw);
	check_mode(d, hfd, "journal", journal.buf, true, 022, true, dirw);
	close(hfd);
	if (upath_base(runs.buf, &d->runs_fd, &e) == 0) {
		if (upath_list(d->runs_fd, ".", UPATH_ANY, &d->runs, &e))
			add(d, DOCTOR_PERMISSIONS, runs.buf, NULL, false, "cannot be listed (%s)", e.msg);
		for (size_t i = 0; i < d->runs.nr; i++)
			check_run_files(d, d->runs.v[i]);
	} else if (e.code != TC_ENOTFOUND) {
		add(d, DOCTOR_PERMISSIONS, runs.buf, NULL, false, "cannot be opened (%s)", e.msg);
	}
	tc_err_release(&e);
	sbuf_release(&runs);
	sbuf_release(&journal);
}

/* ---- 3. jobs marked active with no supervisor ---- */

static void check_jobs(struct doc *d)
{
	for (size_t i = 0; i < d->njobs; i++) {
		struct job_row *j = &d->jobs[i];
		if (!backend_supervisor_gone(j))
			continue;
		const char *was = job_state_name(j->state);
		if (!d->fix) {
			add(d, DOCTOR_JOB, NULL, j->id, false,
			    "%s, but its supervisor (pid %ld) is gone: --fix records it lost", was,
			    (long)j->sup_pid);
			continue;
		}
		struct tc_err e = TC_ERR_INIT;
		long pid = (long)j->sup_pid;
		if (backend_reconcile(d->st, j, &e))
			add(d, DOCTOR_JOB, NULL, j->id, false,
			    "%s, but its supervisor (pid %ld) is gone: recording it lost failed (%s)", was,
			    pid, e.msg);
		else
			add(d, DOCTOR_JOB, NULL, j->id, j->state == JOB_LOST,
			    "%s, but its supervisor (pid %ld) was gone: now %s", was, pid,
			    job_state_name(j->state));
		tc_err_release(&e);
	}
}

/* ---- 4. stale device leases ---- */

static void check_leases(struct doc *d)
{
	struct store_lease *v = NULL;
	size_t n = 0;
	struct tc_err e = TC_ERR_INIT;
	if (store_leases_stale(d->st, &v, &n, &e)) {
		add(d, DOCTOR_LEASE, NULL, NULL, false, "cannot read the device leases (%s)", e.msg);
		tc_err_release(&e);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const struct store_lease *l = &v[i];
		struct sbuf what = SBUF_INIT;
		sbuf_addf(&what, "%s %d, held by pid %ld, %s", l->type, l->id, (long)l->pid,
			  proc_alive(l->pid, l->ticks) ? "but the job has ended" : "which is gone");
		if (!d->fix)
			add(d, DOCTOR_LEASE, NULL, l->job_id, false, "%s: --fix drops the lease", what.buf);
		else if (store_lease_drop_stale(d->st, l, &e))
			add(d, DOCTOR_LEASE, NULL, l->job_id, false, "%s: dropping it failed (%s)", what.buf,
			    e.msg);
		else
			add(d, DOCTOR_LEASE, NULL, l->job_id, true, "%s: dropped", what.buf);
		tc_err_release(&e);
		sbuf_release(&what);
	}
	store_leases_free(v, n);
}

/* ---- 5. run folders and job rows without each other ---- */

/* Bytes of the regular files below fd (ours to close), links not followed, one file system. */
static double tree_bytes(int fd, dev_t dev, int depth)
{
	double sum = 0;
	DIR *dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		return 0;
	}
	for (struct dirent *ent; (ent = readdir(dir));) {
		struct stat sb;
		if (!strcmp(ent->d_name, ".") || !strcmp(ent->d_name, "..") ||
		    fstatat(dirfd(dir), ent->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISREG(sb.st_mode)) {
			sum += (double)sb.st_size;
		} else if (S_ISDIR(sb.st_mode) && sb.st_dev == dev && depth < 64) {
			struct tc_err e = TC_ERR_INIT;
			int sub = -1;
			if (upath_dir(dirfd(dir), ent->d_name, UPATH_ANY, &sub, &e) == 0)
				sum += tree_bytes(sub, dev, depth + 1);
			tc_err_release(&e);
		}
	}
	closedir(dir);
	return sum;
}

static int cmp_id(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void check_orphans(struct doc *d)
{
	const char **ids = xcalloc(d->njobs + 1, sizeof(*ids));
	for (size_t i = 0; i < d->njobs; i++)
		ids[i] = d->jobs[i].id;
	qsort(ids, d->njobs, sizeof(*ids), cmp_id);
	for (size_t i = 0; d->runs_fd >= 0 && i < d->runs.nr; i++) {
		const char *name = d->runs.v[i];
		struct stat sb;
		if (bsearch(&name, ids, d->njobs, sizeof(*ids), cmp_id) ||
		    fstatat(d->runs_fd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(sb.st_mode))
			continue;
		struct tc_err e = TC_ERR_INIT;
		struct sbuf path = SBUF_INIT, size = SBUF_INIT;
		int fd = -1;
		run_path(&path, d->home, name, RUN_DIR, 0);
		if (upath_dir(d->runs_fd, name, UPATH_ANY, &fd, &e) == 0)
			format_bytes(&size, tree_bytes(fd, sb.st_dev, 0));
		else
			sbuf_adds(&size, "size unknown");
		add(d, DOCTOR_ORPHAN, path.buf, NULL, false,
		    "a run folder (%s) with no job in the database: left in place (it may hold"
		    " outputs); remove it yourself once nothing in it is needed", size.buf);
		sbuf_release(&path);
		sbuf_release(&size);
		tc_err_release(&e);
	}
	free(ids);
	for (size_t i = 0; i < d->njobs; i++) {
		const struct job_row *j = &d->jobs[i];
		struct stat sb;
		/* a job waiting in the queue may have no run folder yet */
		if (!j->run_dir || !*j->run_dir || job_state_waiting(j->state) ||
		    lstat(j->run_dir, &sb) == 0 || errno != ENOENT)
			continue;
		add(d, DOCTOR_ORPHAN, j->run_dir, j->id, false,
		    "the run folder of job %s (%s) is missing: its logs and outputs are gone; the row"
		    " stays (remove it when the job has ended: trainctl delete %s)", j->id,
		    job_state_name(j->state), j->id);
	}
}

/* ---- the walk ---- */

int doctor_check(const char *home, bool fix, struct doctor_report *out, struct tc_err *err)
{
	struct doc d = { .home = home, .fix = fix, .out = out, .runs_fd = -1 };
	struct strvec empty = STRVEC_INIT;
	d.runs = empty;
	if (!is_dir(home))
		return 0; /* nothing there yet: nothing wrong */
	check_database(&d);
	check_permissions(&d);
	if (d.st) {
		struct tc_err e = TC_ERR_INIT;
		if (store_job_list(d.st, true, &d.jobs, &d.njobs, &e)) {
			add(&d, DOCTOR_DATABASE, NULL, NULL, false,
			    "cannot list the jobs (%s): the checks of jobs, leases and run folders were"
			    " skipped", e.msg);
		} else {
			check_jobs(&d);
			check_leases(&d);
			check_orphans(&d);
		}
		tc_err_release(&e);
	}
	(void)err;
	job_rows_free(d.jobs, d.njobs);
	strvec_clear(&d.runs);
	if (d.runs_fd >= 0)
		close(d.runs_fd);
	store_close(d.st);
	return 0;
}

size_t doctor_unfixed(const struct doctor_report *r)
{
	size_t n = 0;
	for (size_t i = 0; i < r->nr; i++)
		n += !r->v[i].fixed;
	return n;
}

void doctor_report_release(struct doctor_report *r)
{
	for (size_t i = 0; i < r->nr; i++) {
		free(r->v[i].path);
		free(r->v[i].job);
		free(r->v[i].message);
	}
	free(r->v);
	memset(r, 0, sizeof(*r));
}
