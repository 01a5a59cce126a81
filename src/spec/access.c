/*
 * access.c -- a stored spec read back (spec.h, spec_from_json): the JSON
 * spec_to_json wrote into the database (jobs.spec_json), turned into a
 * struct spec once so that readers use its fields instead of looking keys
 * up in the text.
 */
#include "spec/spec_int.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* A string member replaces *dst (a missing or non-string one keeps it). */
static void take_str(json_t *o, const char *key, char **dst)
{
	const char *v = json_string_value(json_object_get(o, key));
	if (v) {
		free(*dst);
		*dst = xstrdup(v);
	}
}

static void take_int(json_t *o, const char *key, int *dst)
{
	json_t *v = json_object_get(o, key);
	if (json_is_integer(v))
		*dst = (int)json_integer_value(v);
}

static void take_strvec(json_t *a, struct strvec *dst)
{
	size_t i;
	json_t *v;
	json_array_foreach(a, i, v)
		if (json_is_string(v))
			strvec_push(dst, json_string_value(v));
}

static struct spec_kv *take_kv(json_t *o, size_t *n)
{
	struct spec_kv *kv = xcalloc(json_object_size(o) + 1, sizeof(*kv));
	const char *k;
	json_t *v;
	*n = 0;
	json_object_foreach(o, k, v) {
		kv[*n].key = xstrdup(k);
		kv[*n].val = json_is_string(v) ? xstrdup(json_string_value(v)) : NULL;
		/* env: {secret: NAME} or {file: PATH} (serialize.c) */
		const char *sec = json_string_value(json_object_get(v, "secret"));
		const char *file = json_string_value(json_object_get(v, "file"));
		if (sec || file) {
			kv[*n].from = sec ? ENV_FROM_SECRET : ENV_FROM_FILE;
			kv[*n].val = xstrdup(sec ? sec : file);
		}
		(*n)++;
	}
	return kv;
}

static void take_devices(struct spec *s, json_t *d)
{
	take_str(d, "type", &s->device_type);
	take_int(d, "per_node", &s->per_node);
	take_str(d, "hccn_conf", &s->hccn_conf);
	take_int(d, "min_per_node", &s->min_per_node);
	if (s->per_node < 1)
		s->per_node = 1;
	/* per_node ids, as spec_to_json writes them (0, 1, ... where none are stored) */
	json_t *ids = json_object_get(d, "ids");
	s->device_ids = xcalloc((size_t)s->per_node, sizeof(int));
	for (int i = 0; i < s->per_node; i++) {
		json_t *v = json_array_get(ids, (size_t)i);
		s->device_ids[i] = json_is_integer(v) ? (int)json_integer_value(v) : i;
	}
}

static void take_checkpoint(struct spec *s, json_t *c)
{
	take_str(c, "dir", &s->ckpt_dir);
	take_int(c, "keep", &s->ckpt_keep);
	const char *r = json_string_value(json_object_get(c, "resume"));
	if (!r || !strcmp(r, "auto")) {
		s->resume = RESUME_AUTO;
	} else if (!strcmp(r, "never")) {
		s->resume = RESUME_NEVER;
	} else {
		s->resume = RESUME_PATH;
		s->resume_path = xstrdup(r);
	}
}

static void take_parallel(struct spec *s, json_t *p)
{
	const char *strategy = json_string_value(json_object_get(p, "strategy"));
	s->parallel.on = strategy && !strcmp(strategy, "auto");
	take_str(p, "model", &s->parallel.model);
	take_str(p, "cluster", &s->parallel.cluster);
	json_t *v = json_object_get(p, "global_batch");
	if (json_is_integer(v))
		s->parallel.global_batch = (long)json_integer_value(v);
	if (json_is_number(v = json_object_get(p, "memory")))
		s->parallel.memory = json_number_value(v);
	json_t *plan = json_object_get(p, "plan");
	take_int(plan, "dp", &s->parallel.dp);
	take_int(plan, "tp", &s->parallel.tp);
	take_int(plan, "pp", &s->parallel.pp);
	take_int(plan, "micro_batch", &s->parallel.micro_batch);
	take_str(plan, "partition", &s->parallel.partition);
	if (json_is_number(v = json_object_get(plan, "step_time")))
		s->parallel.step_time = json_number_value(v);
}

