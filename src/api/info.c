/*
 * info.c -- GET /api/v1/info: what the server says of itself, so that the
 * web UI keeps no lists of its own: the job states (their names, and
 * which are terminal or active), the sweep, trial and endpoint states
 * (names, and which are terminal), the backends with whether a job may use
 * them here and why not, and the version.
 */
#include "api/api_int.h"
#include "core/json.h"
#include "core/util.h"
#include "core/version.h"
#include "jobs/state.h"

#include <stdlib.h>
#include <string.h>

void api_backends(const char *forced, const struct backend_probe *p,
		  struct api_backend_info out[API_NBACKENDS])
{
	/* a spec with nodes > 1 needs backend: slurm (spec.c) */
	out[BACKEND_LOCAL] = (struct api_backend_info){ backend_names[BACKEND_LOCAL], true, false,
							NULL };
	out[BACKEND_SLURM] = (struct api_backend_info){ backend_names[BACKEND_SLURM], true, true,
							NULL };
	struct api_backend_info *slurm = &out[BACKEND_SLURM];
	if (!p->have_sbatch) {
		slurm->available = false;
		slurm->why = "sbatch is not on the server's PATH";
	} else if (!p->have_conf) {
		slurm->available = false;
		slurm->why = "the server has no Slurm configuration (SLURM_CONF or /etc/slurm/slurm.conf)";
	}
	if (!forced)
		return;
	/* --backend: every job runs there, whatever its spec says */
	for (size_t i = 0; i < API_NBACKENDS; i++)
		if (strcmp(out[i].name, forced) != 0) {
			out[i].available = false;
			out[i].why = backend_lookup(forced) == BACKEND_SLURM
					     ? "server started with --backend slurm"
					     : "server started with --backend local";
		}
}

/* One {name, terminal} row of a sweep's, trial's or endpoint's state table. */
static void state_row(struct sbuf *out, int i, const char *name, bool terminal)
{
	sbuf_adds(out, i ? ",{\"name\":" : "{\"name\":");
	json_add_str(out, name);
	sbuf_addf(out, ",\"terminal\":%s}", terminal ? "true" : "false");
}

void api_info_json(struct sbuf *out, const struct api_backend_info *b, size_t nb)
{
	sbuf_adds(out, "{\"version\":");
	json_add_str(out, TRAINCTL_VERSION);
	sbuf_adds(out, ",\"states\":[");
	/*
	 * active: a supervisor owns the job (jobs/state.h); resumable: the one
	 * state `trainctl resume` takes (backend.c); success: the end that is
	 * no failure (no cause to show)
	 */
	for (int i = 0; i < JOB_NSTATES; i++) {
		enum job_state st = (enum job_state)i;
		sbuf_adds(out, i ? ",{\"name\":" : "{\"name\":");
		json_add_str(out, job_state_name(st));
		sbuf_addf(out, ",\"terminal\":%s,\"active\":%s,\"resumable\":%s,\"success\":%s}",
			  job_state_terminal(st) ? "true" : "false",
			  job_state_active(st) ? "true" : "false", st == JOB_PAUSED ? "true" : "false",
			  st == JOB_SUCCEEDED ? "true" : "false");
	}
	/* the same for sweeps, their trials and endpoints (jobs/state.h) */
	sbuf_adds(out, "],\"sweep_states\":[");
	for (int i = 0; i < SWEEP_NSTATES; i++)
		state_row(out, i, sweep_state_name((enum sweep_state)i),
			  sweep_state_final((enum sweep_state)i));
	sbuf_adds(out, "],\"trial_states\":[");
	for (int i = 0; i < TRIAL_NSTATES; i++)
		state_row(out, i, trial_state_name((enum trial_state)i),
			  trial_state_final((enum trial_state)i));
	sbuf_adds(out, "],\"endpoint_states\":[");
	for (int i = 0; i < ENDPOINT_NSTATES; i++)
		state_row(out, i, endpoint_state_name((enum endpoint_state)i),
			  endpoint_state_final((enum endpoint_state)i));
	sbuf_adds(out, "],\"backends\":[");
	for (size_t i = 0; i < nb; i++) {
		sbuf_adds(out, i ? ",{\"name\":" : "{\"name\":");
		json_add_str(out, b[i].name);
		sbuf_addf(out, ",\"available\":%s,\"multi_node\":%s,\"why\":",
			  b[i].available ? "true" : "false", b[i].multi_node ? "true" : "false");
		json_add_str(out, b[i].why);
		sbuf_addch(out, '}');
	}
	sbuf_adds(out, "]}");
}

int h_info(struct srv *s, struct MHD_Connection *con)
{
	/* looked at on every request: PATH and the Slurm configuration may change */
	char *sbatch = which("sbatch");
	const char *conf = getenv("SLURM_CONF");
	struct backend_probe p = { sbatch != NULL, conf && *conf ? path_exists(conf)
								 : path_exists("/etc/slurm/slurm.conf") };
	free(sbatch);
	struct api_backend_info b[API_NBACKENDS];
	api_backends(s->o.backend, &p, b);
	struct sbuf body = SBUF_INIT;
	api_info_json(&body, b, API_NBACKENDS);
	int ret = reply_json(con, 200, body.buf);
	sbuf_release(&body);
	return ret;
}
