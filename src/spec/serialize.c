/*
 * serialize.c -- a resolved spec written back out: JSON (stored with the
 * job, `show --json`, the API) and YAML (the run folder's job.yaml, which
 * loads again as a spec); see spec.h.
 */
#include "spec/spec_int.h"
#include "core/json.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

static json_t *kv_json(const struct spec_kv *kv, size_t n)
{
	json_t *o = json_object();
	for (size_t i = 0; i < n; i++)
		json_object_set_new(o, kv[i].key, json_string_or_null(kv[i].val));
	return o;
}

static json_t *spec_json(const struct spec *s)
{
	json_t *o = json_object();
	json_object_set_new(o, "name", json_string(s->name));
	if (s->shell) {
		json_object_set_new(o, "command", json_string(s->shell));
	} else {
		json_t *a = json_array();
		for (size_t i = 0; i < s->argv.nr; i++)
			json_array_append_new(a, json_string(s->argv.v[i]));
		json_object_set_new(o, "command", a);
	}
	json_object_set_new(o, "args", kv_json(s->args, s->nargs));
	json_object_set_new(o, "workdir", json_string(s->workdir));
	json_t *env = json_object();
	/* a secret or a file is written as its source, never its value (which the spec never holds) */
	for (size_t i = 0; i < s->nenv; i++)
		json_object_set_new(env, s->env[i].key,
				    s->env[i].from == ENV_FROM_VALUE
					    ? json_string_or_null(s->env[i].val)
					    : json_pack("{s:s}", s->env[i].from == ENV_FROM_SECRET ? "secret" : "file",
							s->env[i].val));
	json_object_set_new(o, "env", env);
	json_object_set_new(o, "framework", json_string(s->framework));
	json_t *d = json_object();
	json_object_set_new(d, "type", json_string(s->device_type));
	json_object_set_new(d, "per_node", json_integer(s->per_node));
	json_t *ids = json_array();
	for (int i = 0; i < s->per_node; i++)
		json_array_append_new(ids, json_integer(s->device_ids[i]));
	json_object_set_new(d, "ids", ids);
	if (s->hccn_conf)
		json_object_set_new(d, "hccn_conf", json_string(s->hccn_conf));
	if (s->min_per_node)
		json_object_set_new(d, "min_per_node", json_integer(s->min_per_node));
	json_object_set_new(o, "devices", d);
	if (s->nodes_min && s->nodes_min != s->nodes) {
		json_t *nd = json_pack("{s:i, s:i}", "min", s->nodes_min, "max", s->nodes);
		if (s->nodes_wait != SPEC_NODES_WAIT_DEFAULT) {
			struct sbuf wt = SBUF_INIT;
			if (s->nodes_wait > 0)
				format_duration(&wt, s->nodes_wait);
			else
				sbuf_adds(&wt, "0");
			json_object_set_new(nd, "wait", json_string(wt.buf));
			sbuf_release(&wt);
		}
		json_object_set_new(o, "nodes", nd);
	} else
		json_object_set_new(o, "nodes", json_integer(s->nodes));
	if (s->spares)
		json_object_set_new(o, "spares", json_integer(s->spares));
	json_object_set_new(o, "backend", json_string(s->backend));
	spec_container_json(s, o);
	if (!strcmp(s->backend, "slurm")) {
		json_t *sl = json_object();
		const char *const kv[][2] = { { "partition", s->slurm.partition },
					      { "account", s->slurm.account },
					      { "qos", s->slurm.qos },
					      { "time", s->slurm.time },
					      { "signal", s->slurm.signal },
					      { "gres", s->slurm.gres } };
		for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++)
			if (kv[i][1])
				json_object_set_new(sl, kv[i][0], json_string(kv[i][1]));
		if (s->slurm.extra.nr) {
			json_t *ex = json_array();
			for (size_t i = 0; i < s->slurm.extra.nr; i++)
				json_array_append_new(ex, json_string(s->slurm.extra.v[i]));
			json_object_set_new(sl, "extra", ex);
		}
		json_object_set_new(o, "slurm", sl);
	}
	json_t *r = json_object();
	json_object_set_new(r, "max_restarts", json_integer(s->max_restarts));
	json_object_set_new(r, "grace_seconds", json_integer(s->grace_seconds));
	json_t *pol = json_array();
	if (s->restart_policy != RESTART_POLICY_DEFAULT)
		json_array_append_new(pol, json_string(s->restart_policy == RESTART_POLICY_ALWAYS
							       ? "always" : "first_step"));
	if (s->node_policy != NODE_POLICY_REPLACE)
		json_array_append_new(pol, json_string("restart"));
	if (json_array_size(pol) == 1)
		json_object_set(r, "policy", json_array_get(pol, 0));
	else if (json_array_size(pol) > 1)
		json_object_set(r, "policy", pol);
	json_decref(pol);
	json_object_set_new(o, "restart", r);
	json_t *c = json_object();
	json_object_set_new(c, "dir", json_string(s->ckpt_dir));
	json_object_set_new(c, "resume", json_string(s->resume == RESUME_AUTO    ? "auto"
						     : s->resume == RESUME_NEVER ? "never"
										 : s->resume_path));
	json_object_set_new(c, "keep", json_integer(s->ckpt_keep));
	json_object_set_new(o, "checkpoint", c);
	json_object_set_new(o, "priority", json_integer(s->priority));
	if (s->logs_max_bytes != SPEC_LOGS_MAX_BYTES_DEFAULT)
		json_object_set_new(o, "logs", json_pack("{s:I}", "max_bytes",
							 (json_int_t)s->logs_max_bytes));
	json_object_set_new(o, "preemptible", json_boolean(s->preemptible));
	if (s->max_runtime > 0 || s->idle_minutes > 0) {
		json_t *lim = json_object();
		if (s->max_runtime > 0) {
			struct sbuf mr = SBUF_INIT;
			format_duration(&mr, s->max_runtime);
			json_object_set_new(lim, "max_runtime", json_string(mr.buf));
			sbuf_release(&mr);
		}
		if (s->idle_minutes > 0)
			json_object_set_new(lim, "idle_minutes", json_real(s->idle_minutes));
		json_object_set_new(o, "limits", lim);
	}
	if (s->disk_full_wait) /* the default, stop, is left out */
		json_object_set_new(o, "on_disk_full", json_string("wait"));
	if (s->parallel.on) {
		json_t *p = json_pack("{s:s, s:s, s:I}", "strategy", "auto", "model", s->parallel.model,
				      "global_batch", (json_int_t)s->parallel.global_batch);
		if (s->parallel.cluster)
			json_object_set_new(p, "cluster", json_string(s->parallel.cluster));
		if (s->parallel.memory > 0)
			json_object_set_new(p, "memory", json_real(s->parallel.memory));
		json_object_set_new(p, "plan", json_pack("{s:i, s:i, s:i, s:i, s:s, s:f}",
							 "dp", s->parallel.dp, "tp", s->parallel.tp,
							 "pp", s->parallel.pp, "micro_batch",
							 s->parallel.micro_batch, "partition",
							 s->parallel.partition, "step_time",
							 s->parallel.step_time));
		json_object_set_new(o, "parallel", p);
	}
	if (s->ninputs) {
		json_t *in = json_array();
		for (size_t i = 0; i < s->ninputs; i++)
			json_array_append_new(in, json_pack("{s:s, s:s}", "from", s->inputs[i].from, "to",
							    s->inputs[i].to));
		json_object_set_new(o, "inputs", in);
	}
	if (s->upload_to) {
		json_t *out = json_object();
		json_object_set_new(out, "upload_to", json_string(s->upload_to));
		if (s->upload_every_seconds)
			json_object_set_new(out, "every_seconds", json_integer(s->upload_every_seconds));
		if (s->upload_every_steps)
			json_object_set_new(out, "every_steps", json_integer(s->upload_every_steps));
		json_object_set_new(o, "outputs", out);
	}
	json_t *m = json_object();
	json_object_set_new(m, "format", json_string(s->metrics_format ? s->metrics_format : "auto"));
	json_object_set_new(m, "warmup_steps", json_integer(s->metrics_warmup_steps));
	if (s->metrics_batch_size)
		json_object_set_new(m, "batch_size", json_integer(s->metrics_batch_size));
	if (s->metrics_accuracy)
		json_object_set_new(m, "accuracy", json_string(s->metrics_accuracy));
	json_t *files = json_array();
	for (size_t i = 0; i < s->metrics_files.nr; i++)
		json_array_append_new(files, json_string(s->metrics_files.v[i]));
	json_object_set_new(m, "files", files);
	if (s->metrics_tb_dirs.nr) {
		json_t *dirs = json_array();
		for (size_t i = 0; i < s->metrics_tb_dirs.nr; i++)
			json_array_append_new(dirs, json_string(s->metrics_tb_dirs.v[i]));
		json_object_set_new(m, "tensorboard_dirs", dirs);
	}
	if (s->metrics_npatterns) {
		json_t *pats = json_array();
		for (size_t i = 0; i < s->metrics_npatterns; i++) {
			const struct metrics_pattern *p = &s->metrics_patterns[i];
			json_t *x = json_object(), *v = json_object();
			json_object_set_new(x, "regex", json_string(p->regex));
			json_object_set_new(x, "step", json_integer(p->step));
			for (size_t k = 0; k < p->nvalues; k++)
				json_object_set_new(v, p->names[k], json_integer(p->groups[k]));
			json_object_set_new(x, "values", v);
			json_array_append_new(pats, x);
		}
		json_object_set_new(m, "patterns", pats);
	}
	json_object_set_new(o, "metrics", m);
	if (s->noverrides)
		json_object_set_new(o, "overrides", kv_json(s->overrides, s->noverrides));
	if (s->notify_given)
		json_object_set_new(o, "notify", spec_notify_json(s));
	if (s->nendpoints)
		json_object_set_new(o, "endpoints", spec_endpoints_json(s));
	/* written only when set, so that specs without them read as before */
	if (s->watchdog.on) {
		const struct spec_watchdog *wd = &s->watchdog;
		json_t *x = json_object();
		if (wd->progress_pattern)
			json_object_set_new(x, "progress_pattern", json_string(wd->progress_pattern));
		json_object_set_new(x, "warmup_steps", json_integer(wd->warmup_steps));
		json_object_set_new(x, "min_seconds", json_real(wd->min_seconds));
		json_object_set_new(x, "factor", json_real(wd->factor));
		json_object_set_new(x, "startup_seconds", json_real(wd->startup_seconds));
		json_object_set_new(x, "straggler_percent", json_real(wd->straggler_percent));
		json_object_set_new(x, "straggler_steps", json_integer(wd->straggler_steps));
		json_object_set_new(x, "dump_seconds", json_real(wd->dump_seconds));
		json_object_set_new(o, "watchdog", x);
	}
	if (s->non_log) {
		json_t *a = json_array();
		for (size_t i = 0; i < s->non_log; i++)
			json_array_append_new(a, json_pack("{s:s, s:s}", "pattern", s->on_log[i].pattern,
							   "action",
							   spec_log_action_name(s->on_log[i].action)));
		json_object_set_new(o, "on_log", a);
	}
	return o;
}

