/* test_parse_buffers.c -- the loaders that take bytes (the fuzzers' entries,
 * tests/fuzz/): each reads what its path twin reads, and the API's submit
 * body is parsed without a connection */
#include "test.h"

#include "ckpt/ckpt.h"
#include "core/util.h"
#include "launch/launch.h"
#include "plan/plan.h"
#include "plan/plan_int.h"
#include "api/api_int.h"
#include "zoo/zoo.h"

#include <stdlib.h>

static char *write_tmp(const char *name, const void *data, size_t len)
{
	struct sbuf p = SBUF_INIT;
	struct tc_err err = TC_ERR_INIT;
	sbuf_addf(&p, "%s/%s", test_tmpdir(), name);
	CHECK_INT(write_file_atomic(p.buf, data, len, &err), 0);
	return sbuf_detach(&p);
}

/* An unterminated heap copy: a parser reading past len is caught under ASan. */
static char *bytes(const char *s, size_t *len)
{
	*len = strlen(s);
	char *b = malloc(*len ? *len : 1);
	CHECK(b != NULL);
	memcpy(b, s, *len);
	return b;
}

TEST(safetensors_from_memory_and_from_a_file)
{
	static const char hdr[] = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
				  "\"__metadata__\":{\"format\":\"pt\"}}";
	size_t hl = sizeof(hdr) - 1, len = 8 + hl + 8;
	unsigned char *buf = calloc(1, len);
	CHECK(buf != NULL);
	for (int i = 0; i < 8; i++)
		buf[i] = (unsigned char)(hl >> (8 * i));
	memcpy(buf + 8, hdr, hl);
	struct st_file *m = NULL, *f = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(st_parse(buf, len, "mem.safetensors", &m, &err), 0);
	char *path = write_tmp("a.safetensors", buf, len);
	CHECK_INT(st_open(path, &f, &err), 0);
	CHECK_INT(m->nt, 1);
	CHECK_INT(f->nt, 1);
	CHECK_STR(m->t[0].name, f->t[0].name);
	CHECK(m->data_off == f->data_off && m->size == f->size);
	CHECK_STR(m->metadata_json, f->metadata_json);
	CHECK(m->map == buf); /* the caller's bytes, not a copy */
	st_close(m);
	st_close(f);
	/* the same errors, naming what it was given */
	CHECK_INT(st_parse(buf, 7, "mem.safetensors", &m, &err), TC_EINPUT);
	CHECK_CONTAINS(err.msg, "mem.safetensors: truncated: 7 bytes");
	buf[8 + hl] = 1;
	CHECK_INT(st_parse(buf, len - 1, "mem.safetensors", &m, &err), TC_EINPUT);
	CHECK_CONTAINS(err.msg, "past the 7 bytes of data");
	tc_err_release(&err);
	free(path);
	free(buf);
}

TEST(plan_model_and_cluster_from_bytes)
{
	static const char model[] = "name: tiny\nlayers:\n  - {count: 3, params: 1e6, time_ms: {1: 2.0, 2: 1.1}}\n";
	static const char cluster[] = "nodes: 2\ndevices_per_node: 4\ndevice_memory: 40GiB\n";
	size_t ml, cl;
	char *mb = bytes(model, &ml), *cb = bytes(cluster, &cl);
	struct plan_model *m = NULL, *f = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(plan_model_parse(mb, ml, "/x/tiny.yaml", &m, &err), 0);
	char *mp = write_tmp("tiny.yaml", model, ml);
	CHECK_INT(plan_model_load(mp, 0, &f, &err), 0);
	CHECK_INT(plan_model_layers(m), 3);
	CHECK_INT(plan_model_layers(f), 3);
	CHECK_STR(plan_model_name(m), "tiny"); /* its name:, else the file's */
	CHECK(plan_model_tp_ok(m, 2) && !plan_model_tp_ok(m, 4));
	plan_model_free(m);
	plan_model_free(f);
	struct plan_cluster a, b;
	plan_cluster_defaults(&a);
	plan_cluster_defaults(&b);
	CHECK_INT(plan_cluster_parse(cb, cl, "c.yaml", &a, &err), 0);
	char *cp = write_tmp("c.yaml", cluster, cl);
	CHECK_INT(plan_cluster_load(cp, &b, &err), 0);
	CHECK(!memcmp(&a, &b, sizeof(a)));
	CHECK_INT(a.nodes, 2);
	CHECK_INT(a.devices_per_node, 4);
	CHECK_INT(plan_cluster_parse("nodes: [1]\n", 11, "c.yaml", &a, &err), TC_EINPUT);
	CHECK_CONTAINS(err.msg, "c.yaml:1: 'nodes': expected a number");
	CHECK_INT(plan_cluster_load("/nonexistent/c.yaml", &a, &err), TC_EINPUT);
	CHECK_CONTAINS(err.msg, "cannot open '/nonexistent/c.yaml'");
	tc_err_release(&err);
	free(mp);
	free(cp);
	free(mb);
	free(cb);
}

