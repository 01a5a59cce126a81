/*
 * sbatch.c -- the batch script trainctl submits (job.sbatch in the run
 * folder) and the table that maps Slurm's job states onto trainctl's.
 *
 * The script asks for the job's nodes with one task per node (that task is
 * the node's supervisor, which starts one worker per device), the devices
 * as gres, and the slurm: keys of the spec, then hands over to the
 * job-level driver, `trainctl slurm-batch`.  Every value comes from a
 * validated spec (one line, no control characters); paths are quoted for
 * the shell.
 */
#include "backend/backend.h"
#include "core/util.h"
#include "core/sbuf.h"
#include "core/xalloc.h"
#include "jobs/runpath.h"

#include <stdlib.h>
#include <string.h>

/* gres name for a device type; NULL: no gres (cpu) */
static const struct gres_row {
	const char *type, *gres;
} gres_names[] = {
	{ "gpu", "gpu" }, { "npu", "npu" }, { "sdaa", "sdaa" }, { "mlu", "mlu" },
	{ "musa", "musa" }, { "rocm", "gpu" }, { "xpu", "xpu" }, { "cpu", NULL },
};

const char *slurm_gres_of(const char *device_type)
{
	for (size_t i = 0; i < sizeof(gres_names) / sizeof(gres_names[0]); i++)
		if (!strcmp(gres_names[i].type, device_type))
			return gres_names[i].gres;
	return NULL;
}

char *slurm_script(const struct slurm_script_in *in)
{
	const struct spec *s = in->spec;
	struct sbuf sb = SBUF_INIT;
	sbuf_addf(&sb, "#!/bin/sh\n"
		       "# trainctl job %s (%s): %d node%s x %d %s worker%s.\n"
		       "# Written and submitted by trainctl (docs/slurm.md); `trainctl run` or\n"
		       "# `sbatch --parsable` on this file starts the same job again.\n",
		  in->job_id, s->name, s->nodes, plural_s(s->nodes), s->per_node, s->device_type,
		  plural_s(s->per_node));
	sbuf_addf(&sb, "#SBATCH --job-name=%s\n", s->name);
	/*
	 * The spares come with the job (docs/slurm.md, "Spares"); an elastic
	 * job (nodes: {min, max}) starts on what Slurm gives between the two.
	 * Either way a node's failure must not end the allocation: --no-kill.
	 */
	if (s->nodes_min && s->nodes_min < s->nodes)
		sbuf_addf(&sb, "#SBATCH --nodes=%d-%d\n", s->nodes_min + s->spares,
			  s->nodes + s->spares);
	else
		sbuf_addf(&sb, "#SBATCH --nodes=%d\n", s->nodes + s->spares);
	if (s->spares || (s->nodes_min && s->nodes_min < s->nodes))
		sbuf_adds(&sb, "#SBATCH --no-kill\n");
	sbuf_adds(&sb, "#SBATCH --ntasks-per-node=1\n");
	sbuf_addf(&sb, "#SBATCH --cpus-per-task=%d\n", s->per_node);
	const char *gres = slurm_gres_of(s->device_type);
	if (s->slurm.gres && strcmp(s->slurm.gres, "none") != 0)
		sbuf_addf(&sb, "#SBATCH --gres=%s\n", s->slurm.gres);
	else if (!s->slurm.gres && gres)
		sbuf_addf(&sb, "#SBATCH --gres=%s:%d\n", gres, s->per_node);
	if (s->slurm.time)
		sbuf_addf(&sb, "#SBATCH --time=%s\n", s->slurm.time);
	if (s->slurm.partition)
		sbuf_addf(&sb, "#SBATCH --partition=%s\n", s->slurm.partition);
	if (s->slurm.account)
		sbuf_addf(&sb, "#SBATCH --account=%s\n", s->slurm.account);
	if (s->slurm.qos)
		sbuf_addf(&sb, "#SBATCH --qos=%s\n", s->slurm.qos);
	if (s->slurm.signal)
		sbuf_addf(&sb, "#SBATCH --signal=%s\n", s->slurm.signal);
	/* a preempted job comes back and resumes from its newest checkpoint */
	sbuf_adds(&sb, "#SBATCH --requeue\n");
	sbuf_adds(&sb, "#SBATCH --output=");
	run_path(&sb, in->run_dir, NULL, RUN_LOGS, 0);
	sbuf_adds(&sb, "/slurm-%j.out\n");
	sbuf_adds(&sb, "#SBATCH --open-mode=append\n");
	for (size_t i = 0; i < s->slurm.extra.nr; i++)
		sbuf_addf(&sb, "#SBATCH %s\n", s->slurm.extra.v[i]);
	sbuf_adds(&sb, "\nTRAINCTL_HOME=");
	sbuf_add_shell_quoted(&sb, in->home);
	sbuf_adds(&sb, "\nexport TRAINCTL_HOME\nexec ");
	sbuf_add_shell_quoted(&sb, in->exe);
	sbuf_adds(&sb, " slurm-batch ");
	sbuf_add_shell_quoted(&sb, in->job_id);
	sbuf_addch(&sb, '\n');
	return sbuf_detach(&sb);
}

