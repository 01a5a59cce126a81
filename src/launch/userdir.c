/*
 * userdir.c -- the folders and files of a job's run (supervisor_int.h:
 * sup_user_dir, sup_user_dir_outside, sup_write_text, ...).  The supervisor runs as the job's account (a
 * server starts it as that account, server/privsep.c), so a folder it
 * makes is the user's and a folder it cannot make or reach is one the user
 * cannot either.
 */
#include "launch/supervisor_int.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int sup_user_dir(struct sup *sp, const char *base, const char *rel, struct tc_err *err)
{
	(void)sp;
	char *p = sup_join(base, rel);
	int rc = mkdir_p(p, err);
	free(p);
	return rc;
}

int sup_user_dir_outside(struct sup *sp, const char *path, struct tc_err *err)
{
	int rc = mkdir_p(path, err);
	/* a server's job: one its account cannot use is no checkpoint folder */
	if (!rc && sp->o->run_dir && access(path, W_OK | X_OK) < 0)
		rc = tc_error_errno(err, TC_ESPEC, "checkpoint.dir '%s': the job's user cannot"
				    " write to it: refused", path);
	return rc;
}

char *sup_join(const char *a, const char *b)
{
	struct sbuf sb = SBUF_INIT;
	sbuf_addf(&sb, "%s/%s", a, b);
	return sbuf_detach(&sb);
}

int sup_write_text(const char *dir, const char *name, const char *text, struct tc_err *err)
{
	char *path = sup_join(dir, name);
	int rc = write_file_atomic(path, text, strlen(text), err);
	free(path);
	return rc;
}

int sup_write_private(const char *dir, const char *name, const char *text, struct tc_err *err)
{
	char *path = sup_join(dir, name);
	int rc = write_file_atomic_mode(path, text, strlen(text), 0600, err);
	free(path);
	return rc;
}