TEST(zoo_cases_from_bytes)
{
	static const char yaml[] =
		"- case_name: c1\n"
		"  desc: {run_dir: run, run_file: run.py}\n"
		"  params: {model_name: m, nproc_per_node: 2, batch_size: 8, epoch: 1, step: -1,\n"
		"           lr: 0.1, device: cpu, autocast: false, dataset_path: /d}\n";
	size_t len;
	char *b = bytes(yaml, &len);
	struct zoo_case *v = NULL;
	size_t n = 0;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(zoo_cases_parse(b, len, "model.yaml", "/root/m", &v, &n, &err), 0);
	CHECK_INT(n, 1);
	CHECK_STR(v[0].name, "c1");
	CHECK_STR(v[0].run_dir, "/root/m/run");
	CHECK_INT(v[0].nproc_per_node, 2);
	zoo_cases_free(v, n);
	CHECK_INT(zoo_cases_parse("- case_name: c1\n", 16, "model.yaml", "/root/m", &v, &n, &err),
		  TC_ESPEC);
	CHECK_CONTAINS(err.msg, "model.yaml:1: case 'c1': desc: is required");
	CHECK_INT(zoo_cases_load("/nonexistent/model.yaml", NULL, &v, &n, &err), TC_ENOTFOUND);
	CHECK_CONTAINS(err.msg, "zoo test: cannot open /nonexistent/model.yaml: No such file");
	tc_err_release(&err);
	free(b);
}

TEST(hccn_conf_from_bytes)
{
	size_t len;
	char *b = bytes("address_1=10.0.0.2 \naddress_0=10.0.0.1", &len);
	static const int ids[2] = { 0, 1 };
	char *ips[2];
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(ranktable_parse_ips(b, len, "hccn.conf", ids, 2, ips, &err), 0);
	CHECK_STR(ips[0], "10.0.0.1");
	CHECK_STR(ips[1], "10.0.0.2");
	free(ips[0]);
	free(ips[1]);
	CHECK_INT(ranktable_parse_ips(b, 0, "hccn.conf", ids, 2, ips, &err), TC_ESPEC);
	CHECK_CONTAINS(err.msg, "hccn.conf: no address_0 line for npu 0");
	CHECK(ips[0] == NULL && ips[1] == NULL);
	tc_err_release(&err);
	free(b);
}

/* POST /api/v1/jobs: its body as bytes, to a request or a 400 with the reason */
static unsigned submit(const char *body, struct api_submit *a, struct sbuf *why)
{
	size_t len;
	char *b = bytes(body, &len);
	sbuf_reset(why);
	unsigned st = api_submit_parse(b, len, a, why);
	free(b);
	return st;
}

