/* test_spec_set.c -- --set KEY=VALUE overrides (spec/override.c): every key family, errors naming the override */
#include "test.h"

#include "core/strvec.h"
#include "spec/spec.h"

#include <stdlib.h>

static const char base_spec[] = "name: job\n"
				"command: [python3, train.py]\n"
				"args: {lr: 0.1, epochs: 5}\n"
				"env: {OMP_NUM_THREADS: \"1\"}\n"
				"devices: {type: gpu, per_node: 1}\n"
				"restart: {max_restarts: 1}\n";

/* Parse base with the sets (NULL-terminated); rc, and the spec or the message. */
static int with_sets(const char *text, const char *const *sets, struct spec **out, char **msg)
{
	struct strvec sv = STRVEC_INIT;
	for (; *sets; sets++)
		strvec_push(&sv, *sets);
	struct tc_err err = TC_ERR_INIT;
	*out = NULL;
	int rc = spec_parse_set(text, strlen(text), "job.yaml", "/tmp", NULL, &sv, out, &err);
	*msg = err.msg ? strdup(err.msg) : NULL;
	tc_err_release(&err);
	strvec_clear(&sv);
	return rc;
}

static struct spec *set_ok(const char *text, const char *const *sets)
{
	struct spec *s;
	char *msg;
	int rc = with_sets(text, sets, &s, &msg);
	if (rc)
		fprintf(stderr, "unexpected error: %s\n", msg);
	CHECK_INT(rc, 0);
	free(msg);
	return s;
}

/* The message of sets that must fail (TC_ESPEC, no spec); free it. */
static char *set_err(const char *text, const char *const *sets)
{
	struct spec *s;
	char *msg;
	CHECK_INT(with_sets(text, sets, &s, &msg), TC_ESPEC);
	CHECK(s == NULL && msg);
	return msg;
}

static void setup(void)
{
	setenv("TRAINCTL_FAKE_DEVICES", "gpu:4", 1);
}

TEST(every_family)
{
	setup();
	const char *sets[] = { "args.lr=0.01", "args.model.depth=3", "env.NCCL_DEBUG=INFO",
			       "devices.per_node=4", "restart.max_restarts=2", "restart.grace_seconds=7",
			       "checkpoint.keep=3", "checkpoint.resume=never", "metrics.format=tcap",
			       "metrics.files=[a.json, b.json]", "priority=7", "preemptible=true",
			       "framework=paddle", "name=tuned", "workdir=/tmp", "nodes=1",
			       "backend=local", "command.1=other.py", NULL };
	struct spec *s = set_ok(base_spec, sets);
	CHECK_INT(s->nargs, 3);
	CHECK_STR(s->args[0].key, "lr");
	CHECK_STR(s->args[0].val, "0.01");
	CHECK_STR(s->args[2].key, "model.depth");
	CHECK_STR(s->args[2].val, "3");
	CHECK_INT(s->nenv, 2);
	CHECK_STR(s->env[1].key, "NCCL_DEBUG");
	CHECK_INT(s->per_node, 4);
	CHECK_INT(s->max_restarts, 2);
	CHECK_INT(s->grace_seconds, 7);
	CHECK_INT(s->ckpt_keep, 3);
	CHECK_INT(s->resume, RESUME_NEVER);
	CHECK_STR(s->metrics_format, "tcap");
	CHECK_INT(s->metrics_files.nr, 2);
	CHECK_INT(s->priority, 7);
	CHECK(s->preemptible);
	CHECK_STR(s->framework, "paddle");
	CHECK_STR(s->name, "tuned");
	CHECK_STR(s->argv.v[1], "other.py");
	/* the record, in order, values as given */
	CHECK_INT(s->noverrides, 18);
	CHECK_STR(s->overrides[0].key, "args.lr");
	CHECK_STR(s->overrides[0].val, "0.01");
	CHECK_STR(s->overrides[9].val, "[a.json, b.json]");
	char *json = spec_to_json(s);
	CHECK_CONTAINS(json, "\"overrides\": {");
	CHECK_CONTAINS(json, "\"devices.per_node\": \"4\"");
	/* job.yaml keeps the record and loads again */
	char *yaml = spec_to_yaml(s);
	struct spec *back = set_ok(yaml, (const char *[]){ "args.lr=0.5", NULL });
	CHECK_INT(back->noverrides, 18);
	CHECK_STR(back->overrides[17].key, "args.lr"); /* set again: moved last */
	CHECK_STR(back->overrides[17].val, "0.5");
	CHECK_INT(back->per_node, 4);
	spec_free(back);
	free(yaml);
	free(json);
	spec_free(s);
}

