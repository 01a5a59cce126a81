/* test_spec.c -- spec parsing, defaults and the errors that name file:line:key */
#include "test.h"

#include "core/sbuf.h"
#include "core/util.h"
#include "devices/devices.h"
#include "spec/spec.h"
#include "plan/plan.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

static struct spec *parse_ok(const char *text, const char *name)
{
	struct spec *s = NULL;
	struct tc_err err = TC_ERR_INIT;
	int rc = spec_parse(text, strlen(text), name, "/tmp", &s, &err);
	if (rc)
		fprintf(stderr, "unexpected error: %s\n", err.msg);
	CHECK_INT(rc, 0);
	tc_err_release(&err);
	return s;
}

/* Parse text that must fail; returns the message (static storage). */
static const char *parse_err(const char *text, const char *name)
{
	static char msg[4096];
	struct spec *s = NULL;
	struct tc_err err = TC_ERR_INIT;
	int rc = spec_parse(text, strlen(text), name, "/tmp", &s, &err);
	CHECK_INT(rc, TC_ESPEC);
	CHECK(s == NULL);
	snprintf(msg, sizeof(msg), "%s", err.msg);
	tc_err_release(&err);
	return msg;
}

TEST(full_yaml)
{
	struct spec *s = parse_ok("name: digits-ddp\n"
				  "command: [\"python3\", \"train.py\"]\n"
				  "args: {epochs: 5, lr: 0.1, verbose: null}\n"
				  "env: {OMP_NUM_THREADS: \"1\"}\n"
				  "framework: pytorch\n"
				  "devices: {type: cpu, per_node: 2}\n"
				  "restart: {max_restarts: 3, grace_seconds: 5}\n"
				  "checkpoint: {dir: ckpt, resume: never}\n",
				  "job.yaml");
	CHECK_STR(s->name, "digits-ddp");
	CHECK_INT(s->argv.nr, 2);
	CHECK_STR(s->argv.v[1], "train.py");
	CHECK_INT(s->nargs, 3);
	CHECK_STR(s->args[0].key, "epochs");
	CHECK_STR(s->args[0].val, "5");
	CHECK(s->args[2].val == NULL);
	CHECK_INT(s->per_node, 2);
	CHECK_INT(s->device_ids[1], 1);
	CHECK_INT(s->max_restarts, 3);
	CHECK_INT(s->grace_seconds, 5);
	CHECK_STR(s->ckpt_dir, "ckpt");
	CHECK_INT(s->resume, RESUME_NEVER);
	CHECK_STR(s->workdir, "/tmp");
	spec_free(s);
}

TEST(defaults)
{
	struct spec *s = parse_ok("command: train.sh --fast\n", "/x/my-job.yml");
	CHECK_STR(s->name, "my-job");
	CHECK_STR(s->shell, "train.sh --fast");
	CHECK_STR(s->framework, "pytorch");
	CHECK_STR(s->device_type, "cpu");
	CHECK_INT(s->per_node, 1);
	CHECK_INT(s->grace_seconds, 30);
	CHECK_INT(s->max_restarts, 0);
	CHECK_INT(s->resume, RESUME_AUTO);
	spec_free(s);
}

TEST(json_with_tabs)
{
	struct spec *s = parse_ok("{\n\t\"name\": \"j\",\n\t\"command\": [\"a\", \"b\\tc\"],\n"
				  "\t\"devices\": {\"type\": \"cpu\", \"per_node\": 3}\n}\n",
				  "job.json");
	CHECK_INT(s->per_node, 3);
	CHECK_STR(s->argv.v[1], "b\tc");
	spec_free(s);
}

TEST(json_error_line)
{
	const char *m = parse_err("{\n  \"command\": [\"a\"],\n  \"devcies\": {}\n}\n", "job.json");
	CHECK_CONTAINS(m, "job.json:3:");
	CHECK_CONTAINS(m, "unknown key 'devcies'");
	CHECK_CONTAINS(m, "did you mean 'devices'");
}

TEST(unknown_key_names_line)
{
	const char *m = parse_err("name: a\ncommand: [x]\n\ndevcies: {type: cpu}\n", "job.yaml");
	CHECK_STR(m, "job.yaml:4: unknown key 'devcies' (did you mean 'devices'?)");
}

TEST(unknown_nested_key)
{
	const char *m = parse_err("command: [x]\ndevices:\n  type: cpu\n  per_nod: 2\n", "job.yaml");
	CHECK_CONTAINS(m, "job.yaml:4: unknown key 'devices.per_nod' (did you mean 'devices.per_node'?)");
}

TEST(syntax_error)
{
	const char *m = parse_err("command: [x\nname: a\n", "job.yaml");
	CHECK_CONTAINS(m, "job.yaml:");
	CHECK_CONTAINS(m, "syntax error");
}

TEST(wrong_type)
{
	const char *m = parse_err("command: [x]\ndevices: {per_node: two}\n", "job.yaml");
	CHECK_CONTAINS(m, "job.yaml:2: devices.per_node: must be an integer");
	m = parse_err("command: [x]\nrestart: {max_restarts: \"3\"}\n", "job.yaml");
	CHECK_CONTAINS(m, "job.yaml:2: restart.max_restarts: must be an integer");
	m = parse_err("command: {a: b}\n", "job.yaml");
	CHECK_CONTAINS(m, "job.yaml:1: command: must be a list");
	m = parse_err("command: [x]\nenv: {A: [1, 2]}\n", "job.yaml");
	CHECK_CONTAINS(m, "env: 'A' must be a single value");
}

