/* backend.c -- the backend table and backend: local (backend.h). */
#include "backend/backend.h"
#include "core/util.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static int local_stop(const char *home, struct store *st, const struct job_row *j,
		      struct tc_err *err)
{
	(void)home;
	(void)st;
	if (!proc_alive(j->sup_pid, j->sup_ticks))
		return tc_error(err, TC_EUSAGE, "stop: job %s has no running supervisor (%s)", j->id,
				j->state);
	if (kill(j->sup_pid, SIGTERM) < 0)
		return tc_error_errno(err, TC_ESYS, "stop: cannot signal supervisor %ld",
				      (long)j->sup_pid);
	printf("stopping %s (SIGTERM to supervisor %ld)\n", j->id, (long)j->sup_pid);
	return 0;
}

const struct backend_ops backend_local = {
	.name = "local",
	.run = launch_run,
	.submit = NULL, /* the server starts `trainctl supervise` itself */
	.stop = local_stop,
	.reconcile = store_job_reconcile,
};

static const struct backend_ops *const backends[] = { &backend_local, &backend_slurm };

const struct backend_ops *backend_find(const char *name)
{
	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
		if (!strcmp(backends[i]->name, name))
			return backends[i];
	return NULL;
}

const struct backend_ops *backend_of_job(struct store *st, const char *job_id)
{
	return store_job_is_slurm(st, job_id) ? &backend_slurm : &backend_local;
}

int backend_reconcile(struct store *st, struct job_row *j, struct tc_err *err)
{
	return backend_of_job(st, j->id)->reconcile(st, j, err);
}