TEST(api_submit_body)
{
	struct api_submit a;
	struct sbuf why = SBUF_INIT;
	CHECK_INT(submit("{\"spec\": \"command: [x]\", \"file\": \"j.yaml\", \"base\": \"/w\", \"name\": \"n\"}",
			 &a, &why), 0);
	CHECK_STR(a.text, "command: [x]");
	CHECK_STR(a.file, "j.yaml");
	CHECK_STR(a.base, "/w");
	CHECK_STR(a.name, "n");
	api_submit_release(&a);
	CHECK_INT(submit("{\"spec\": {\"command\": [\"x\"]}, \"name\": \"\"}", &a, &why), 0);
	CHECK_STR(a.text, "{\"command\":[\"x\"]}");
	CHECK(a.file == NULL && a.base == NULL && a.name == NULL);
	api_submit_release(&a);
	static const struct {
		const char *body, *why;
	} bad[] = {
		{ "{\"spec\": ", "malformed JSON at line 1" },
		{ "[1]", "the body must be a JSON object with a 'spec'" },
		{ "{\"spec\": \"x\", \"file\": 1}", "'base', 'file' and 'name' must be strings" },
		{ "{\"spec\": \"x\", \"name\": []}", "'base', 'file' and 'name' must be strings" },
		{ "{\"spec\": \"x\", \"base\": \"rel\"}", "'base' must be an absolute path" },
		{ "{\"spec\": 3}", "'spec' must be the spec text (YAML or JSON) or a JSON object" },
		{ "{}", "'spec' must be the spec text" },
		{ "{\"spec\": \"a\\u0000b\"}", "\\u0000 is not allowed" }, /* jansson's word */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_INT(submit(bad[i].body, &a, &why), 400);
		CHECK_CONTAINS(why.buf, bad[i].why);
		CHECK(a.text == NULL);
	}
	sbuf_release(&why);
}

TEST(api_query_values)
{
	long v;
	CHECK(api_arg_long(NULL, 1, 10, 5, &v) && v == 5);
	CHECK(api_arg_long("", 1, 10, 5, &v) && v == 5);
	CHECK(api_arg_long("7", 1, 10, 5, &v) && v == 7);
	CHECK(!api_arg_long("11", 1, 10, 5, &v));
	CHECK(!api_arg_long("7x", 1, 10, 5, &v));
	unsigned set;
	const char *bad = NULL;
	int n = 0;
	CHECK(api_parse_states("queued,running,lost", &set, &bad, &n) && set != 0);
	const char *s = "queued,runing,x";
	CHECK(!api_parse_states(s, &set, &bad, &n) && bad == s + 7 && n == 6);
	CHECK(api_parse_states("queued,", &set, &bad, &n));
	CHECK(!api_parse_states(",", &set, &bad, &n) && n == 0);
}

/* A tab in the indentation of a plan model, a cluster or a zoo model.yaml gets
 * the job spec's hint, naming the line (issue 16, 3.5), read from bytes that
 * do not end in a NUL; other YAML errors stay libyaml's. */
TEST(yaml_loaders_name_a_tab)
{
	static const char model[] = "name: tiny\nlayers:\n  - count: 3\n\t  params: 1e6\n";
	static const char cluster[] = "nodes: 2\n\tdevices_per_node: 4\n";
	static const char zoo[] = "- case_name: c1\n  desc:\n\t  run_dir: run\n";
	static const char bad[] = "nodes: [2\n";
	size_t ml, cl, zl, bl;
	char *mb = bytes(model, &ml), *cb = bytes(cluster, &cl), *zb = bytes(zoo, &zl),
	     *bb = bytes(bad, &bl);
	struct tc_err err = TC_ERR_INIT;
	struct plan_model *m = NULL;
	CHECK(plan_model_parse(mb, ml, "m.yaml", &m, &err) != 0);
	CHECK_STR(err.msg, "m.yaml:4: a tab: YAML forbids tabs for indentation (indent with spaces)");
	struct plan_cluster c;
	plan_cluster_defaults(&c);
	CHECK_INT(plan_cluster_parse(cb, cl, "c.yaml", &c, &err), TC_EINPUT);
	CHECK_STR(err.msg, "c.yaml:2: a tab: YAML forbids tabs for indentation (indent with spaces)");
	struct zoo_case *v = NULL;
	size_t n = 0;
	CHECK_INT(zoo_cases_parse(zb, zl, "model.yaml", "/root/m", &v, &n, &err), TC_ESPEC);
	CHECK_STR(err.msg,
		  "model.yaml:3: a tab: YAML forbids tabs for indentation (indent with spaces)");
	CHECK_INT(plan_cluster_parse(bb, bl, "c.yaml", &c, &err), TC_EINPUT);
	CHECK(strstr(err.msg, "a tab") == NULL);
	CHECK_CONTAINS(err.msg, "c.yaml:");
	tc_err_release(&err);
	free(mb);
	free(cb);
	free(zb);
	free(bb);
}