TEST(zero_devices)
{
	const char *m = parse_err("command: [x]\ndevices:\n  type: cpu\n  per_node: 0\n", "job.yaml");
	CHECK_CONTAINS(m, "job.yaml:4: devices.per_node: must be at least 1");
}

TEST(too_many_gpus)
{
	setenv("TRAINCTL_FAKE_DEVICES", "gpu:2", 1);
	const char *m = parse_err("command: [x]\ndevices:\n  type: gpu\n  per_node: 4\n", "job.yaml");
	CHECK_STR(m, "job.yaml:4: devices.per_node: 4 gpu devices requested but this machine has 2");
	struct spec *s = parse_ok("command: [x]\ndevices: {type: gpu, per_node: all}\n", "job.yaml");
	CHECK_INT(s->per_node, 2);
	spec_free(s);
	m = parse_err("command: [x]\ndevices: {type: gpu, ids: [1, 5]}\n", "job.yaml");
	CHECK_CONTAINS(m, "devices.ids: this machine has no gpu 5");
}

TEST(no_gpus_at_all)
{
	unsetenv("TRAINCTL_FAKE_DEVICES");
	setenv("TRAINCTL_FAKE_DEVICES", "npu:0", 1);
	const char *m = parse_err("command: [x]\ndevices: {type: gpu, per_node: 1}\n", "job.yaml");
	CHECK_STR(m, "job.yaml:2: devices.per_node: 1 gpu device requested but this machine has none: "
		     "TRAINCTL_FAKE_DEVICES is 'npu:0'; to try trainctl without them, set "
		     "TRAINCTL_FAKE_DEVICES=gpu:1");
}

/* no per_node: the line of devices:, not line 1 nor a key the user did not write (3.7) */
TEST(no_gpus_names_devices_line)
{
	setenv("TRAINCTL_FAKE_DEVICES", "npu:1", 1);
	const char *m = parse_err("name: x\ncommand: [x]\n\ndevices:\n  type: gpu\n", "gpu.yaml");
	CHECK_CONTAINS(m, "gpu.yaml:4: devices: 1 gpu device requested but this machine has none: ");
	CHECK_CONTAINS(m, "TRAINCTL_FAKE_DEVICES=gpu:1");
	m = parse_err("command: [x]\ndevices: {type: gpu, per_node: all}\n", "gpu.yaml");
	CHECK_CONTAINS(m, "gpu.yaml:2: devices.per_node: 'all' gpu devices, but this machine has none");
	/* without fakes: what discovery found (this test machine has no NVML) */
	unsetenv("TRAINCTL_FAKE_DEVICES");
	struct sbuf why = SBUF_INIT;
	devices_why_none("gpu", &why);
	CHECK(strstr(why.buf, "NVML is not present") || strstr(why.buf, "NVML reports"));
	sbuf_release(&why);
	sbuf_reset(&why);
	devices_why_none("npu", &why);
	CHECK_CONTAINS(why.buf, "npu-smi");
	sbuf_release(&why);
}

/* tabs for indentation: say so, and where (3.5) */
TEST(tab_indentation)
{
	const char *m = parse_err("name: x\ncommand: [x]\ndevices:\n\ttype: cpu\n", "tab.yaml");
	CHECK_STR(m, "tab.yaml:4: a tab: YAML forbids tabs for indentation (indent with spaces)");
	m = parse_err("name: x\ncommand:\n  - a\n\t- b\n", "tab.yaml");
	CHECK_CONTAINS(m, "tab.yaml:4: a tab: YAML forbids tabs");
	/* other syntax errors stay libyaml's */
	m = parse_err("name: [x\n", "job.yaml");
	CHECK_CONTAINS(m, "syntax error");
}

/* a list command's program is looked up as the workers will (3.4) */
TEST(command_not_found)
{
	char dir[512], prog[600];
	snprintf(dir, sizeof(dir), "%s/bin", test_tmpdir());
	CHECK(mkdir(dir, 0755) == 0 || errno == EEXIST);
	snprintf(prog, sizeof(prog), "%s/trainme", dir);
	FILE *f = fopen(prog, "w");
	CHECK(f != NULL);
	fputs("#!/bin/sh\n", f);
	CHECK(fclose(f) == 0);
	CHECK(chmod(prog, 0755) == 0);
	struct sbuf text = SBUF_INIT;
	struct tc_err err = TC_ERR_INIT;
	struct spec *s;
	/* found on the spec's PATH */
	sbuf_addf(&text, "command: [trainme]\nenv: {PATH: \"%s\"}\n", dir);
	s = parse_ok(text.buf, "job.yaml");
	CHECK_INT(spec_check_command(s, &err), 0);
	spec_free(s);
	/* a typo: did you mean, with the line of command: */
	sbuf_reset(&text);
	sbuf_addf(&text, "name: x\ncommand: [trainm, --lr, \"1\"]\nenv: {PATH: \"/nonexistent:%s\"}\n", dir);
	s = parse_ok(text.buf, "job.yaml");
	CHECK_INT(spec_check_command(s, &err), TC_ESPEC);
	CHECK_STR(err.msg, "job.yaml:2: command: 'trainm' is not found on PATH (did you mean 'trainme'?)");
	spec_free(s);
	/* a path relative to workdir */
	sbuf_reset(&text);
	sbuf_addf(&text, "command: [bin/trainme]\nworkdir: %s\n", test_tmpdir());
	s = parse_ok(text.buf, "job.yaml");
	CHECK_INT(spec_check_command(s, &err), 0);
	spec_free(s);
	sbuf_reset(&text);
	sbuf_addf(&text, "command: [bin/trainmee]\nworkdir: %s\n", test_tmpdir());
	s = parse_ok(text.buf, "job.yaml");
	CHECK_INT(spec_check_command(s, &err), TC_ESPEC);
	CHECK_STR(err.msg, "job.yaml:1: command: 'bin/trainmee' does not exist (did you mean 'bin/trainme'?)");
	spec_free(s);
	/* not executable */
	CHECK(chmod(prog, 0644) == 0);
	sbuf_reset(&text);
	sbuf_addf(&text, "command: [%s]\n", prog);
	s = parse_ok(text.buf, "job.yaml");
	CHECK_INT(spec_check_command(s, &err), TC_ESPEC);
	CHECK_CONTAINS(err.msg, "is not executable");
	spec_free(s);
	/* a string command is the shell's */
	s = parse_ok("command: pyhton3 train.py\n", "job.yaml");
	CHECK_INT(spec_check_command(s, &err), 0);
	spec_free(s);
	tc_err_release(&err);
	sbuf_release(&text);
}

