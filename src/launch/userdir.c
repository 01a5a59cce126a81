/*
 * userdir.c -- the folders of a job's run (supervisor_int.h: sup_user_dir,
 * sup_user_dir_outside).  The supervisor runs as the job's account (a
 * server starts it as that account, server/privsep.c), so a folder it
 * makes is the user's and a folder it cannot make or reach is one the user
 * cannot either.
 */
#include "launch/supervisor_int.h"
#include "core/util.h"

#include <stdlib.h>
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