TEST(whole_collections)
{
	setup();
	const char *sets[] = { "command=[\"python3\",\"t.py\"]", "args={a: 1}", "devices={type: cpu}",
			       "inputs=[{from: /tmp, to: data}]", "inputs.0.to=d2",
			       "outputs.upload_to=/tmp/up", "outputs.every_steps=10", NULL };
	struct spec *s = set_ok(base_spec, sets);
	CHECK_INT(s->argv.nr, 2);
	CHECK_STR(s->argv.v[1], "t.py");
	CHECK_INT(s->nargs, 1);
	CHECK_STR(s->device_type, "cpu");
	CHECK_INT(s->ninputs, 1);
	CHECK_STR(s->inputs[0].to, "d2");
	CHECK_STR(s->upload_to, "/tmp/up");
	CHECK_INT(s->upload_every_steps, 10);
	spec_free(s);
	/* a string command; a null mapping in the file becomes one */
	s = set_ok("command: x\ndevices:\n", (const char *[]){ "command=python3 t.py --fast",
							      "devices.per_node=2", "devices.type=gpu",
							      NULL });
	CHECK_STR(s->shell, "python3 t.py --fast");
	CHECK_INT(s->per_node, 2);
	spec_free(s);
	/* parallel: and slurm: families */
	s = set_ok("command: x\n", (const char *[]){ "backend=slurm", "slurm.partition=gpu",
						    "slurm.extra=[--exclusive]", NULL });
	CHECK_STR(s->slurm.partition, "gpu");
	CHECK_STR(s->slurm.extra.v[0], "--exclusive");
	spec_free(s);
}

TEST(unknown_key_did_you_mean)
{
	setup();
	char *m = set_err(base_spec, (const char *[]){ "devices.per_nod=4", NULL });
	CHECK_STR(m, "--set devices.per_nod=4: unknown key 'per_nod' (did you mean 'per_node'?)");
	free(m);
	m = set_err(base_spec, (const char *[]){ "args.lr=1", "devics.type=gpu", NULL });
	CHECK_STR(m, "--set devics.type=gpu: unknown key 'devics' (did you mean 'devices'?)");
	free(m);
	/* a file's own error still names the file */
	m = set_err("command: x\nfoo: 1\n", (const char *[]){ "args.lr=1", NULL });
	CHECK_STR(m, "job.yaml:2: unknown key 'foo' (did you mean 'args.foo'? the command's"
		     " arguments go under args)");
	free(m);
	/* --set lr=0.1: the script's arguments live under args */
	m = set_err(base_spec, (const char *[]){ "lr=0.1", NULL });
	CHECK_STR(m, "--set lr=0.1: unknown key 'lr' (did you mean 'args.lr'? the command's"
		     " arguments go under args)");
	free(m);
}

