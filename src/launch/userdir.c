/*
 * userdir.c -- the folders a root supervisor makes for a job that runs as
 * another account (supervisor_int.h: sup_user_dir, sup_user_dir_outside).
 *
 * Rule (docs/security.md): root chowns only a folder its own mkdir just
 * created, or one of its own in a folder only it can write (the server
 * makes logs/ before the supervisor starts), reached from a folder
 * descriptor it trusts with O_NOFOLLOW at every step, so a link or a
 * folder planted by the user is never followed and never handed over.  A folder that already exists is kept as it is if
 * it is a real folder owned by the job's user or by us, else refused.  A
 * folder outside the run folder is made by a child running as the user
 * (core/proc), so it gets exactly what the user could make by hand.
 */
#include "launch/supervisor_int.h"
#include "core/proc.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One step: name under dfd, made now (and handed over) or checked; its fd or < 0. */
static int step(struct sup *sp, int dfd, const char *name, const char *whole, struct tc_err *err)
{
	uid_t uid = (uid_t)sp->o->run_as_uid;
	/* a parent only we can write: what is in it is trainctl's (the server makes logs/) */
	struct stat psb;
	bool ours = fstat(dfd, &psb) == 0 && psb.st_uid == geteuid() && !(psb.st_mode & 022);
	bool made = mkdirat(dfd, name, 0755) == 0;
	if (!made && errno != EEXIST)
		return tc_error_errno(err, TC_ESYS, "cannot create directory '%s'", whole);
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return tc_error_errno(err, TC_ESYS, "'%s' is not a folder (a link?): refused", whole);
	struct stat sb;
	if (fstat(fd, &sb) < 0) {
		close(fd);
		return tc_error_errno(err, TC_ESYS, "cannot stat '%s'", whole);
	}
	if ((made || ours) && sb.st_uid == geteuid()) {
		/* the user's alone: 0700 keeps other accounts out of its logs and outputs */
		if (fchown(fd, uid, (gid_t)sp->o->run_as_gid) < 0 || fchmod(fd, 0700) < 0) {
			close(fd);
			return tc_error_errno(err, TC_ESYS, "cannot hand %s to uid %u", whole, (unsigned)uid);
		}
	} else if (sb.st_uid != uid && sb.st_uid != geteuid()) {
		close(fd);
		return tc_error(err, TC_ESYS, "'%s' belongs to uid %u, not to the job's user: refused", whole,
				(unsigned)sb.st_uid);
	}
	return fd;
}

int sup_user_dir(struct sup *sp, const char *base, const char *rel, struct tc_err *err)
{
	if (!sp->o->run_as_uid) {
		char *p = sup_join(base, rel);
		int rc = mkdir_p(p, err);
		free(p);
		return rc;
	}
	int dfd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return tc_error_errno(err, TC_ESYS, "cannot open '%s'", base);
	char *copy = xstrdup(rel);
	struct sbuf whole = SBUF_INIT;
	sbuf_adds(&whole, base);
	int rc = 0;
	char *save = NULL;
	for (char *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (!strcmp(c, "."))
			continue;
		sbuf_addf(&whole, "/%s", c);
		if (!strcmp(c, "..")) {
			rc = tc_error(err, TC_ESPEC, "'%s' leaves the run folder: refused", whole.buf);
			break;
		}
		int fd = step(sp, dfd, c, whole.buf, err);
		close(dfd);
		dfd = fd;
		if (fd < 0) {
			rc = fd;
			break;
		}
	}
	if (dfd >= 0)
		close(dfd);
	sbuf_release(&whole);
	free(copy);
	return rc;
}

int sup_user_dir_outside(struct sup *sp, const char *path, struct tc_err *err)
{
	if (!sp->o->run_as_uid) {
		int rc = mkdir_p(path, err);
		/* as the job's own account (a server's job): one it cannot use is no checkpoint folder */
		if (!rc && sp->o->run_dir && access(path, W_OK | X_OK) < 0)
			rc = tc_error_errno(err, TC_ESPEC, "checkpoint.dir '%s': the job's user cannot"
					    " write to it: refused", path);
		return rc;
	}
	/* made as the user: what it cannot make or reach, the job does not get */
	struct proc p = PROC_INIT;
	gid_t gid = (gid_t)sp->o->run_as_gid;
	strvec_push(&p.args, "mkdir");
	strvec_push(&p.args, "-p");
	strvec_push(&p.args, "--");
	strvec_push(&p.args, path);
	strvec_push(&p.env, "PATH=/usr/bin:/bin");
	p.set_groups = p.set_gid = p.set_uid = true;
	p.groups = &gid;
	p.ngroups = 1;
	p.gid = gid;
	p.uid = (uid_t)sp->o->run_as_uid;
	p.in.how = PROC_IO_NULL;
	struct sbuf msg = SBUF_INIT;
	struct proc_capture c = { .err = &msg, .max = 4096 };
	int rc = proc_capture(&p, &c, err);
	proc_clear(&p);
	if (!rc && !proc_exit_ok(c.status)) {
		sbuf_rtrim(&msg);
		rc = tc_error(err, TC_ESPEC, "checkpoint.dir '%s': the job's user cannot create it: %s", path,
			      msg.buf);
	}
	sbuf_release(&msg);
	struct stat sb;
	if (!rc && (lstat(path, &sb) < 0 || !S_ISDIR(sb.st_mode) || sb.st_uid != (uid_t)sp->o->run_as_uid))
		rc = tc_error(err, TC_ESPEC,
			      "checkpoint.dir '%s' is not a folder of the job's user: refused (it must belong to "
			      "the user, or not exist so that the job creates it)",
			      path);
	return rc;
}
