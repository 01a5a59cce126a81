/*
 * env.c -- the worker environment contract (docs/environment.md).
 *
 * Three layers, each a table: the torchrun set (with torchrun's meaning for
 * every variable), the device kind (devices.h) and the framework profile.
 */
#include "launch/launch.h"
#include "core/sbuf.h"
#include "core/xalloc.h"
#include "devices/devices.h"
#include "jobs/runpath.h"

#include <stdlib.h>
#include <string.h>

/* ---- framework profiles ---- */

typedef void (*profile_fn)(const struct env_plan *p, int local_rank, struct strvec *out);

static int global_rank(const struct env_plan *p, int local_rank)
{
	return p->node_rank * p->spec->per_node + local_rank;
}

static int world_size(const struct env_plan *p)
{
	return p->nnodes * p->spec->per_node;
}

/*
 * The id a rank addresses its device by, or -1.  On a kind whose ids are
 * physical (npu): a framework started the rank-table way reads the physical
 * id, the one hccl.json names (MindSpore's run_distribute_train.sh sets
 * DEVICE_ID=$i and no visibility variable); any other framework sees the
 * visibility variable and, as CANN documents for ASCEND_RT_VISIBLE_DEVICES,
 * addresses its devices by index 0..n-1, which is the local rank.
 */
static int rank_device_id(const struct env_plan *p, bool physical, int local_rank)
{
	const struct device_kind *k = device_kind_find(p->spec->device_type);
	if (!k || k->id_mode == DEVID_NONE)
		return -1;
	return k->id_mode == DEVID_PHYSICAL && physical ? p->spec->device_ids[local_rank]
							: local_rank;
}

/* MindSpore and TensorFlow on Ascend: what their rank-table launch scripts export. */
static void profile_ascend_style(const struct env_plan *p, int local_rank, struct strvec *out)
{
	env_setf(out, "RANK_ID", "%d", global_rank(p, local_rank));
	env_setf(out, "RANK_SIZE", "%d", world_size(p));
	int id = rank_device_id(p, true, local_rank);
	if (id >= 0)
		env_setf(out, "DEVICE_ID", "%d", id);
	if (p->rank_table) {
		env_set(out, "RANK_TABLE_FILE", p->rank_table);
		/* the scripts' arithmetic: rank_start = DEVICE_NUM * SERVER_ID */
		env_setf(out, "DEVICE_NUM", "%d", p->spec->per_node);
		env_setf(out, "SERVER_ID", "%d", p->node_rank);
	}
}

/* MindSpore's older scripts name the rank table MINDSPORE_HCCL_CONFIG_PATH. */
static void profile_mindspore(const struct env_plan *p, int local_rank, struct strvec *out)
{
	profile_ascend_style(p, local_rank, out);
	if (p->rank_table)
		env_set(out, "MINDSPORE_HCCL_CONFIG_PATH", p->rank_table);
}

static void profile_paddle(const struct env_plan *p, int local_rank, struct strvec *out)
{
	struct sbuf eps = SBUF_INIT;
	env_setf(out, "PADDLE_TRAINER_ID", "%d", global_rank(p, local_rank));
	env_setf(out, "PADDLE_TRAINERS_NUM", "%d", world_size(p));
	for (int r = 0; r < p->spec->per_node; r++)
		sbuf_addf(&eps, "%s%s:%d", r ? "," : "", p->master_addr, p->extra_ports[r]);
	env_set(out, "PADDLE_TRAINER_ENDPOINTS", eps.buf);
	env_setf(out, "PADDLE_CURRENT_ENDPOINT", "%s:%d", p->master_addr, p->extra_ports[local_rank]);
	sbuf_release(&eps);
}

static const struct framework_profile {
	const char *name;
	profile_fn per_rank; /* NULL: the torchrun set is all it reads */
	bool rank_ports;
	/* started the rank-table way: physical device ids, no visibility
	 * variable on kinds with physical ids (rank_device_id) */
	bool physical_ids;
} profiles[] = {
	{ "pytorch", NULL, false, false },
	{ "mindspore", profile_mindspore, false, true },
	{ "tensorflow", profile_ascend_style, false, true },
	{ "paddle", profile_paddle, true, false },
};

static const struct framework_profile *profile_find(const char *name)
{
	for (size_t i = 0; i < sizeof(profiles) / sizeof(profiles[0]); i++)
		if (!strcmp(profiles[i].name, name))
			return &profiles[i];
	return &profiles[0];
}