TEST(bad_values)
{
	setup();
	struct {
		const char *set, *msg;
	} cases[] = {
		{ "devices.per_node=many", "--set devices.per_node=many: devices.per_node: must be an integer, not 'many'" },
		{ "devices.per_node=9", "--set devices.per_node=9: devices.per_node:" },
		{ "devices.per_node='4'", "must be an integer" },
		{ "restart.max_restarts=-1", "--set restart.max_restarts=-1: restart.max_restarts: must be between 0 and 1000" },
		{ "framework=jax", "'jax' is not one of" },
		{ "env.RANK=3", "--set env.RANK=3: env: 'RANK' is set by trainctl" },
		{ "env.1X=3", "--set env.1X=3: env: '1X' is not a valid variable name" },
		{ "env.MASTER_PORT=x", "--set env.MASTER_PORT=x: env: MASTER_PORT must be a port" },
		{ "args.lr=[1, 2]", "--set args.lr=[1, 2]: args: 'lr' must be a single value" },
		{ "restart=5", "--set restart=5: restart.: must be a mapping" },
		{ "command=", "--set command=: command:" },
		{ "nodes=2", "--set nodes=2: nodes: 2 nodes need backend: slurm" },
		{ "command.x=1", "--set command.x=1: 'command' is a list of 2: give an index 0..1, not 'x'" },
		{ "command.5=1", "give an index 0..1, not '5'" },
		{ "name.x=1", "--set name.x=1: 'name' is a single value, not a mapping or list" },
		{ "args.lr", "--set args.lr: give KEY=VALUE" },
		{ "=1", "--set =1: give KEY=VALUE" },
		{ "a..b=1", "--set a..b=1: 'a..b' has an empty part" },
		{ "devices.=1", "has an empty part" },
		{ "overrides.x=1", "--set overrides.x=1: overrides: is trainctl's record" },
		{ "args.lr=[1, 2", "--set args.lr=[1, 2: the value is not YAML:" },
		{ "args.lr=a: b", "the value must be one YAML scalar or a flow collection" },
		{ "args.lr=- a", "the value must be one YAML scalar or a flow collection" },
		{ "args.lr=a\n---\nb", "more than one YAML document" },
		{ "args.lr=*x", "the value is not YAML" },
		{ "args.\x9d=1", "--set args.\x9d=1: the key is not UTF-8 text" },
		{ "args.\xc0\x80=1", "the key is not UTF-8 text" },
		{ "args.\xed\xa0\x80=1", "the key is not UTF-8 text" },
		{ "args.\x01=1", "the key holds a control character" },
		{ "args.lr=\x9d", "the value is not YAML" },
		{ "args.x=&a [*a]", "nested more than 64 deep" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *m = set_err(base_spec, (const char *[]){ cases[i].set, NULL });
		CHECK_CONTAINS(m, cases[i].msg);
		free(m);
		/* the form alone: spec_set_check agrees on what it can see */
		struct tc_err err = TC_ERR_INIT;
		int rc = spec_set_check(cases[i].set, &err);
		if (rc)
			CHECK_CONTAINS(err.msg, cases[i].msg);
		tc_err_release(&err);
	}
}

TEST(deep_value)
{
	setup();
	char v[600] = "args.x=";
	for (int i = 0; i < 100; i++)
		strcat(v, "[");
	for (int i = 0; i < 100; i++)
		strcat(v, "]");
	char *m = set_err(base_spec, (const char *[]){ v, NULL });
	CHECK_CONTAINS(m, "nested more than 64 deep");
	free(m);
	/* aliases repeat a node: 10 x 10 x 10 x 10 x 10 items from a few bytes */
	const char *laughs = "args.x=[&a [x, x, x, x, x, x, x, x, x, x], &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a], "
			     "&c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b], &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c], "
			     "[*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]]";
	m = set_err(base_spec, (const char *[]){ laughs, NULL });
	CHECK_CONTAINS(m, "holds more than 10000 items");
	free(m);
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(spec_set_check(v, &err), TC_ESPEC);
	tc_err_release(&err);
	CHECK_INT(spec_set_check("args.lr=0.1", &err), 0);
	CHECK_INT(spec_set_check("command=[a, {b: c}]", &err), 0);
}

TEST(null_and_empty)
{
	setup();
	/* args: a bare flag; an empty value is null as in a file */
	struct spec *s = set_ok(base_spec, (const char *[]){ "args.verbose=", NULL });
	CHECK_STR(s->args[2].key, "verbose");
	CHECK(s->args[2].val == NULL);
	spec_free(s);
	/* no sets: the same as spec_parse_backend */
	s = set_ok(base_spec, (const char *[]){ NULL });
	CHECK_INT(s->noverrides, 0);
	char *json = spec_to_json(s);
	CHECK(!strstr(json, "overrides"));
	free(json);
	spec_free(s);
	/* a later set of the same key wins */
	s = set_ok(base_spec, (const char *[]){ "priority=5", "priority=6", NULL });
	CHECK_INT(s->priority, 6);
	CHECK_INT(s->noverrides, 1);
	spec_free(s);
}

TEST(stored_record_reads_back)
{
	setup();
	struct spec *s = set_ok(base_spec, (const char *[]){ "args.lr=0.5", NULL });
	char *json = spec_to_json(s);
	struct spec *back = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(spec_from_json(json, &back, &err), 0);
	CHECK_INT(back->noverrides, 1);
	CHECK_STR(back->overrides[0].key, "args.lr");
	CHECK_STR(back->overrides[0].val, "0.5");
	spec_free(back);
	free(json);
	spec_free(s);
}