char *spec_to_json(const struct spec *s)
{
	json_t *o = spec_json(s);
	/* reals (the plan's step_time, memory) as 0.05, not 0.050000000000000003 */
	char *text = json_dumps_shortest(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (!text)
		xdie_oom(0);
	return text;
}

/* Emit a JSON value as YAML block style through libyaml's emitter. */
static int emit_json(yaml_emitter_t *em, json_t *v)
{
	yaml_event_t ev;
	int ok = 1;
	if (json_is_object(v)) {
		ok = yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
							 json_object_size(v) ? YAML_BLOCK_MAPPING_STYLE
									     : YAML_FLOW_MAPPING_STYLE) &&
		     yaml_emitter_emit(em, &ev);
		const char *k;
		json_t *x;
		json_object_foreach(v, k, x) {
			if (!ok)
				break;
			ok = yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)k, -1, 1, 1,
							  YAML_ANY_SCALAR_STYLE) &&
			     yaml_emitter_emit(em, &ev) && emit_json(em, x);
		}
		return ok && yaml_mapping_end_event_initialize(&ev) && yaml_emitter_emit(em, &ev);
	}
	if (json_is_array(v)) {
		ok = yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_FLOW_SEQUENCE_STYLE) &&
		     yaml_emitter_emit(em, &ev);
		size_t i;
		json_t *x;
		json_array_foreach(v, i, x) {
			if (!ok)
				break;
			ok = emit_json(em, x);
		}
		return ok && yaml_sequence_end_event_initialize(&ev) && yaml_emitter_emit(em, &ev);
	}
	struct sbuf sb = SBUF_INIT;
	yaml_scalar_style_t style = YAML_PLAIN_SCALAR_STYLE;
	if (json_is_string(v)) {
		sbuf_adds(&sb, json_string_value(v));
		/* strings stay strings when read back */
		style = YAML_DOUBLE_QUOTED_SCALAR_STYLE;
	} else if (json_is_integer(v)) {
		sbuf_addf(&sb, "%lld", (long long)json_integer_value(v));
	} else if (json_is_real(v)) {
		char num[40];
		fmt_shortest(num, sizeof(num), json_real_value(v));
		sbuf_adds(&sb, num);
	} else if (json_is_boolean(v)) {
		sbuf_adds(&sb, json_is_true(v) ? "true" : "false");
	} else {
		sbuf_adds(&sb, "null");
	}
	ok = yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)sb.buf, (int)sb.len, 1, 1,
					  style) &&
	     yaml_emitter_emit(em, &ev);
	sbuf_release(&sb);
	return ok;
}