static void charge_one(char **slot, const char *want, const char *what, struct sbuf *said)
{
	if (*slot && strcmp(*slot, want))
		sbuf_addf(said, "%sslurm.%s '%s' replaced by the team's '%s'", said->len ? "; " : "",
			  what, *slot, want);
	free(*slot);
	*slot = xstrdup(want);
}

void slurm_spec_charge(struct spec *s, const char *account, const char *qos, struct sbuf *said)
{
	if (account)
		charge_one(&s->slurm.account, account, "account", said);
	if (qos)
		charge_one(&s->slurm.qos, qos, "qos", said);
}

/*
 * Slurm job state -> trainctl state (docs/slurm.md has the same table).
 * final: Slurm will not run the job again.  Running states keep whatever
 * the job-level driver recorded (running, restarting).
 */
static const struct state_row {
	const char *slurm;
	enum job_state tc;
	bool final;
} states[] = {
	{ "PENDING", JOB_QUEUED, false },
	{ "REQUEUED", JOB_QUEUED, false },
	{ "REQUEUE_HOLD", JOB_QUEUED, false },
	{ "REQUEUE_FED", JOB_QUEUED, false },
	{ "CONFIGURING", JOB_STARTING, false },
	{ "RUNNING", JOB_RUNNING, false },
	{ "COMPLETING", JOB_RUNNING, false },
	{ "RESIZING", JOB_RUNNING, false },
	{ "SIGNALING", JOB_RUNNING, false },
	{ "STAGE_OUT", JOB_RUNNING, false },
	{ "SUSPENDED", JOB_PAUSED, false },
	{ "STOPPED", JOB_PAUSED, false },
	{ "PREEMPTED", JOB_KILLED, true }, /* preempted and not requeued */
	{ "COMPLETED", JOB_SUCCEEDED, true },
	{ "FAILED", JOB_FAILED, true },
	{ "BOOT_FAIL", JOB_FAILED, true },
	{ "OUT_OF_MEMORY", JOB_FAILED, true },
	{ "TIMEOUT", JOB_FAILED, true },
	{ "DEADLINE", JOB_FAILED, true },
	{ "SPECIAL_EXIT", JOB_FAILED, true },
	{ "CANCELLED", JOB_KILLED, true },
	{ "REVOKED", JOB_KILLED, true },
	{ "NODE_FAIL", JOB_LOST, true },
};

bool slurm_state_map(const char *slurm_state, enum job_state *out, bool *final)
{
	*final = false;
	for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++) {
		size_t n = strlen(states[i].slurm);
		/* "CANCELLED by 0" and "CANCELLED+" carry extra words */
		if (!strncmp(slurm_state, states[i].slurm, n) &&
		    (!slurm_state[n] || slurm_state[n] == ' ' || slurm_state[n] == '+')) {
			*final = states[i].final;
			*out = states[i].tc;
			return true;
		}
	}
	return false;
}
