/*
 * placement.c -- devices:, parallel:, nodes: and spares: of a spec: which
 * devices a job gets, checked against this machine, how the planner
 * splits the job over them, and on how many nodes it runs; see spec_int.h.
 */
#include "spec/spec_int.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "devices/devices.h"
#include "plan/plan.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- devices: ---- */

static int r_dev_type(struct walk *w, yaml_node_t *n, const char *key)
{
	int rc = walk_string(w, n, key, &w->s->device_type);
	if (rc)
		return rc;
	w->type_line = line_of(n);
	if (!device_kind_find(w->s->device_type))
		return walk_fail(w, n, key, "'%s' is not a device type (one of: %s)",
				 w->s->device_type, device_kind_names());
	return 0;
}

static int r_dev_per_node(struct walk *w, yaml_node_t *n, const char *key)
{
	w->per_node_line = line_of(n);
	w->per_node_set = true;
	if (plain(n) && !strcmp(scalar(n), "all")) {
		w->per_node_all = true;
		return 0;
	}
	int rc = walk_int(w, n, key, 1, 1024, &w->s->per_node);
	if (rc && plain(n) && !strcmp(scalar(n), "0"))
		return walk_fail(w, n, key, "must be at least 1 (a job needs a device)");
	return rc;
}

static int r_dev_ids(struct walk *w, yaml_node_t *n, const char *key)
{
	w->ids_line = line_of(n);
	w->s->device_ids_given = true;
	if (n->type != YAML_SEQUENCE_NODE)
		return walk_fail(w, n, key, "must be a list of device ids");
	size_t cnt = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
	if (cnt == 0)
		return walk_fail(w, n, key, "must not be empty");
	if (cnt > 1024)
		return walk_fail(w, n, key, "too many ids");
	free(w->s->device_ids);
	w->s->device_ids = xcalloc(cnt, sizeof(int));
	size_t k = 0;
	for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top; i++) {
		yaml_node_t *item = yaml_document_get_node(w->doc, *i);
		int id;
		int rc = walk_int(w, item ? item : n, key, 0, 65535, &id);
		if (rc)
			return rc;
		for (size_t j = 0; j < k; j++)
			if (w->s->device_ids[j] == id)
				return walk_fail(w, item, key, "id %d is listed twice", id);
		w->s->device_ids[k++] = id;
	}
	if (w->per_node_set && !w->per_node_all && w->s->per_node != (int)cnt)
		return walk_fail(w, n, key, "lists %zu ids but per_node is %d", cnt, w->s->per_node);
	w->s->per_node = (int)cnt;
	return 0;
}

static int r_dev_hccn(struct walk *w, yaml_node_t *n, const char *key)
{
	char *v = NULL;
	int rc = walk_string(w, n, key, &v);
	if (rc)
		return rc;
	free(w->s->hccn_conf);
	w->s->hccn_conf = path_absolute(v, w->base);
	free(v);
	/* "{node}" is each node's own file, read on that node (docs/slurm.md) */
	if (!strstr(w->s->hccn_conf, "{node}") && !path_exists(w->s->hccn_conf))
		return walk_fail(w, n, key, "'%s' does not exist", w->s->hccn_conf);
	return 0;
}

/* devices.min_per_node: run on fewer when some fail their health check (devices/health.h) */
static int r_dev_min(struct walk *w, yaml_node_t *n, const char *key)
{
	return walk_int(w, n, key, 1, 1024, &w->s->min_per_node);
}

static const struct rule device_rules[] = {
	{ "type", r_dev_type, NULL },
	{ "min_per_node", r_dev_min, NULL },
	{ "per_node", r_dev_per_node, NULL },
	{ "ids", r_dev_ids, NULL },
	{ "hccn_conf", r_dev_hccn, NULL },
	{ NULL, NULL, NULL },
};

int spec_r_devices(struct walk *w, yaml_node_t *n, const char *key)
{
	(void)key;
	w->devices_line = w->key_line;
	return walk_map(w, n, "devices.", device_rules);
}

/* ---- parallel: (the planner, docs/plan.md) ---- */

static int r_par_strategy(struct walk *w, yaml_node_t *n, const char *key)
{
	static const char *const strategies[] = { "auto", NULL };
	char *v = NULL;
	int rc = walk_enum(w, n, key, strategies, &v);
	free(v);
	w->s->parallel.on = rc == 0;
	return rc;
}

static int r_par_model(struct walk *w, yaml_node_t *n, const char *key)
{
	char *v = NULL;
	int rc = walk_string(w, n, key, &v);
	if (rc)
		return rc;
	free(w->s->parallel.model);
	/* a built-in name stays a name; anything with a slash or .yaml is a file */
	if (strchr(v, '/') || strstr(v, ".yaml") || strstr(v, ".yml")) {
		w->s->parallel.model = path_absolute(v, w->base);
		free(v);
		if (!path_exists(w->s->parallel.model))
			return walk_fail(w, n, key, "'%s' does not exist", w->s->parallel.model);
		return 0;
	}
	w->s->parallel.model = v;
	return 0;
}