TEST(ids_and_per_node_disagree)
{
	setenv("TRAINCTL_FAKE_DEVICES", "npu:8", 1);
	const char *m = parse_err("command: [x]\ndevices: {type: npu, per_node: 2, ids: [4, 5, 6]}\n",
				  "job.yaml");
	CHECK_CONTAINS(m, "devices.ids: lists 3 ids but per_node is 2");
	struct spec *s = parse_ok("command: [x]\ndevices: {type: npu, ids: [4, 6]}\n", "job.yaml");
	CHECK_INT(s->per_node, 2);
	CHECK_INT(s->device_ids[1], 6);
	spec_free(s);
}

TEST(bad_device_type)
{
	const char *m = parse_err("command: [x]\ndevices: {type: tpu}\n", "job.yaml");
	CHECK_CONTAINS(m, "job.yaml:2: devices.type: 'tpu' is not a device type");
}

TEST(multi_node_needs_slurm)
{
	const char *m = parse_err("command: [x]\nslurm: {partition: debug}\n", "job.yaml");
	CHECK_CONTAINS(m, "job.yaml:2: slurm: is for backend: slurm (backend is local)");
	m = parse_err("command: [x]\nnodes: 2\n", "job.yaml");
	CHECK_CONTAINS(m, "job.yaml:2: nodes: 2 nodes need backend: slurm");
}

TEST(reserved_env)
{
	const char *m = parse_err("command: [x]\nenv: {RANK: \"3\"}\n", "job.yaml");
	CHECK_CONTAINS(m, "env: 'RANK' is set by trainctl");
	struct spec *s = parse_ok("command: [x]\nenv: {MASTER_PORT: 29555}\n", "job.yaml");
	CHECK_INT(s->master_port, 29555);
	spec_free(s);
	m = parse_err("command: [x]\nenv: {MASTER_PORT: 99999}\n", "job.yaml");
	CHECK_CONTAINS(m, "MASTER_PORT must be a port number");
}

TEST(duplicate_key)
{
	const char *m = parse_err("command: [x]\nname: a\nname: b\n", "job.yaml");
	CHECK_CONTAINS(m, "job.yaml:3: key 'name' is given twice");
}

TEST(missing_command)
{
	const char *m = parse_err("name: a\n", "job.yaml");
	CHECK_CONTAINS(m, "command: is required");
	m = parse_err("", "job.yaml");
	CHECK_CONTAINS(m, "job.yaml:1: the spec is empty");
	m = parse_err("- a\n- b\n", "job.yaml");
	CHECK_CONTAINS(m, "must be a mapping");
}

TEST(bad_name)
{
	const char *m = parse_err("name: \"a b\"\ncommand: [x]\n", "job.yaml");
	CHECK_CONTAINS(m, "job.yaml:1: name: may hold only");
}

TEST(round_trip_yaml)
{
	struct spec *s = parse_ok("name: rt\ncommand: [\"python3\", \"it's \\\"q\\\".py\"]\n"
				  "args: {lr: 0.1, flag: null}\nenv: {A: \"x: y\"}\n",
				  "rt.yaml");
	char *yaml = spec_to_yaml(s);
	struct spec *t = parse_ok(yaml, "job.yaml");
	CHECK_STR(t->argv.v[1], "it's \"q\".py");
	CHECK_STR(t->env[0].val, "x: y");
	CHECK(t->args[1].val == NULL);
	CHECK_STR(t->name, "rt");
	free(yaml);
	spec_free(s);
	spec_free(t);
}

TEST(load_missing_file)
{
	struct spec *s = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(spec_load("/nonexistent/job.yaml", &s, &err), TC_ESPEC);
	CHECK_CONTAINS(err.msg, "/nonexistent/job.yaml");
	tc_err_release(&err);
}