static void take_slurm(struct spec *s, json_t *sl)
{
	take_str(sl, "partition", &s->slurm.partition);
	take_str(sl, "account", &s->slurm.account);
	take_str(sl, "qos", &s->slurm.qos);
	take_str(sl, "time", &s->slurm.time);
	take_str(sl, "signal", &s->slurm.signal);
	take_str(sl, "gres", &s->slurm.gres);
	take_strvec(json_object_get(sl, "extra"), &s->slurm.extra);
}

static void take_io(struct spec *s, json_t *in, json_t *out)
{
	size_t i;
	json_t *v;
	s->inputs = xcalloc(json_array_size(in) + 1, sizeof(*s->inputs));
	json_array_foreach(in, i, v) {
		const char *from = json_string_value(json_object_get(v, "from"));
		const char *to = json_string_value(json_object_get(v, "to"));
		if (!from || !to)
			continue;
		s->inputs[s->ninputs].from = xstrdup(from);
		s->inputs[s->ninputs++].to = xstrdup(to);
	}
	take_str(out, "upload_to", &s->upload_to);
	take_int(out, "every_seconds", &s->upload_every_seconds);
	take_int(out, "every_steps", &s->upload_every_steps);
}

static void take_metrics(struct spec *s, json_t *m)
{
	take_str(m, "format", &s->metrics_format);
	if (s->metrics_format && !strcmp(s->metrics_format, "auto")) {
		free(s->metrics_format); /* NULL is auto */
		s->metrics_format = NULL;
	}
	take_int(m, "warmup_steps", &s->metrics_warmup_steps);
	take_int(m, "batch_size", &s->metrics_batch_size);
	take_str(m, "accuracy", &s->metrics_accuracy);
	take_strvec(json_object_get(m, "files"), &s->metrics_files);
	take_strvec(json_object_get(m, "tensorboard_dirs"), &s->metrics_tb_dirs);
	json_t *pats = json_object_get(m, "patterns"), *one;
	size_t i;
	if (!json_is_array(pats) || !json_array_size(pats))
		return;
	s->metrics_patterns = xcalloc(json_array_size(pats), sizeof(*s->metrics_patterns));
	json_array_foreach(pats, i, one) {
		const char *re = json_string_value(json_object_get(one, "regex"));
		json_t *v = json_object_get(one, "values"), *g;
		const char *name;
		if (!re || !json_is_object(v))
			continue; /* written by serialize.c: not seen */
		struct metrics_pattern *p = &s->metrics_patterns[s->metrics_npatterns++];
		p->regex = xstrdup(re);
		p->step = (int)json_integer_value(json_object_get(one, "step"));
		p->names = xcalloc(json_object_size(v) + 1, sizeof(*p->names));
		p->groups = xcalloc(json_object_size(v) + 1, sizeof(*p->groups));
		json_object_foreach(v, name, g) {
			p->names[p->nvalues] = xstrdup(name);
			p->groups[p->nvalues++] = (int)json_integer_value(g);
		}
	}
}

static void take_real(json_t *o, const char *key, double *out)
{
	json_t *v = json_object_get(o, key);
	if (json_is_number(v))
		*out = json_number_value(v);
}

static void take_diag(struct spec *s, json_t *wd, json_t *on_log)
{
	if (json_is_object(wd)) {
		s->watchdog.on = true;
		take_str(wd, "progress_pattern", &s->watchdog.progress_pattern);
		take_int(wd, "warmup_steps", &s->watchdog.warmup_steps);
		take_real(wd, "min_seconds", &s->watchdog.min_seconds);
		take_real(wd, "factor", &s->watchdog.factor);
		take_real(wd, "startup_seconds", &s->watchdog.startup_seconds);
		take_real(wd, "straggler_percent", &s->watchdog.straggler_percent);
		take_int(wd, "straggler_steps", &s->watchdog.straggler_steps);
		take_real(wd, "dump_seconds", &s->watchdog.dump_seconds);
	}
	size_t i;
	json_t *v;
	s->on_log = xcalloc(json_array_size(on_log) + 1, sizeof(*s->on_log));
	json_array_foreach(on_log, i, v) {
		const char *p = json_string_value(json_object_get(v, "pattern"));
		const char *a = json_string_value(json_object_get(v, "action"));
		if (!p || !a)
			continue;
		s->on_log[s->non_log].pattern = xstrdup(p);
		s->on_log[s->non_log++].action = !strcmp(a, "fail")	 ? LOG_ACTION_FAIL
						 : !strcmp(a, "restart") ? LOG_ACTION_RESTART
									 : LOG_ACTION_EXCLUDE_NODE;
	}
}

