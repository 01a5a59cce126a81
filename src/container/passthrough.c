/*
 * passthrough.c -- the device pass-through table of containers (container.h):
 * one row per device type (devices.h), saying which device nodes and
 * driver folders a worker's container gets for its devices, and how the
 * row was verified.  A type without a row is an error naming the row,
 * never a container without its devices.
 */
#include "container/container.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "devices/devices.h"

#include <stdlib.h>
#include <string.h>

struct dev_row {
	const char *type;
	/* NVIDIA: CDI names for podman (--device nvidia.com/gpu=N), --gpus for docker */
	const char *cdi_fmt;
	bool docker_gpus;
	const char *per_device;          /* "/dev/davinci%d": one node per device id */
	const char *const *shared;       /* nodes every worker of the type needs */
	const char *const *ro_paths;     /* host files and folders mounted read-only, when present */
	bool renumbered;                 /* the container numbers the devices 0..n-1 */
	const char *verified;
};

static const char *const npu_shared[] = { "/dev/davinci_manager", "/dev/devmm_svm",
					  "/dev/hisi_hdc", NULL };
/* as Ascend's own docker runtime (ascend-docker-runtime) mounts them */
static const char *const npu_ro[] = { "/usr/local/Ascend/driver", "/usr/local/dcmi",
				      "/usr/local/bin/npu-smi", "/etc/ascend_install.info",
				      "/usr/local/sbin/npu-smi", NULL };
static const char *const rocm_shared[] = { "/dev/kfd", "/dev/dri", NULL };
static const char *const xpu_shared[] = { "/dev/dri", NULL };
static const char *const mlu_shared[] = { "/dev/cambricon_ctl", NULL };

static const struct dev_row rows[] = {
	{ .type = "cpu", .verified = "e2e: tests/e2e/test_containers.py (podman)" },
	{ .type = "gpu", .cdi_fmt = "nvidia.com/gpu=%d", .docker_gpus = true, .renumbered = true,
	  .verified = "argv unit-tested (tests/unit/test_container.c); no GPU here" },
	{ .type = "npu", .per_device = "/dev/davinci%d", .shared = npu_shared, .ro_paths = npu_ro,
	  .verified = "argv unit-tested (tests/unit/test_container.c); no NPU here" },
	{ .type = "rocm", .shared = rocm_shared,
	  .verified = "argv unit-tested; AMD's documented --device /dev/kfd --device /dev/dri" },
	{ .type = "xpu", .shared = xpu_shared,
	  .verified = "argv unit-tested; Intel's documented --device /dev/dri" },
	{ .type = "mlu", .per_device = "/dev/cambricon_dev%d", .shared = mlu_shared,
	  .verified = "argv unit-tested; Cambricon's documented device nodes, unverified on a card" },
	/* sdaa (Tecorigin) and musa (Moore Threads): no row yet, see container_devices */
};

static const struct dev_row *row_find(const char *type)
{
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		if (!strcmp(rows[i].type, type))
			return &rows[i];
	return NULL;
}

const struct container_dev_info *container_dev_rows(size_t *n)
{
	static struct container_dev_info info[sizeof(rows) / sizeof(rows[0])];
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		info[i] = (struct container_dev_info){ rows[i].type, rows[i].verified };
	*n = sizeof(rows) / sizeof(rows[0]);
	return info;
}

int container_devices(const struct container_runtime *rt, const char *device_type, const int *ids,
		      int n, bool (*exists)(const char *path), struct strvec *out, struct tc_err *err)
{
	const struct dev_row *r = row_find(device_type);
	if (!r)
		return tc_error(err, TC_EBACKEND,
				"containers have no device pass-through row for device type '%s' "
				"(src/container/passthrough.c): run it on the host, or add the row",
				device_type);
	if (r->cdi_fmt && rt->kind == CONTAINER_DOCKER && r->docker_gpus && n > 0) {
		struct sbuf sb = SBUF_INIT;
		char *text = device_ids_text(ids, n);
		sbuf_addf(&sb, "--gpus=\"device=%s\"", text);
		free(text);
		strvec_push_nodup(out, sbuf_detach(&sb));
	} else if (r->cdi_fmt) {
		for (int i = 0; i < n; i++) {
			strvec_push(out, "--device");
			strvec_pushf(out, r->cdi_fmt, ids[i]);
		}
	}
	if (r->per_device)
		for (int i = 0; i < n; i++) {
			strvec_push(out, "--device");
			strvec_pushf(out, r->per_device, ids[i]);
		}
	for (const char *const *d = r->shared; d && *d; d++) {
		strvec_push(out, "--device");
		strvec_push(out, *d);
	}
	for (const char *const *p = r->ro_paths; p && *p; p++) {
		if (exists && !exists(*p))
			continue; /* driver layouts differ between releases */
		strvec_push(out, "-v");
		strvec_pushf(out, "%s:%s:ro", *p, *p);
	}
	return 0;
}

char *container_visible_value(const char *device_type, const char *host_value)
{
	const struct dev_row *r = row_find(device_type);
	if (!r || !r->renumbered || !host_value)
		return NULL;
	/*
	 * The runtime shows the devices it was given as 0..n-1 in host
	 * order: "3,1" on the host is "1,0" inside.
	 */
	int *ids, n;
	if (device_ids_parse(host_value, &ids, &n, NULL))
		return NULL; /* not a plain id list (UUIDs): leave it as it is */
	int *inside = xcalloc(n ? (size_t)n : 1, sizeof(*inside));
	for (int i = 0; i < n; i++)
		for (int k = 0; k < n; k++)
			inside[i] += ids[k] < ids[i];
	char *text = device_ids_text(inside, n);
	free(inside);
	free(ids);
	return text;
}