TEST(adhoc_names)
{
	struct spec s;
	struct tc_err err = TC_ERR_INIT;
	spec_init(&s);
	strvec_push(&s.argv, "/usr/bin/python3");
	strvec_push(&s.argv, "examples/digits/train.py");
	strvec_push(&s.argv, "--lr");
	CHECK_INT(spec_finish(&s, &err), 0);
	CHECK_STR(s.name, "train");
	free(s.name);
	s.name = NULL;
	free(s.device_type);
	s.device_type = strdup("tpu");
	CHECK_INT(spec_finish(&s, &err), TC_EUSAGE);
	tc_err_release(&err);
	strvec_clear(&s.argv);
	free(s.name);
	free(s.workdir);
	free(s.framework);
	free(s.device_type);
	free(s.device_ids);
	free(s.backend);
	free(s.ckpt_dir);
}

/* ---- metrics: ---- */

TEST(metrics_keys)
{
	struct spec *s = parse_ok("command: [x]\n"
				  "metrics: {format: tcap, warmup_steps: 3, batch_size: 64,\n"
				  "          accuracy: val.top1, files: [dll.json, \"/abs/dll-{rank}.json\"]}\n",
				  "job.yaml");
	CHECK_STR(s->metrics_format, "tcap");
	CHECK_INT(s->metrics_warmup_steps, 3);
	CHECK_INT(s->metrics_batch_size, 64);
	CHECK_STR(s->metrics_accuracy, "val.top1");
	CHECK_INT(s->metrics_files.nr, 2);
	CHECK_STR(s->metrics_files.v[0], "dll.json");
	CHECK_STR(s->metrics_files.v[1], "/abs/dll-{rank}.json");
	char *json = spec_to_json(s);
	CHECK_CONTAINS(json, "\"format\": \"tcap\"");
	CHECK_CONTAINS(json, "\"batch_size\": 64");
	CHECK_CONTAINS(json, "\"accuracy\": \"val.top1\"");
	free(json);
	/* job.yaml is written from the spec and must read back the same */
	char *yaml = spec_to_yaml(s);
	struct spec *t = parse_ok(yaml, "job.yaml");
	CHECK_STR(t->metrics_format, "tcap");
	CHECK_INT(t->metrics_batch_size, 64);
	CHECK_INT(t->metrics_files.nr, 2);
	free(yaml);
	spec_free(t);
	spec_free(s);
}

TEST(metrics_defaults)
{
	struct spec *s = parse_ok("command: [x]\n", "job.yaml");
	CHECK(s->metrics_format == NULL); /* auto */
	CHECK_INT(s->metrics_warmup_steps, 0);
	CHECK_INT(s->metrics_batch_size, 0);
	CHECK(s->metrics_accuracy == NULL);
	CHECK_INT(s->metrics_files.nr, 0);
	char *json = spec_to_json(s);
	CHECK_CONTAINS(json, "\"format\": \"auto\"");
	CHECK(!strstr(json, "batch_size"));
	char *yaml = spec_to_yaml(s);
	struct spec *t = parse_ok(yaml, "job.yaml");
	CHECK_STR(t->metrics_format, "auto");
	CHECK_INT(t->metrics_files.nr, 0);
	free(json);
	free(yaml);
	spec_free(t);
	spec_free(s);
	s = parse_ok("command: [x]\nmetrics: {}\n", "job.yaml");
	spec_free(s);
}

TEST(metrics_errors)
{
	CHECK_CONTAINS(parse_err("command: [x]\nmetrics: {format: csv}\n", "j.yaml"),
		       "j.yaml:2: metrics.format: 'csv' is not one of: auto, dllogger, tcap, mindformers, none");
	CHECK_CONTAINS(parse_err("command: [x]\nmetrics:\n  warmup_steps: -1\n", "j.yaml"),
		       "j.yaml:3: metrics.warmup_steps: must be between 0");
	CHECK_CONTAINS(parse_err("command: [x]\nmetrics: {warmup_steps: two}\n", "j.yaml"),
		       "metrics.warmup_steps: must be an integer, not 'two'");
	CHECK_CONTAINS(parse_err("command: [x]\nmetrics: {batch_size: 0}\n", "j.yaml"),
		       "metrics.batch_size: must be between 1");
	CHECK_CONTAINS(parse_err("command: [x]\nmetrics: {accuracy: \"\"}\n", "j.yaml"),
		       "metrics.accuracy: is empty");
	CHECK_CONTAINS(parse_err("command: [x]\nmetrics: {files: dll.json}\n", "j.yaml"),
		       "metrics.files: must be a list of paths");
	CHECK_CONTAINS(parse_err("command: [x]\nmetrics: {files: [\"\"]}\n", "j.yaml"),
		       "metrics.files: items must be non-empty paths");
	CHECK_CONTAINS(parse_err("command: [x]\nmetrics: {batchsize: 3}\n", "j.yaml"),
		       "unknown key 'metrics.batchsize' (did you mean 'metrics.batch_size'?)");
	CHECK_CONTAINS(parse_err("command: [x]\nmetrics: [1]\n", "j.yaml"),
		       "metrics.: must be a mapping");
}