int spec_from_json(const char *text, struct spec **out, struct tc_err *err)
{
	json_error_t je;
	json_t *o = text ? json_loads(text, 0, &je) : NULL;
	if (!json_is_object(o)) {
		json_decref(o);
		return tc_error(err, TC_ESPEC, "stored spec: %s", text ? "not a JSON object" : "missing");
	}
	struct spec *s = xmalloc(sizeof(*s));
	spec_init(s);
	take_str(o, "name", &s->name);
	json_t *cmd = json_object_get(o, "command");
	if (json_is_string(cmd))
		s->shell = xstrdup(json_string_value(cmd));
	else
		take_strvec(cmd, &s->argv);
	s->args = take_kv(json_object_get(o, "args"), &s->nargs);
	take_str(o, "workdir", &s->workdir);
	s->env = take_kv(json_object_get(o, "env"), &s->nenv);
	take_str(o, "framework", &s->framework);
	take_devices(s, json_object_get(o, "devices"));
	json_t *nodes = json_object_get(o, "nodes");
	if (json_is_object(nodes)) { /* elastic: {min, max} */
		take_int(nodes, "min", &s->nodes_min);
		take_int(nodes, "max", &s->nodes);
		const char *wt = json_string_value(json_object_get(nodes, "wait"));
		long secs;
		if (wt && !strcmp(wt, "0"))
			s->nodes_wait = 0;
		else if (wt && parse_duration(wt, 7L * 86400, &secs))
			s->nodes_wait = secs;
	} else {
		take_int(o, "nodes", &s->nodes);
		s->nodes_min = s->nodes;
	}
	take_int(o, "spares", &s->spares);
	take_str(o, "backend", &s->backend);
	take_slurm(s, json_object_get(o, "slurm"));
	spec_container_take(s, o);
	json_t *r = json_object_get(o, "restart");
	take_int(r, "max_restarts", &s->max_restarts);
	take_int(r, "grace_seconds", &s->grace_seconds);
	/* a word, or a list of them (serialize.c): first_step|always, replace|restart */
	json_t *pols = json_object_get(r, "policy"), *one = json_is_array(pols) ? NULL : pols, *x;
	size_t i = 0;
	for (x = one ? one : json_array_get(pols, 0); x; x = one ? NULL : json_array_get(pols, ++i)) {
		const char *pol = json_string_value(x);
		if (!pol)
			continue;
		if (!strcmp(pol, "restart") || !strcmp(pol, "replace"))
			s->node_policy = !strcmp(pol, "restart") ? NODE_POLICY_RESTART
								 : NODE_POLICY_REPLACE;
		else
			s->restart_policy = !strcmp(pol, "always") ? RESTART_POLICY_ALWAYS
								   : RESTART_POLICY_FIRST_STEP;
	}
	take_checkpoint(s, json_object_get(o, "checkpoint"));
	take_int(o, "priority", &s->priority);
	s->preemptible = json_is_true(json_object_get(o, "preemptible"));
	const char *mr = json_string_value(json_object_get(json_object_get(o, "limits"), "max_runtime"));
	if (mr && !parse_duration(mr, LONG_MAX, &s->max_runtime))
		s->max_runtime = 0;
	json_t *idle = json_object_get(json_object_get(o, "limits"), "idle_minutes");
	s->idle_minutes = json_is_number(idle) && json_number_value(idle) > 0 ? json_number_value(idle) : 0;
	const char *odf = json_string_value(json_object_get(o, "on_disk_full"));
	s->disk_full_wait = odf && !strcmp(odf, "wait");
	take_parallel(s, json_object_get(o, "parallel"));
	take_io(s, json_object_get(o, "inputs"), json_object_get(o, "outputs"));
	take_metrics(s, json_object_get(o, "metrics"));
	/* logs.max_bytes: written only when not the default */
	json_t *lmax = json_object_get(json_object_get(o, "logs"), "max_bytes");
	if (json_is_integer(lmax) && json_integer_value(lmax) >= 0)
		s->logs_max_bytes = (long long)json_integer_value(lmax);
	if (json_is_object(json_object_get(o, "overrides")))
		s->overrides = take_kv(json_object_get(o, "overrides"), &s->noverrides);
	spec_notify_take(s, json_object_get(o, "notify"));
	spec_endpoints_take(s, json_object_get(o, "endpoints"));
	take_diag(s, json_object_get(o, "watchdog"), json_object_get(o, "on_log"));
	json_decref(o);
	*out = s;
	return 0;
}
