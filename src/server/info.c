/*
 * info.c -- GET /api/v1/info: what the server says of itself, so that the
 * web UI keeps no lists of its own: the job states (their names, and
 * which are terminal or active), the backends with whether a job may use
 * them here and why not, and the version.
 */
#include "server/api_int.h"
#include "core/json.h"
#include "core/util.h"
#include "core/version.h"

#include <stdlib.h>
#include <string.h>

/*
 * TODO(issue 11): take the states from src/jobs/state.h (enum job_state,
 * job_state_name, job_state_terminal, job_state_active) and the backend
 * names from src/backend/names.h once they are in main; this table and
 * api_backends say the same in the meantime.  active: a supervisor owns
 * the job (starting, running, restarting).
 */
static const struct {
	const char *name;
	bool terminal, active;
} states[] = {
	{ "queued", false, false },    { "starting", false, true }, { "running", false, true },
	{ "restarting", false, true }, { "paused", false, false },  { "preempted", false, false },
	{ "succeeded", true, false },  { "failed", true, false },   { "killed", true, false },
	{ "lost", true, false },
};

void api_backends(const char *forced, const struct backend_probe *p,
		  struct api_backend_info out[API_NBACKENDS])
{
	/* a spec with nodes > 1 needs backend: slurm (spec.c) */
	out[0] = (struct api_backend_info){ "local", true, false, NULL };
	out[1] = (struct api_backend_info){ "slurm", true, true, NULL };
	if (!p->have_sbatch) {
		out[1].available = false;
		out[1].why = "sbatch is not on the server's PATH";
	} else if (!p->have_conf) {
		out[1].available = false;
		out[1].why = "the server has no Slurm configuration (SLURM_CONF or /etc/slurm/slurm.conf)";
	}
	if (!forced)
		return;
	/* --backend: every job runs there, whatever its spec says */
	for (size_t i = 0; i < API_NBACKENDS; i++)
		if (strcmp(out[i].name, forced) != 0) {
			out[i].available = false;
			out[i].why = !strcmp(forced, "slurm") ? "server started with --backend slurm"
							      : "server started with --backend local";
		}
}

void api_info_json(struct sbuf *out, const struct api_backend_info *b, size_t nb)
{
	sbuf_adds(out, "{\"version\":");
	json_add_str(out, TRAINCTL_VERSION);
	sbuf_adds(out, ",\"states\":[");
	for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++) {
		sbuf_adds(out, i ? ",{\"name\":" : "{\"name\":");
		json_add_str(out, states[i].name);
		sbuf_addf(out, ",\"terminal\":%s,\"active\":%s}", states[i].terminal ? "true" : "false",
			  states[i].active ? "true" : "false");
	}
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