TEST(parallel_auto_plans_at_load)
{
	setenv("TRAINCTL_FAKE_DEVICES", "gpu:8", 1);
	struct spec *s = parse_ok("command: [x]\ndevices: {type: gpu, per_node: 8}\n"
				  "parallel: {strategy: auto, model: gpt2-medium, global_batch: 32}\n",
				  "job.yaml");
	CHECK(s->parallel.on);
	CHECK_INT(s->parallel.dp * s->parallel.tp * s->parallel.pp, 8);
	CHECK(s->parallel.micro_batch >= 1);
	/* the partition covers the model's 24 layers in pp stages */
	int sum = 0, stages = 0;
	for (const char *p = s->parallel.partition; *p;) {
		char *end;
		sum += (int)strtol(p, &end, 10);
		stages++;
		p = *end == ',' ? end + 1 : end;
	}
	CHECK_INT(sum, 24);
	CHECK_INT(stages, s->parallel.pp);
	char *json = spec_to_json(s);
	CHECK_CONTAINS(json, "\"partition\"");
	char *yaml = spec_to_yaml(s);
	/* job.yaml loads again: the plan is recomputed, not a key */
	struct spec *t = parse_ok(yaml, "job.yaml");
	CHECK_STR(t->parallel.partition, s->parallel.partition);
	free(json);
	free(yaml);
	spec_free(s);
	spec_free(t);
}

/* An elastic job's attempt on fewer nodes gets the planner's plan for its own count. */
TEST(parallel_plan_per_node_count)
{
	setenv("TRAINCTL_FAKE_DEVICES", "gpu:4", 1);
	struct spec *s = parse_ok("command: [x]\ndevices: {type: gpu, per_node: 4}\n"
				  "nodes: {min: 1, max: 2}\nbackend: slurm\n"
				  "parallel: {strategy: auto, model: gpt2-medium, global_batch: 32}\n",
				  "job.yaml");
	CHECK_INT(s->parallel.dp * s->parallel.tp * s->parallel.pp, 8);
	struct spec_plan one;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(spec_plan_for(s, 1, &one, &err), 0);
	CHECK_INT(one.dp * one.tp * one.pp, 4);
	/* the same answer as the planner gives for 4 devices on 1 node */
	struct plan_strategy_req req = { .model = "gpt2-medium", .devices = 4, .nodes = 1,
					 .global_batch = 32 };
	struct plan_candidate best;
	memset(&best, 0, sizeof(best));
	CHECK_INT(plan_strategy_best(&req, &best, &err), 0);
	CHECK_INT(one.dp, best.dp);
	CHECK_INT(one.tp, best.tp);
	CHECK_INT(one.pp, best.pp);
	CHECK_INT(one.micro_batch, best.mb);
	plan_candidate_release(&best);
	/* for nodes.max it is the plan made at load */
	struct spec_plan two;
	CHECK_INT(spec_plan_for(s, 2, &two, &err), 0);
	CHECK_INT(two.dp, s->parallel.dp);
	CHECK_INT(two.tp, s->parallel.tp);
	CHECK_STR(two.partition, s->parallel.partition);
	/* spec_replan: the spec's plan becomes the one for the count */
	CHECK_INT(spec_replan(s, 1, &err), 0);
	CHECK_INT(s->parallel.dp, one.dp);
	CHECK_STR(s->parallel.partition, one.partition);
	spec_plan_release(&one);
	spec_plan_release(&two);
	spec_free(s);
}

/* nodes.wait: how long an elastic job below nodes.min waits for nodes; kept through JSON */
TEST(nodes_wait)
{
	struct spec *s = parse_ok("command: [x]\nbackend: slurm\nnodes: {min: 1, max: 2}\n", "j.yaml");
	CHECK_INT(s->nodes_wait, SPEC_NODES_WAIT_DEFAULT);
	spec_free(s);
	s = parse_ok("command: [x]\nbackend: slurm\nnodes: {min: 1, max: 2, wait: 90s}\n", "j.yaml");
	CHECK_INT(s->nodes_wait, 90);
	char *json = spec_to_json(s);
	CHECK_CONTAINS(json, "\"wait\": \"90s\"");
	struct spec *t = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(spec_from_json(json, &t, &err), 0);
	CHECK_INT(t->nodes_wait, 90);
	free(json);
	spec_free(t);
	spec_free(s);
	s = parse_ok("command: [x]\nbackend: slurm\nnodes: {min: 1, max: 2, wait: 0}\n", "j.yaml");
	CHECK_INT(s->nodes_wait, 0);
	char *yaml = spec_to_yaml(s);
	t = parse_ok(yaml, "job.yaml");
	CHECK_INT(t->nodes_wait, 0);
	free(yaml);
	spec_free(t);
	spec_free(s);
	CHECK_CONTAINS(parse_err("command: [x]\nbackend: slurm\nnodes: {min: 1, max: 2, wait: 5}\n",
				 "j.yaml"),
		       "j.yaml:3: nodes.wait: must be a duration with a unit, such as 10m, 1h or 90s "
		       "(at most 7d), or 0, not '5'");
	CHECK_CONTAINS(parse_err("command: [x]\nbackend: slurm\nnodes: {min: 1, max: 2, wiat: 5m}\n",
				 "j.yaml"),
		       "unknown key 'nodes.wiat'");
}

TEST(parallel_errors)
{
	setenv("TRAINCTL_FAKE_DEVICES", "gpu:2", 1);
	const char *m = parse_err("command: [x]\ndevices: {type: gpu, per_node: 2}\n"
				  "parallel: {strategy: auto, model: gpt3-175b, global_batch: 8}\n",
				  "job.yaml");
	CHECK_CONTAINS(m, "job.yaml:3: parallel: ");
	m = parse_err("command: [x]\nparallel: {strategy: auto, model: no-such-model, global_batch: 8}\n",
		      "job.yaml");
	CHECK_CONTAINS(m, "job.yaml:2: parallel: ");
	CHECK_CONTAINS(m, "no-such-model");
	m = parse_err("command: [x]\nparallel: {strategy: manual, model: gpt2-small, global_batch: 8}\n",
		      "job.yaml");
	CHECK_CONTAINS(m, "parallel.strategy: 'manual' is not one of: auto");
	m = parse_err("command: [x]\nparallel: {strategy: auto, model: gpt2-small}\n", "job.yaml");
	CHECK_CONTAINS(m, "global_batch: is required");
	m = parse_err("command: [x]\nparallel: {strategy: auto, model: gpt2-small, global_batch: 8,"
		      " memory: lots}\n", "job.yaml");
	CHECK_CONTAINS(m, "parallel.memory: must be a size");
}