static int r_par_batch(struct walk *w, yaml_node_t *n, const char *key)
{
	int v;
	int rc = walk_int(w, n, key, 1, 1 << 30, &v);
	w->s->parallel.global_batch = v;
	return rc;
}

static int r_par_cluster(struct walk *w, yaml_node_t *n, const char *key)
{
	char *v = NULL;
	int rc = walk_string(w, n, key, &v);
	if (rc)
		return rc;
	free(w->s->parallel.cluster);
	w->s->parallel.cluster = path_absolute(v, w->base);
	free(v);
	/* read later by the planner (with a size cap); a FIFO or a device is refused here */
	struct stat sb;
	if (stat(w->s->parallel.cluster, &sb) < 0)
		return walk_fail(w, n, key, "'%s' does not exist", w->s->parallel.cluster);
	if (!S_ISREG(sb.st_mode))
		return walk_fail(w, n, key, "'%s' is not a regular file", w->s->parallel.cluster);
	return 0;
}

static int r_par_memory(struct walk *w, yaml_node_t *n, const char *key)
{
	if (n->type != YAML_SCALAR_NODE || !plan_parse_size(scalar(n), &w->s->parallel.memory) ||
	    w->s->parallel.memory <= 0)
		return walk_fail(w, n, key, "must be a size such as 80GiB");
	return 0;
}

static const struct rule parallel_rules[] = {
	{ "strategy", r_par_strategy, NULL },
	{ "model", r_par_model, NULL },
	{ "global_batch", r_par_batch, NULL },
	{ "cluster", r_par_cluster, NULL },
	{ "memory", r_par_memory, NULL },
	{ NULL, NULL, NULL },
};

int spec_r_parallel(struct walk *w, yaml_node_t *n, const char *key)
{
	w->parallel_line = line_of(n);
	int rc = walk_map(w, n, "parallel.", parallel_rules);
	if (rc)
		return rc;
	if (!w->s->parallel.on)
		return walk_fail(w, n, key, "strategy: auto is required (the only strategy)");
	if (!w->s->parallel.model)
		return walk_fail(w, n, key, "model: is required");
	if (!w->s->parallel.global_batch)
		return walk_fail(w, n, key, "global_batch: is required");
	return 0;
}

int spec_plan_for(const struct spec *s, int nodes, struct spec_plan *out, struct tc_err *err)
{
	struct plan_strategy_req req = {
		.model = s->parallel.model, .devices = s->per_node * nodes, .nodes = nodes,
		.global_batch = s->parallel.global_batch, .cluster_file = s->parallel.cluster,
		.memory = s->parallel.memory, .seq_len = 0,
	};
	struct plan_candidate best;
	memset(&best, 0, sizeof(best));
	memset(out, 0, sizeof(*out));
	int rc = plan_strategy_best(&req, &best, err);
	if (rc)
		return rc;
	out->dp = best.dp;
	out->tp = best.tp;
	out->pp = best.pp;
	out->micro_batch = best.mb;
	out->step_time = best.step_time;
	struct sbuf part = SBUF_INIT;
	for (int i = 0; i < best.pp; i++)
		sbuf_addf(&part, "%s%d", i ? "," : "", best.layers[i]);
	out->partition = sbuf_detach(&part);
	plan_candidate_release(&best);
	return 0;
}

void spec_plan_release(struct spec_plan *p)
{
	free(p->partition);
	p->partition = NULL;
}

int spec_replan(struct spec *s, int nodes, struct tc_err *err)
{
	struct spec_plan p;
	int rc = spec_plan_for(s, nodes, &p, err);
	if (rc)
		return rc;
	s->parallel.dp = p.dp;
	s->parallel.tp = p.tp;
	s->parallel.pp = p.pp;
	s->parallel.micro_batch = p.micro_batch;
	s->parallel.step_time = p.step_time;
	free(s->parallel.partition);
	s->parallel.partition = p.partition; /* taken over */
	return 0;
}

/* Ask the planner for the best split of this job's devices (all nodes: nodes.max). */
int spec_plan_parallel(struct walk *w)
{
	struct tc_err perr = TC_ERR_INIT;
	if (spec_replan(w->s, w->s->nodes, &perr)) {
		tc_error(w->err, TC_ESPEC, "%s:%d: parallel: %s", w->file, w->parallel_line,
			 perr.msg ? perr.msg : "no plan");
		tc_err_release(&perr);
		return TC_ESPEC;
	}
	return 0;
}

static void dev_prefix(struct sbuf *sb, const struct dev_where *dw, int line, const char *key)
{
	if (dw->file)
		sbuf_addf(sb, "%s:%d: %s: ", dw->file, line, key);
	else
		sbuf_adds(sb, "run: --device, --nproc: ");
}

/* "this machine has none: NVML is not present ...; to try ...": why, and the way around */
static void dev_none(struct sbuf *sb, const char *type, int want)
{
	sbuf_adds(sb, "this machine has none: ");
	devices_why_none(type, sb);
	sbuf_addf(sb, "; to try trainctl without them, set TRAINCTL_FAKE_DEVICES=%s:%d", type,
		  want > 0 ? want : 2);
}

