/* test_zoo.c -- src/zoo/: model.yaml validation, the skeleton and the
 * structure check, the result table and JUnit XML. */
#include "test.h"

#include "core/sbuf.h"
#include "core/strvec.h"
#include "core/util.h"
#include "zoo/zoo.h"

#include <unistd.h>

static char *write_yaml(const char *text)
{
	struct sbuf p = SBUF_INIT;
	struct tc_err err = TC_ERR_INIT;
	sbuf_addf(&p, "%s/model.yaml", test_tmpdir());
	CHECK_INT(write_file_atomic(p.buf, text, strlen(text), &err), 0);
	return sbuf_detach(&p);
}

#define GOOD_PARAMS                                                                         \
	"{nnodes: 1, nproc_per_node: 2, model_name: m, batch_size: 8, dataset_path: /d,"    \
	" step: 3, epoch: 1, lr: 0.1, device: cpu, autocast: true, others: {warmup: 0, tag: 'x y'}}"

TEST(cases_load_flattens_others)
{
	char *path = write_yaml("- case_name: c1\n"
				"  desc: {run_dir: M/N, run_file: run_scripts/run_m.py}\n"
				"  params: " GOOD_PARAMS "\n");
	struct zoo_case *v = NULL;
	size_t n = 0;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(zoo_cases_load(path, NULL, &v, &n, &err), 0);
	CHECK_INT(n, 1);
	CHECK_STR(v[0].name, "c1");
	CHECK_INT(v[0].line, 1);
	CHECK_INT(v[0].nproc_per_node, 2);
	CHECK_STR(v[0].run_file, "run_scripts/run_m.py");
	struct sbuf want = SBUF_INIT;
	sbuf_addf(&want, "%s/M/N", test_tmpdir());
	CHECK_STR(v[0].run_dir, want.buf);
	CHECK_INT(v[0].nparams, 12);
	CHECK_STR(v[0].params[0].key, "nnodes");
	CHECK_STR(v[0].params[9].key, "autocast");
	CHECK_STR(v[0].params[9].val, "true");
	CHECK_STR(v[0].params[10].key, "warmup");
	CHECK_STR(v[0].params[11].val, "x y");
	zoo_cases_free(v, n);
	sbuf_release(&want);
	free(path);
	tc_err_release(&err);
}

static void expect_bad(const char *yaml, const char *msg)
{
	char *path = write_yaml(yaml);
	struct zoo_case *v = NULL;
	size_t n = 0;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(zoo_cases_load(path, NULL, &v, &n, &err), TC_ESPEC);
	CHECK(v == NULL && n == 0);
	CHECK_CONTAINS(err.msg, msg);
	free(path);
	tc_err_release(&err);
}

TEST(cases_load_rejects_with_case_and_key)
{
	expect_bad("[]\n", "model.yaml:1: expected a list of cases");
	expect_bad("- case_name: c\n  desc: {run_dir: ../x, run_file: r.py}\n  params: " GOOD_PARAMS "\n",
		   "model.yaml:2: case 'c': desc.run_dir: '../x' is outside the root");
	expect_bad("- case_name: c\n  desc: {run_dir: a/../../x, run_file: r.py}\n  params: " GOOD_PARAMS "\n",
		   "is outside the root");
	expect_bad("- case_name: c\n  desc: {run_dir: /abs, run_file: r.py}\n  params: " GOOD_PARAMS "\n",
		   "desc.run_dir: '/abs' is outside the root");
	expect_bad("- case_name: c\n  desc: {run_dir: a, run_file: ../r.py}\n  params: " GOOD_PARAMS "\n",
		   "case 'c': desc.run_file: '../r.py' is outside run_dir");
	expect_bad("- case_name: c\n  desc: {run_dir: a}\n  params: " GOOD_PARAMS "\n",
		   "case 'c': desc.run_file: is required");
	expect_bad("- case_name: c\n  desc: {run_dir: a, run_file: r.py}\n"
		   "  params: {nproc_per_node: 1, model_name: m, batch_size: 8, dataset_path: d,"
		   " step: 3, epoch: 1, device: cpu, autocast: true}\n",
		   "model.yaml:3: case 'c': params.lr: is required");
	expect_bad("- case_name: c\n  desc: {run_dir: a, run_file: r.py}\n"
		   "  params: {nproc_per_node: '2', model_name: m, batch_size: 8, dataset_path: d,"
		   " step: 3, epoch: 1, lr: 1, device: cpu, autocast: true}\n",
		   "case 'c': params.nproc_per_node: expected an integer >= 1, not '2'");
	expect_bad("- case_name: c\n  desc: {run_dir: a, run_file: r.py}\n"
		   "  params: {nproc_per_node: 0, model_name: m, batch_size: 8, dataset_path: d,"
		   " step: 3, epoch: 1, lr: 1, device: cpu, autocast: true}\n",
		   "params.nproc_per_node: expected an integer >= 1, not '0'");
	expect_bad("- case_name: c\n  desc: {run_dir: a, run_file: r.py}\n"
		   "  params: {nproc_per_node: 1, model_name: m, batch_size: 8, dataset_path: d,"
		   " step: 3, epoch: 1, lr: fast, device: cpu, autocast: 1}\n",
		   "params.lr: expected a number, not 'fast'");
	expect_bad("- case_name: c\n  desc: {run_dir: a, run_file: r.py}\n"
		   "  params: {nproc_per_node: 1, model_name: m, batch_size: 8, dataset_path: d,"
		   " step: 3, epoch: 1, lr: 1, device: cpu, autocast: 1}\n",
		   "params.autocast: expected true or false, not '1'");
	expect_bad("- case_name: c\n  desc: {run_dir: a, run_file: r.py}\n"
		   "  params: {nproc_per_node: 1, model_name: m, batch_size: 8, dataset_path: d,"
		   " step: 3, epoch: 1, lr: 1, device: cpu, autocast: true, extra: {a: 1}}\n",
		   "params.extra: expected a single value, not a mapping");
	expect_bad("- case_name: c\n  desc: {run_dir: a, run_file: r.py}\n"
		   "  params: {nproc_per_node: 1, model_name: m, batch_size: 8, dataset_path: d,"
		   " step: 3, epoch: 1, lr: 1, device: cpu, autocast: true, others: {lr: 2}}\n",
		   "params.others.lr: repeats params.lr");
	expect_bad("- desc: {run_dir: a, run_file: r.py}\n  params: " GOOD_PARAMS "\n",
		   "model.yaml:1: case_name: is required");
	expect_bad("- case_name: c\n  dsec: {run_dir: a, run_file: r.py}\n  params: " GOOD_PARAMS "\n",
		   "case 'c': unknown key 'dsec'");
	expect_bad("- case_name: c\n  desc: [\n", "model.yaml:");
}