/* ---- inputs:, outputs:, checkpoint.keep (storage and checkpoints) ---- */

TEST(inputs_outputs_keep)
{
	struct spec *s = parse_ok("command: [\"true\"]\n"
				  "inputs:\n"
				  "  - {from: \"s3://bucket/cifar10/\", to: data}\n"
				  "  - {from: \"obs://b/x\"}\n"
				  "  - {from: local/dir, to: /abs}\n"
				  "outputs: {upload_to: \"s3://bucket/runs/{job_id}/\", every_seconds: 300, every_steps: 100}\n"
				  "checkpoint: {keep: 3, resume: \"s3://bucket/ck/step-10/\"}\n",
				  "job.yaml");
	CHECK_INT(s->ninputs, 3);
	CHECK_STR(s->inputs[0].from, "s3://bucket/cifar10/");
	CHECK_STR(s->inputs[0].to, "data");
	CHECK_STR(s->inputs[1].to, ".");
	CHECK_STR(s->inputs[2].from, "/tmp/local/dir");
	CHECK_STR(s->upload_to, "s3://bucket/runs/{job_id}/");
	CHECK_INT(s->upload_every_seconds, 300);
	CHECK_INT(s->upload_every_steps, 100);
	CHECK_INT(s->ckpt_keep, 3);
	CHECK_INT(s->resume, RESUME_PATH);
	CHECK_STR(s->resume_path, "s3://bucket/ck/step-10/");
	char *json = spec_to_json(s);
	CHECK_CONTAINS(json, "\"upload_to\": \"s3://bucket/runs/{job_id}/\"");
	CHECK_CONTAINS(json, "\"keep\": 3");
	free(json);
	spec_free(s);
}

TEST(inputs_outputs_errors)
{
	CHECK_CONTAINS(parse_err("command: [\"true\"]\ninputs: {from: x}\n", "j.yaml"),
		       "j.yaml:2: inputs: must be a list");
	CHECK_CONTAINS(parse_err("command: [\"true\"]\ninputs: [{to: x}]\n", "j.yaml"),
		       "inputs[].from: is required");
	CHECK_CONTAINS(parse_err("command: [\"true\"]\ninputs: [{from: \"ftp://h/x\"}]\n", "j.yaml"),
		       "use s3://, obs://, file:// or a path");
	CHECK_CONTAINS(parse_err("command: [\"true\"]\ninputs: [{from: s3://b/x, to: ../up}]\n", "j.yaml"),
		       "may not leave the data folder");
	CHECK_CONTAINS(parse_err("command: [\"true\"]\noutputs: {every_seconds: 5}\n", "j.yaml"),
		       "outputs.upload_to: is required");
	CHECK_CONTAINS(parse_err("command: [\"true\"]\noutputs: {upload_to: s3://b/, every_second: 5}\n",
				 "j.yaml"),
		       "did you mean 'outputs.every_seconds'");
	CHECK_CONTAINS(parse_err("command: [\"true\"]\ncheckpoint: {keep: -1}\n", "j.yaml"),
		       "checkpoint.keep: must be between 0 and");
}

/* A stored spec's reals read as written: step_time 0.05, not
 * 0.050000000000000003 (issue 16, 3.14), and they stay reals. */
TEST(stored_spec_reals_are_shortest)
{
	setenv("TRAINCTL_FAKE_DEVICES", "gpu:8", 1);
	struct spec *s = parse_ok("command: [x]\ndevices: {type: gpu, per_node: 8}\n"
				  "parallel: {strategy: auto, model: gpt2-medium, global_batch: 32,"
				  " memory: 40GiB}\n",
				  "job.yaml");
	s->parallel.step_time = 0.05;
	char *json = spec_to_json(s);
	CHECK_CONTAINS(json, "\"step_time\": 0.05\n");
	CHECK_CONTAINS(json, "\"memory\": 42949672960.0,");
	char *yaml = spec_to_yaml(s);
	CHECK(strstr(yaml, "0.050000") == NULL);
	free(json);
	free(yaml);
	spec_free(s);
}

/* ---- metrics.patterns (docs/metrics.md) ---- */