bool env_needs_rank_ports(const char *framework)
{
	return profile_find(framework)->rank_ports;
}

/* ---- the common and per-rank sets ---- */

void env_common(const struct env_plan *p, struct strvec *out)
{
	const struct spec *s = p->spec;
	env_setf(out, "WORLD_SIZE", "%d", world_size(p));
	env_setf(out, "LOCAL_WORLD_SIZE", "%d", s->per_node);
	env_setf(out, "GROUP_RANK", "%d", p->node_rank);
	env_setf(out, "GROUP_WORLD_SIZE", "%d", p->nnodes);
	env_setf(out, "ROLE_WORLD_SIZE", "%d", world_size(p));
	env_set(out, "ROLE_NAME", "default");
	env_set(out, "MASTER_ADDR", p->master_addr);
	env_setf(out, "MASTER_PORT", "%d", p->master_port);
	env_setf(out, "TORCHELASTIC_RESTART_COUNT", "%d", p->restart_count);
	env_setf(out, "TORCHELASTIC_MAX_RESTARTS", "%d", s->max_restarts);
	env_set(out, "TORCHELASTIC_RUN_ID", p->job_id);
	/* No agent-hosted store: rank 0 hosts it at MASTER_ADDR:MASTER_PORT,
	 * as with torchrun's static rendezvous. */
	env_set(out, "TORCHELASTIC_USE_AGENT_STORE", "False");
	/* torchrun's defaults, kept when the user set their own */
	const char *nccl = getenv("NCCL_ASYNC_ERROR_HANDLING");
	env_set(out, "NCCL_ASYNC_ERROR_HANDLING", nccl ? nccl : "1");
	const char *tnccl = getenv("TORCH_NCCL_ASYNC_ERROR_HANDLING");
	env_set(out, "TORCH_NCCL_ASYNC_ERROR_HANDLING", tnccl ? tnccl : "1");
	bool omp_in_spec = false;
	for (size_t i = 0; i < s->nenv; i++)
		if (!strcmp(s->env[i].key, "OMP_NUM_THREADS"))
			omp_in_spec = true;
	if (!omp_in_spec && !getenv("OMP_NUM_THREADS") && s->per_node > 1)
		env_set(out, "OMP_NUM_THREADS", "1");

	env_set(out, "TRAINCTL_JOB_ID", p->job_id);
	env_set(out, "TRAINCTL_OUTPUT_DIR", p->output_dir);
	env_set(out, "TRAINCTL_CKPT_DIR", p->ckpt_dir);
	env_set(out, "TRAINCTL_DATA_DIR", p->data_dir);
	env_set(out, "TRAINCTL_LOG_DIR", p->log_dir);
	env_set(out, "TRAINCTL_TENSORBOARD_DIR", p->tb_dir);
	if (p->resume_from)
		env_set(out, "TRAINCTL_RESUME_FROM", p->resume_from);
	if (p->stop_file)
		env_set(out, "TRAINCTL_STOP_FILE", p->stop_file);

	const struct device_kind *k = device_kind_find(s->device_type);
	if (k && k->visible_var &&
	    !(k->id_mode == DEVID_PHYSICAL && profile_find(s->framework)->physical_ids)) {
		char *ids = device_ids_text(s->device_ids, s->per_node);
		env_set(out, k->visible_var, ids);
		free(ids);
	}
	if (p->rank_table)
		env_set(out, "RANK_TABLE_FILE", p->rank_table);
	if (s->parallel.on) {
		env_setf(out, "TRAINCTL_DP", "%d", s->parallel.dp);
		env_setf(out, "TRAINCTL_TP", "%d", s->parallel.tp);
		env_setf(out, "TRAINCTL_PP", "%d", s->parallel.pp);
		env_setf(out, "TRAINCTL_MICRO_BATCH", "%d", s->parallel.micro_batch);
		env_set(out, "TRAINCTL_PIPELINE_PARTITION", s->parallel.partition);
	}
	const char *pypath = getenv("PYTHONPATH");
	for (size_t i = 0; i < s->nenv; i++) {
		const char *v = s->env[i].val;
		if (s->env[i].from != ENV_FROM_VALUE) {
			/* a secret's value is the resolved one; unresolved (job.env): never written */
			v = p->secret_env ? env_get(p->secret_env, s->env[i].key) : NULL;
			if (!v)
				v = "***";
		}
		env_set(out, s->env[i].key, v);
		if (!strcmp(s->env[i].key, "PYTHONPATH"))
			pypath = v;
	}
	if (p->site_dir && p->stack_dir) {
		/* the stack dump hook first; the path the job had stays after it */
		struct sbuf pp = SBUF_INIT;
		sbuf_adds(&pp, p->site_dir);
		if (pypath && *pypath)
			sbuf_addf(&pp, ":%s", pypath);
		env_set(out, "PYTHONPATH", pp.buf);
		sbuf_release(&pp);
		env_set(out, "TRAINCTL_STACK_DIR", p->stack_dir);
		env_setf(out, "TRAINCTL_STACK_SIGNAL", "%d", p->stack_signal);
	}
}

