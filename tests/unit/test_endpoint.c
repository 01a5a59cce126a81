/* test_endpoint.c -- src/endpoint/: the kind table, each kind's command line,
 * and the JSON of a job's endpoints (what the API and the CLI print) */
#include "test.h"

#include "endpoint/endpoint.h"
#include "spec/spec.h"
#include "store/store.h"
#include "core/strvec.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static char *joined(const struct strvec *v)
{
	size_t n = 1;
	for (size_t i = 0; i < v->nr; i++)
		n += strlen(v->v[i]) + 1;
	char *s = calloc(1, n);
	for (size_t i = 0; i < v->nr; i++) {
		if (i)
			strcat(s, " ");
		strcat(s, v->v[i]);
	}
	return s;
}

static void build(struct spec_endpoint *ep, const char *argv, const char *env)
{
	struct endpoint_ctx c = { .ep = ep, .job_id = "j-1", .port = 40001,
				  .base_path = "/jobs/j-1/endpoints/nb/", .run_dir = "/r/j-1",
				  .tb_dir = "/r/j-1/output/tensorboard", .workdir = "/w",
				  .secret = "0123456789abcdef0123456789abcdef" };
	struct endpoint_cmd cmd = { STRVEC_INIT, STRVEC_INIT };
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(endpoint_build(&c, &cmd, &err), 0);
	char *a = joined(&cmd.argv), *e = joined(&cmd.env);
	CHECK_STR(a, argv);
	CHECK_STR(e, env);
	free(a);
	free(e);
	endpoint_cmd_clear(&cmd);
	tc_err_release(&err);
}

TEST(kind_command_lines)
{
	struct spec_endpoint nb = { .name = "nb", .kind = "jupyter" };
	build(&nb,
	      "jupyter-notebook --no-browser --ip=127.0.0.1 --port=40001 --port-retries=0 --allow-root"
	      " --NotebookApp.base_url=/jobs/j-1/endpoints/nb/ --notebook-dir=/w",
	      /* the token in the environment, never on the command line */
	      "JUPYTER_TOKEN=0123456789abcdef0123456789abcdef");
	struct spec_endpoint tb = { .name = "nb", .kind = "tensorboard" };
	build(&tb,
	      "tensorboard --logdir=/r/j-1/output/tensorboard --host=127.0.0.1 --port=40001"
	      " --path_prefix=/jobs/j-1/endpoints/nb",
	      "");
	struct spec_endpoint web = { .name = "nb", .kind = "generic",
				     .command = "python3 -m http.server $PORT" };
	build(&web, "/bin/sh -c python3 -m http.server $PORT", "");
}

TEST(kind_table)
{
	CHECK_STR(endpoint_kind_names(), "jupyter, tensorboard, generic, ssh");
	CHECK(endpoint_kind_find("jupyter")->http);
	CHECK(endpoint_kind_find("jupyter")->auth_header != NULL);
	CHECK(!endpoint_kind_find("jupyter")->strip_prefix);
	CHECK(endpoint_kind_find("generic")->strip_prefix);
	CHECK(endpoint_kind_find("generic")->needs & ENDPOINT_KEY_COMMAND);
	CHECK(endpoint_kind_find("nope") == NULL);
	/* an image job runs its endpoints in the image, but sshd stays on the host */
	CHECK(!endpoint_kind_find("jupyter")->on_host && !endpoint_kind_find("tensorboard")->on_host);
	CHECK(!endpoint_kind_find("generic")->on_host && endpoint_kind_find("ssh")->on_host);
	/* a kind without its row built is refused by name, never run */
	const struct endpoint_kind *ssh = endpoint_kind_find("ssh");
	if (ssh && ssh->not_yet) {
		struct spec_endpoint ep = { .name = "ssh", .kind = "ssh" };
		struct endpoint_ctx c = { .ep = &ep, .port = 1, .base_path = "/" };
		struct endpoint_cmd cmd = { STRVEC_INIT, STRVEC_INIT };
		struct tc_err err = TC_ERR_INIT;
		CHECK_INT(endpoint_build(&c, &cmd, &err), TC_ESPEC);
		endpoint_cmd_clear(&cmd);
		tc_err_release(&err);
	}
	char *p = endpoint_base_path("j-1", "web");
	CHECK_STR(p, "/jobs/j-1/endpoints/web/");
	free(p);
}