TEST(metrics_patterns_parse_and_round_trip)
{
	struct spec *s = parse_ok("name: p\ncommand: [\"true\"]\nmetrics:\n  patterns:\n"
				  "    - {regex: \"^step ([0-9]+) loss ([^ ]+) acc ([^ ]+)\", step: 1,"
				  " values: {loss: 2, acc: 3}}\n",
				  "job.yaml");
	CHECK_INT(s->metrics_npatterns, 1);
	CHECK_STR(s->metrics_patterns[0].regex, "^step ([0-9]+) loss ([^ ]+) acc ([^ ]+)");
	CHECK_INT(s->metrics_patterns[0].step, 1);
	CHECK_INT(s->metrics_patterns[0].nvalues, 2);
	CHECK_STR(s->metrics_patterns[0].names[1], "acc");
	CHECK_INT(s->metrics_patterns[0].groups[1], 3);
	/* the supervisor started by the server reads the stored JSON */
	char *text = spec_to_json(s);
	struct spec *back = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(spec_from_json(text, &back, &err), 0);
	CHECK_INT(back->metrics_npatterns, 1);
	CHECK_STR(back->metrics_patterns[0].regex, s->metrics_patterns[0].regex);
	CHECK_INT(back->metrics_patterns[0].step, 1);
	CHECK_STR(back->metrics_patterns[0].names[0], "loss");
	CHECK_INT(back->metrics_patterns[0].groups[0], 2);
	char *again = spec_to_json(back);
	CHECK_STR(again, text);
	free(text);
	free(again);
	spec_free(back);
	spec_free(s);
}

TEST(metrics_patterns_errors_name_file_line_key)
{
	const char *head = "name: p\ncommand: [\"true\"]\nmetrics:\n  patterns:\n";
	char buf[1024];
	snprintf(buf, sizeof(buf), "%s    - {regex: \"step ([0-9]+ loss\", step: 1, values: {loss: 2}}\n", head);
	const char *m = parse_err(buf, "job.yaml");
	CHECK_CONTAINS(m, "job.yaml:5: metrics.patterns[].regex: 'step ([0-9]+ loss' is not a POSIX "
			  "extended regular expression: ");
	snprintf(buf, sizeof(buf), "%s    - {regex: \"step ([0-9]+)\", step: 1, values: {loss: 2}}\n", head);
	CHECK_STR(parse_err(buf, "job.yaml"),
		  "job.yaml:5: metrics.patterns[].values: loss: group 2, but 'step ([0-9]+)' has 1 group");
	snprintf(buf, sizeof(buf), "%s    - {regex: \"step ([0-9]+)\", step: 3, values: {loss: 1}}\n", head);
	CHECK_CONTAINS(parse_err(buf, "job.yaml"), "job.yaml:5: metrics.patterns[].step: group 3");
	snprintf(buf, sizeof(buf), "%s    - {regex: \"step ([0-9]+)\", values: {loss: 1}}\n", head);
	CHECK_STR(parse_err(buf, "job.yaml"),
		  "job.yaml:5: metrics.patterns[].step: is required (the group number of the step)");
	snprintf(buf, sizeof(buf), "%s    - {regex: \"s ([0-9]+)\", step: 1, value: {loss: 1}}\n", head);
	CHECK_CONTAINS(parse_err(buf, "job.yaml"), "unknown key 'metrics.patterns[].value' (did you mean");
	snprintf(buf, sizeof(buf), "%s    - {regex: \"s ([0-9]+)\", step: 1, values: {loss: x}}\n", head);
	CHECK_CONTAINS(parse_err(buf, "job.yaml"), "metrics.patterns[].values.loss: must be an integer");
	snprintf(buf, sizeof(buf), "%s    regex: \"s\"\n", head);
	CHECK_CONTAINS(parse_err(buf, "job.yaml"), "job.yaml:5: metrics.patterns: must be a list");
}

/* logs.max_bytes: a size with units, 0 for none, default 1 GiB, kept in job.yaml and the stored JSON */
TEST(logs_max_bytes)
{
	struct spec *s = parse_ok("command: [\"true\"]\n", "d.yaml");
	CHECK_INT(s->logs_max_bytes, 1LL << 30);
	char *json = spec_to_json(s);
	CHECK(!strstr(json, "max_bytes")); /* the default is not written */
	free(json);
	spec_free(s);
	s = parse_ok("command: [\"true\"]\nlogs: {max_bytes: 64KiB}\n", "k.yaml");
	CHECK_INT(s->logs_max_bytes, 64 * 1024);
	json = spec_to_json(s);
	struct spec *back = NULL;
	CHECK_INT(spec_from_json(json, &back, NULL), 0);
	CHECK_INT(back->logs_max_bytes, 64 * 1024);
	spec_free(back);
	char *yaml = spec_to_yaml(s);
	struct spec *again = parse_ok(yaml, "job.yaml");
	CHECK_INT(again->logs_max_bytes, 64 * 1024);
	spec_free(again);
	free(yaml);
	free(json);
	spec_free(s);
	s = parse_ok("command: [\"true\"]\nlogs:\n  max_bytes: 0\n", "z.yaml");
	CHECK_INT(s->logs_max_bytes, 0);
	spec_free(s);
	s = parse_ok("command: [\"true\"]\nlogs: {max_bytes: 1.5GB}\n", "g.yaml");
	CHECK_INT(s->logs_max_bytes, 1500000000LL);
	spec_free(s);
	CHECK_CONTAINS(parse_err("command: [\"true\"]\nlogs:\n  max_bytes: 1 gigabyte\n", "b.yaml"),
		       "b.yaml:3: logs.max_bytes: must be a size from 4KiB");
	CHECK_CONTAINS(parse_err("command: [\"true\"]\nlogs: {max_bytes: 100}\n", "s.yaml"),
		       "s.yaml:2: logs.max_bytes: must be a size");
	CHECK_CONTAINS(parse_err("command: [\"true\"]\nlogs: {max_byte: 1GiB}\n", "u.yaml"),
		       "u.yaml:2: unknown key 'logs.max_byte' (did you mean 'logs.max_bytes'?)");
}