void env_rank(const struct env_plan *p, int local_rank, struct strvec *out)
{
	int rank = global_rank(p, local_rank);
	env_setf(out, "RANK", "%d", rank);
	env_setf(out, "LOCAL_RANK", "%d", local_rank);
	env_setf(out, "ROLE_RANK", "%d", rank);
	struct sbuf ef = SBUF_INIT;
	sbuf_addf(&ef, "%s/", p->log_dir);
	run_leaf(&ef, RUN_RANK_ERROR, rank);
	env_set(out, "TORCHELASTIC_ERROR_FILE", ef.buf);
	sbuf_release(&ef);
	if (p->metrics_channel) {
		struct sbuf r = SBUF_INIT;
		sbuf_addf(&r, "%d", rank);
		char *ch = env_metrics_channel(p->log_dir, r.buf);
		env_set(out, "TRAINCTL_METRICS_CHANNEL", ch);
		free(ch);
		sbuf_release(&r);
	}
	const struct framework_profile *f = profile_find(p->spec->framework);
	const struct device_kind *k = device_kind_find(p->spec->device_type);
	if (k && k->id_mode == DEVID_PHYSICAL) {
		/* CANN: with ASCEND_RT_VISIBLE_DEVICES set, ASCEND_DEVICE_ID may
		 * only hold an index; both variables always agree here */
		int id = rank_device_id(p, f->physical_ids, local_rank);
		env_setf(out, "DEVICE_ID", "%d", id);
		env_setf(out, "ASCEND_DEVICE_ID", "%d", id);
	}
	if (f->per_rank)
		f->per_rank(p, local_rank, out);
}

char *env_metrics_channel(const char *log_dir, const char *rank)
{
	struct sbuf sb = SBUF_INIT;
	sbuf_addf(&sb, "%s/metrics-rank-%s.dlll", log_dir, rank);
	return sbuf_detach(&sb);
}

char *env_file_text(const struct env_plan *p)
{
	struct sbuf sb = SBUF_INIT;
	struct strvec common = STRVEC_INIT;
	struct env_plan redacted = *p;
	redacted.secret_env = NULL; /* job.env is a file: secrets and files' values stay out of it */
	env_common(&redacted, &common);
	sbuf_addf(&sb, "# trainctl job %s: the environment trainctl gives every worker\n"
		       "# (on top of the environment trainctl itself was started with).\n",
		  p->job_id);
	for (size_t i = 0; i < common.nr; i++) {
		const char *eq = strchr(common.v[i], '=');
		sbuf_adds(&sb, "export ");
		sbuf_add(&sb, common.v[i], (size_t)(eq - common.v[i]) + 1);
		sbuf_add_shell_quoted(&sb, eq + 1);
		sbuf_addch(&sb, '\n');
	}
	for (int r = 0; r < p->spec->per_node; r++) {
		struct strvec mine = STRVEC_INIT;
		env_rank(p, r, &mine);
		sbuf_addf(&sb, "# local rank %d:", r);
		for (size_t i = 0; i < mine.nr; i++) {
			const char *eq = strchr(mine.v[i], '=');
			sbuf_addch(&sb, ' ');
			sbuf_add(&sb, mine.v[i], (size_t)(eq - mine.v[i]) + 1);
			sbuf_add_shell_quoted(&sb, eq + 1);
		}
		sbuf_addch(&sb, '\n');
		strvec_clear(&mine);
	}
	strvec_clear(&common);
	return sbuf_detach(&sb);
}

void env_drop_supervisor_only(struct strvec *env)
{
	const char *only = env_get(env, "TRAINCTL_SUPERVISOR_ONLY");
	if (!only)
		return;
	char *list = xstrdup(only);
	for (char *save = NULL, *name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save))
		while (env_get(env, name))
			env_unset(env, name);
	free(list);
	env_unset(env, "TRAINCTL_SUPERVISOR_ONLY");
}
