/* test_spec_access.c -- src/spec/access.c: a stored spec read back
 * (spec_from_json) gives the same spec, key for key. */
#include "test.h"

#include "spec/spec.h"

#include <stdlib.h>

/* spec_to_json(spec_from_json(spec_to_json(s))) is spec_to_json(s). */
static struct spec *round_trip(const struct spec *s)
{
	char *text = spec_to_json(s);
	struct spec *back = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(spec_from_json(text, &back, &err), 0);
	char *again = spec_to_json(back);
	CHECK_STR(again, text);
	free(again);
	free(text);
	return back;
}

TEST(stored_spec_reads_back)
{
	setenv("TRAINCTL_FAKE_DEVICES", "gpu:8", 1);
	struct spec *s = test_spec_ok(
		"name: full\ncommand: 'python train.py'\nargs: {lr: 0.1, verbose: null}\n"
		"env: {A: '1'}\nframework: pytorch\ndevices: {type: gpu, per_node: 8}\n"
		"restart: {max_restarts: 3, grace_seconds: 12}\n"
		"checkpoint: {dir: ck, resume: never, keep: 2}\npriority: 7\npreemptible: true\n"
		"parallel: {strategy: auto, model: gpt2-medium, global_batch: 32}\n"
		"inputs: [{from: /data/x, to: x}]\n"
		"outputs: {upload_to: '/out/{job_id}', every_seconds: 60, every_steps: 5}\n"
		"metrics: {format: dllogger, warmup_steps: 3, batch_size: 16, accuracy: val.acc,"
		" files: [m.json]}\n");
	struct spec *b = round_trip(s);
	CHECK_STR(b->name, "full");
	CHECK_STR(b->shell, "python train.py");
	CHECK_INT(b->per_node, 8);
	CHECK_INT(b->device_ids[7], s->device_ids[7]);
	CHECK_INT(b->max_restarts, 3);
	CHECK_INT(b->grace_seconds, 12);
	CHECK_INT(b->resume, RESUME_NEVER);
	CHECK_INT(b->ckpt_keep, 2);
	CHECK_INT(b->priority, 7);
	CHECK(b->preemptible);
	CHECK(b->parallel.on);
	CHECK_INT(b->parallel.dp, s->parallel.dp);
	CHECK_STR(b->parallel.partition, s->parallel.partition);
	CHECK_INT(b->ninputs, 1);
	CHECK_STR(b->upload_to, "/out/{job_id}");
	CHECK_INT(b->upload_every_steps, 5);
	CHECK_STR(b->metrics_format, "dllogger");
	CHECK_INT(b->metrics_warmup_steps, 3);
	CHECK_INT(b->metrics_batch_size, 16);
	CHECK_STR(b->metrics_accuracy, "val.acc");
	CHECK_INT(b->metrics_files.nr, 1);
	CHECK_INT(b->nargs, 2);
	CHECK(b->args[1].val == NULL);
	spec_free(b);
	spec_free(s);

	s = test_spec_ok("command: [a, b]\nnodes: 2\nbackend: slurm\ndevices: {type: cpu, per_node: 2}\n"
		     "checkpoint: {resume: 's3://b/ck/step-10'}\n"
		     "slurm: {partition: debug, time: '10', extra: [--exclusive]}\n");
	b = round_trip(s);
	CHECK_INT(b->argv.nr, 2);
	CHECK_STR(b->backend, "slurm");
	CHECK_INT(b->nodes, 2);
	CHECK_INT(b->resume, RESUME_PATH);
	CHECK_STR(b->resume_path, "s3://b/ck/step-10");
	CHECK_STR(b->slurm.partition, "debug");
	CHECK_INT(b->slurm.extra.nr, 1);
	CHECK(b->metrics_format == NULL); /* auto */
	spec_free(b);
	spec_free(s);
}

TEST(stored_spec_partial_and_bad)
{
	struct spec *s = NULL;
	struct tc_err err = TC_ERR_INIT;
	/* keys it lacks keep the defaults */
	CHECK_INT(spec_from_json("{\"nodes\": 2, \"metrics\": {\"warmup_steps\": 4}}", &s, &err), 0);
	CHECK_INT(s->nodes, 2);
	CHECK_INT(s->metrics_warmup_steps, 4);
	CHECK_INT(s->grace_seconds, 30);
	CHECK_STR(s->backend, "local");
	CHECK_INT(s->per_node, 1);
	spec_free(s);
	s = NULL;
	CHECK_INT(spec_from_json("[1]", &s, &err), TC_ESPEC);
	CHECK(s == NULL);
	tc_err_release(&err);
	CHECK_INT(spec_from_json(NULL, &s, &err), TC_ESPEC);
	tc_err_release(&err);
	CHECK_INT(spec_from_json("{", &s, &err), TC_ESPEC);
	tc_err_release(&err);
}