/* ---- limits: ---- */

TEST(limits_max_runtime_is_a_duration_and_round_trips)
{
	long v = 0;
	CHECK(parse_duration("90m", 86400, &v) && v == 5400);
	CHECK(parse_duration("2h", 86400, &v) && v == 7200);
	CHECK(parse_duration("1h30m", 86400, &v) && v == 5400);
	CHECK(parse_duration("45s", 86400, &v) && v == 45);
	CHECK(parse_duration("1d", 86400, &v) && v == 86400);
	v = 7;
	static const char *const bad[] = { "", "90", "m", "1.5h", "-1h", "30m1h", "1h1h", "0s",
		"2d", "5x", "1h ", "99999999999999999999h" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(!parse_duration(bad[i], 86400, &v));
	CHECK(!parse_duration("99999999999999999999999s", LONG_MAX, &v));
	CHECK(parse_duration("9223372036854775807s", LONG_MAX, &v) && v == LONG_MAX);
	v = 7;
	CHECK(!parse_duration("9223372036854775807m", LONG_MAX, &v));
	CHECK_INT(v, 7);
	struct sbuf sb = SBUF_INIT;
	format_duration(&sb, 5400);
	sbuf_adds(&sb, " ");
	format_duration(&sb, 7200);
	sbuf_adds(&sb, " ");
	format_duration(&sb, 61);
	CHECK_STR(sb.buf, "90m 2h 61s");
	sbuf_release(&sb);

	struct spec *s = parse_ok("command: [x]\nlimits:\n  max_runtime: 90m\n", "job.yaml");
	CHECK_INT(s->max_runtime, 5400);
	char *json = spec_to_json(s);
	CHECK_CONTAINS(json, "\"max_runtime\": \"90m\"");
	struct spec *back = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(spec_from_json(json, &back, &err), 0);
	CHECK_INT(back->max_runtime, 5400);
	spec_free(back);
	free(json);
	spec_free(s);
	s = parse_ok("command: [x]\n", "job.yaml");
	CHECK_INT(s->max_runtime, 0);
	json = spec_to_json(s);
	CHECK(!strstr(json, "limits"));
	free(json);
	spec_free(s);
}

TEST(limits_bad_max_runtime_names_file_line_and_key)
{
	const char *m = parse_err("command: [x]\nlimits:\n  max_runtime: 90\n", "job.yaml");
	CHECK_CONTAINS(m, "job.yaml:3: limits.max_runtime: must be a duration with a unit");
	CHECK_CONTAINS(m, "not '90'");
	m = parse_err("command: [x]\nlimits:\n  max_runtme: 1h\n", "job.yaml");
	CHECK_CONTAINS(m, "job.yaml:3: unknown key 'limits.max_runtme'");
	m = parse_err("command: [x]\nlimits: 1h\n", "job.yaml");
	CHECK_CONTAINS(m, "job.yaml:2:");
}

TEST(limits_idle_minutes_needs_an_endpoint_it_can_watch)
{
	const char *nb = "command: [x]\nendpoints:\n  - {name: nb, kind: jupyter}\n";
	struct sbuf t = SBUF_INIT;
	sbuf_addf(&t, "%slimits:\n  idle_minutes: 0.1\n", nb);
	struct spec *s = parse_ok(t.buf, "job.yaml");
	CHECK(s->idle_minutes > 0.099 && s->idle_minutes < 0.101);
	char *json = spec_to_json(s);
	CHECK_CONTAINS(json, "\"idle_minutes\": 0.1");
	struct spec *back = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(spec_from_json(json, &back, &err), 0);
	CHECK(back->idle_minutes > 0.099 && back->idle_minutes < 0.101);
	spec_free(back);
	free(json);
	spec_free(s);
	/* the stored JSON parses again as a spec (a server's supervisor reads it so) */
	sbuf_reset(&t);
	sbuf_addf(&t, "%slimits: {idle_minutes: 30, max_runtime: 2h}\n", nb);
	s = parse_ok(t.buf, "job.yaml");
	json = spec_to_json(s);
	spec_free(s);
	s = parse_ok(json, "job.json");
	CHECK(s->idle_minutes == 30 && s->max_runtime == 7200);
	free(json);
	spec_free(s);
	/* bad values name file, line and key */
	static const char *const bad[] = { "30m", "0", "-1", "0.01", "600000", "nan", "[1]", "\"5\"" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		sbuf_reset(&t);
		sbuf_addf(&t, "%slimits:\n  idle_minutes: %s\n", nb, bad[i]);
		CHECK_CONTAINS(parse_err(t.buf, "job.yaml"),
			       "job.yaml:5: limits.idle_minutes: must be a number of minutes");
	}
	/* no endpoint to watch (tensorboard's use is not seen): refused */
	CHECK_CONTAINS(parse_err("command: [x]\nlimits:\n  idle_minutes: 5\n", "job.yaml"),
		       "job.yaml:3: limits.idle_minutes: is for an interactive job: it needs an "
		       "endpoint whose activity trainctl can see (endpoints: with kind jupyter or "
		       "ssh)");
	CHECK_CONTAINS(parse_err("command: [x]\nendpoints: [{name: tb, kind: tensorboard}]\n"
				 "limits: {idle_minutes: 5}\n", "job.yaml"),
		       "job.yaml:3: limits.idle_minutes: is for an interactive job");
	sbuf_release(&t);
}