static int yaml_write_cb(void *data, unsigned char *buf, size_t size)
{
	sbuf_add(data, buf, size);
	return 1;
}

char *spec_to_yaml(const struct spec *s)
{
	yaml_emitter_t em;
	yaml_event_t ev;
	struct sbuf out = SBUF_INIT;
	json_t *o = spec_json(s);
	/* job.yaml must load again as a spec: the chosen plan is not a key */
	json_object_del(json_object_get(o, "parallel"), "plan");
	if (!yaml_emitter_initialize(&em))
		xdie_oom(sizeof(em));
	yaml_emitter_set_output(&em, yaml_write_cb, &out);
	yaml_emitter_set_unicode(&em, 1);
	int ok = yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) &&
		 yaml_emitter_emit(&em, &ev) &&
		 yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1) &&
		 yaml_emitter_emit(&em, &ev) && emit_json(&em, o) &&
		 yaml_document_end_event_initialize(&ev, 1) && yaml_emitter_emit(&em, &ev) &&
		 yaml_stream_end_event_initialize(&ev) && yaml_emitter_emit(&em, &ev);
	yaml_emitter_delete(&em);
	json_decref(o);
	if (!ok) {
		/* libyaml only fails here on memory exhaustion or a broken string */
		sbuf_release(&out);
		return spec_to_json(s);
	}
	return sbuf_detach(&out);
}