TEST(list_json)
{
	struct store_endpoint v[] = {
		{ .name = "jupyter", .kind = "jupyter", .host = "127.0.0.1", .port = 8888,
		  .state = "running", .secret = "s3cr3t" },
		{ .name = "web", .kind = "generic", .host = "127.0.0.1", .port = 9000,
		  .state = "exited", .note = "exited with code 1" },
	};
	json_t *a = endpoint_list_json("j-1", v, 2, "http://srv:8080/", false);
	char *t = json_dumps(a, JSON_COMPACT);
	CHECK(strstr(t, "s3cr3t") == NULL);
	CHECK_STR(json_string_value(json_object_get(json_array_get(a, 0), "url")),
		  "http://srv:8080/jobs/j-1/endpoints/jupyter/");
	CHECK_STR(json_string_value(json_object_get(json_array_get(a, 1), "note")),
		  "exited with code 1");
	free(t);
	json_decref(a);
	/* locally: the port itself, with Jupyter's token for the job's own user */
	a = endpoint_list_json("j-1", v, 2, NULL, true);
	CHECK_STR(json_string_value(json_object_get(json_array_get(a, 0), "url")),
		  "http://127.0.0.1:8888/jobs/j-1/endpoints/jupyter/?token=s3cr3t");
	CHECK_STR(json_string_value(json_object_get(json_array_get(a, 1), "url")),
		  "http://127.0.0.1:9000/");
	json_decref(a);
}

TEST(idle_kinds_and_jupyter_activity)
{
	CHECK_STR(endpoint_idle_kind_names(), "jupyter or ssh");
	CHECK(endpoint_kind_find("jupyter")->activity && endpoint_kind_find("ssh")->activity);
	CHECK(!endpoint_kind_find("tensorboard")->activity);
	double t = 0;
	CHECK(endpoint_iso_time("2026-11-29T01:02:03.500000Z", &t));
	CHECK(t == 1795914123.5);
	CHECK(endpoint_iso_time("2026-11-29T01:02:03+00:00", &t) && t == 1795914123);
	CHECK(!endpoint_iso_time("2026-11-29T01:02:03", &t));
	CHECK(!endpoint_iso_time("yesterday", &t));
	const char *status = "{\"connections\": 0, \"kernels\": 1, "
			     "\"last_activity\": \"2026-11-29T01:00:00.000000Z\", "
			     "\"started\": \"2026-11-29T00:59:00.000000Z\"}";
	const char *idle = "[{\"id\": \"k\", \"execution_state\": \"idle\", "
			   "\"last_activity\": \"2026-11-29T01:02:03.500000Z\"}]";
	const char *busy = "[{\"id\": \"k\", \"execution_state\": \"idle\"}, {\"id\": \"k2\", "
			   "\"execution_state\": \"busy\", "
			   "\"last_activity\": \"2026-11-29T00:00:00.000000Z\"}]";
	double last = 0;
	CHECK_INT(endpoint_jupyter_parse(status, NULL, 2e9, &last), 0);
	CHECK(last == 1795914000);
	CHECK_INT(endpoint_jupyter_parse(status, idle, 2e9, &last), 0);
	CHECK(last == 1795914123.5); /* the newer of the two */
	CHECK_INT(endpoint_jupyter_parse(status, busy, 2e9, &last), 0);
	CHECK(last == 2e9); /* a busy kernel is in use now */
	CHECK_INT(endpoint_jupyter_parse(status, "[{\"id\": \"k\", \"execution_state\": \"starting\"}]",
					 2e9, &last), 0);
	CHECK(last == 2e9); /* "starting": a cell may run under it (notebook 6) */
	CHECK_INT(endpoint_jupyter_parse(status, "[]", 2e9, &last), 0);
	CHECK(last == 1795914000);
	CHECK_INT(endpoint_jupyter_parse("<html>", NULL, 2e9, &last), -1);
	CHECK_INT(endpoint_jupyter_parse(NULL, "{}", 2e9, &last), -1);
	CHECK_INT(endpoint_jupyter_parse("{\"last_activity\": \"soon\"}", NULL, 2e9, &last), -1);
}