int spec_finish_devices(struct spec *s, const struct dev_where *dw, bool per_node_all,
			struct tc_err *err)
{
	struct device_list devs = DEVICE_LIST_INIT;
	struct sbuf msg = SBUF_INIT;
	int rc = 0;
	/* cpu is counted by sysconf: no device library to load on a cpu job's start */
	if (strcmp(s->device_type, "cpu") != 0)
		devices_discover(&devs);
	int have = devices_count(&devs, s->device_type);
	if (per_node_all) {
		if (have < 0) {
			dev_prefix(&msg, dw, dw->count_line, "devices.per_node");
			sbuf_addf(&msg, "'all' needs a way to count %s devices on this machine; give a number or ids",
				  s->device_type);
			goto out;
		}
		if (have == 0) {
			dev_prefix(&msg, dw, dw->count_line, "devices.per_node");
			sbuf_addf(&msg, "'all' %s devices, but ", s->device_type);
			dev_none(&msg, s->device_type, 0);
			goto out;
		}
		s->per_node = have;
	}
	if (strcmp(s->device_type, "cpu") != 0 && have >= 0) {
		if (s->per_node > have) {
			dev_prefix(&msg, dw, dw->count_line, dw->count_key);
			sbuf_addf(&msg, "%d %s device%s requested but ", s->per_node, s->device_type,
				  s->per_node == 1 ? "" : "s");
			if (have)
				sbuf_addf(&msg, "this machine has %d", have);
			else
				dev_none(&msg, s->device_type, s->per_node);
			goto out;
		}
		for (int i = 0; s->device_ids && i < s->per_node; i++) {
			bool found = false;
			for (size_t j = 0; j < devs.nr; j++)
				if (!strcmp(devs.v[j].type, s->device_type) && devs.v[j].id == s->device_ids[i])
					found = true;
			if (!found) {
				dev_prefix(&msg, dw, dw->count_line, "devices.ids");
				sbuf_addf(&msg, "this machine has no %s %d", s->device_type, s->device_ids[i]);
				goto out;
			}
		}
	}
	if (!s->device_ids) {
		s->device_ids = xcalloc((size_t)s->per_node, sizeof(int));
		for (int i = 0; i < s->per_node; i++)
			s->device_ids[i] = i;
	}
out:
	if (msg.len)
		rc = tc_error(err, TC_ESPEC, "%s", msg.buf);
	sbuf_release(&msg);
	device_list_release(&devs);
	return rc;
}

/* ---- nodes: and spares: (docs/slurm.md: elastic jobs, spares) ---- */

static int r_nodes_min(struct walk *w, yaml_node_t *n, const char *key)
{
	return walk_int(w, n, key, 1, 4096, &w->s->nodes_min);
}

static int r_nodes_max(struct walk *w, yaml_node_t *n, const char *key)
{
	return walk_int(w, n, key, 1, 4096, &w->s->nodes);
}

/* nodes.wait: a duration, or 0 (below nodes.min the job fails at once) */
static int r_nodes_wait(struct walk *w, yaml_node_t *n, const char *key)
{
	const char *v = n->type == YAML_SCALAR_NODE && !is_null(n) ? scalar(n) : NULL;
	if (v && !strcmp(v, "0")) {
		w->s->nodes_wait = 0;
		return 0;
	}
	if (!v || !parse_duration(v, 7L * 86400, &w->s->nodes_wait))
		return walk_fail(w, n, key,
				 "must be a duration with a unit, such as 10m, 1h or 90s (at most "
				 "7d), or 0, not '%s'", v ? v : "a list or mapping");
	return 0;
}

static const struct rule nodes_rules[] = {
	{ "min", r_nodes_min, NULL },
	{ "max", r_nodes_max, NULL },
	{ "wait", r_nodes_wait, NULL },
	{ NULL, NULL, NULL },
};

/* nodes: N, or nodes: {min: A, max: B} (elastic: the job goes on with fewer, down to A) */
int spec_r_nodes(struct walk *w, yaml_node_t *n, const char *key)
{
	w->nodes_line = line_of(n);
	if (n->type != YAML_MAPPING_NODE) {
		int rc = walk_int(w, n, key, 1, 4096, &w->s->nodes);
		w->s->nodes_min = w->s->nodes;
		return rc;
	}
	w->s->nodes_min = w->s->nodes = 0;
	int rc = walk_map(w, n, "nodes.", nodes_rules);
	if (!rc && (!w->s->nodes_min || !w->s->nodes))
		rc = walk_fail(w, n, key, "takes both min and max ({min: 1, max: 2})");
	if (!rc && w->s->nodes_min > w->s->nodes)
		rc = walk_fail(w, n, key, "min (%d) is more than max (%d)", w->s->nodes_min,
			       w->s->nodes);
	return rc;
}

int spec_r_spares(struct walk *w, yaml_node_t *n, const char *key)
{
	return walk_int(w, n, key, 0, 4096, &w->s->spares);
}