TEST(cases_load_rejects_a_link_out_of_the_root)
{
	struct sbuf link = SBUF_INIT;
	sbuf_addf(&link, "%s/out", test_tmpdir());
	CHECK(symlink("/usr", link.buf) == 0);
	expect_bad("- case_name: c\n  desc: {run_dir: out/lib, run_file: r.py}\n  params: " GOOD_PARAMS "\n",
		   "desc.run_dir: 'out/lib' leads outside the root");
	sbuf_release(&link);
}

TEST(new_skeleton_passes_check_and_problems_are_listed)
{
	struct tc_err err = TC_ERR_INIT;
	char *made = NULL;
	CHECK_INT(zoo_new("MyNet", test_tmpdir(), &made, &err), 0);
	struct sbuf p = SBUF_INIT;
	sbuf_addf(&p, "%s/MyNet/run_scripts/run_mynet.py", test_tmpdir());
	CHECK(access(p.buf, X_OK) == 0);
	struct strvec problems = STRVEC_INIT;
	CHECK_INT(zoo_check(made, "python3", &problems, &err), 0);
	for (size_t i = 0; i < problems.nr; i++)
		fprintf(stderr, "problem: %s\n", problems.v[i]);
	CHECK_INT(problems.nr, 0);
	/* break it twice: both reported */
	sbuf_reset(&p);
	sbuf_addf(&p, "%s/requirements.txt", made);
	CHECK(unlink(p.buf) == 0);
	sbuf_reset(&p);
	sbuf_addf(&p, "%s/run_scripts/argument.py", made);
	const char *stub = "import argparse\n"
			   "def parse_args(argv=None):\n"
			   "    p = argparse.ArgumentParser()\n"
			   "    p.add_argument('--model-name')\n"
			   "    p.add_argument('--nnodes')\n"
			   "    return p.parse_known_args(argv)\n"
			   "def train_argv(a):\n    return []\n";
	CHECK_INT(write_file_atomic(p.buf, stub, strlen(stub), &err), 0);
	CHECK_INT(zoo_check(made, "python3", &problems, &err), 0);
	CHECK_STR(problems.v[0], "missing file requirements.txt");
	/* --model-name counts as model_name, --nnodes as nnode */
	CHECK_STR(problems.v[1], "run_scripts/run_mynet.py: missing argument --batch_size");
	CHECK_INT(problems.nr, 1 + 11);
	strvec_clear(&problems);
	/* a run file that does not start */
	CHECK_INT(zoo_check(made, "/nonexistent/python", &problems, &err), 0);
	CHECK_CONTAINS(problems.v[1], "--help exited with code 127");
	strvec_clear(&problems);
	char *again = NULL;
	CHECK_INT(zoo_new("MyNet", test_tmpdir(), &again, &err), TC_EINPUT);
	CHECK_INT(zoo_new("a/b", test_tmpdir(), &again, &err), TC_EUSAGE);
	CHECK(again == NULL);
	CHECK_INT(zoo_check("/nonexistent", "python3", &problems, &err), TC_ENOTFOUND);
	free(made);
	sbuf_release(&p);
	tc_err_release(&err);
}

TEST(table_and_junit_escape)
{
	struct zoo_result r[2] = {
		{ "ok_case", true, NULL, "J1", NULL, 1.5 },
		{ "bad<&>", false, "run failed: \"x\"", NULL, "tail\x01 <here>", 0.25 },
	};
	struct sbuf t = SBUF_INIT, x = SBUF_INIT;
	zoo_results_table(r, 2, &t);
	CHECK_CONTAINS(t.buf, "ok_case  PASS");
	CHECK_CONTAINS(t.buf, "1 passed, 1 failed");
	zoo_junit_xml("m.yaml", r, 2, &x);
	CHECK_CONTAINS(x.buf, "<testsuites tests=\"2\" failures=\"1\"");
	CHECK_CONTAINS(x.buf, "name=\"bad&lt;&amp;&gt;\"");
	CHECK_CONTAINS(x.buf, "message=\"run failed: &quot;x&quot;\">tail? &lt;here&gt;</failure>");
	CHECK_CONTAINS(x.buf, "<system-out>trainctl job J1");
	sbuf_release(&t);
	sbuf_release(&x);
}
