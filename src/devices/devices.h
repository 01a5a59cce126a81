/*
 * devices.h -- accelerator kinds and what this machine has of them.
 *
 * The kind table (one row per device type) is the single place that knows
 * a vendor's visibility variable and how a rank finds its device; the
 * launcher and the spec validator read it, nothing else hard-codes vendors.
 * Discovery asks NVML (dlopen'ed at run time, no build dependency) for
 * NVIDIA GPUs, `npu-smi` for Ascend NPUs and sysconf for CPUs.  Tests and
 * machines without the vendor tools can declare devices with
 * TRAINCTL_FAKE_DEVICES="gpu:2,npu:8" (Slurm's fake_gpus.conf habit).
 */
#ifndef TC_DEVICES_H
#define TC_DEVICES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/sbuf.h"

/* How a worker names its device. */
enum device_id_mode {
	DEVID_NONE,       /* cpu: nothing to pick */
	DEVID_LOCAL_RANK, /* visibility list, LOCAL_RANK indexes it */
	DEVID_PHYSICAL,   /* DEVICE_ID = the physical id (Ascend) */
};

struct device_kind {
	const char *name;        /* spec devices.type */
	const char *visible_var; /* NULL for cpu */
	enum device_id_mode id_mode;
	const char *vendor;      /* for humans */
};

/* NULL when name is not a known type. */
const struct device_kind *device_kind_find(const char *name);
/* "gpu, npu, ..." for error messages; static string. */
const char *device_kind_names(void);

struct device {
	char *type;       /* "gpu", "npu", "cpu" */
	int id;
	char *name;       /* model name, or NULL */
	uint64_t mem_total, mem_used; /* bytes; 0 when unknown */
	int util_percent; /* -1 when unknown */
	double power_w;   /* -1 when unknown */
	double temp_c;    /* -1 when unknown */
	const char *source; /* "nvml", "npu-smi", "sysconf", "fake" */
	char *health;       /* npu-smi's Health cell ("OK", "Warning", ...), or NULL */
	char *uuid;         /* NVML's "GPU-..." (what DCGM labels UUID), "fake-TYPE-ID", or NULL */
};

struct device_list {
	struct device *v;
	size_t nr, alloc;
};
#define DEVICE_LIST_INIT { NULL, 0, 0 }

/*
 * Parse the device table `npu-smi info` prints (Ascend driver 23.x-25.x):
 * after the header, each device is two rows of three '|' cells,
 *   | NPU  Name    | Health | Power(W)  Temp(C)  Hugepages-Usage(page) |
 *   | Chip [Phy-ID or Device] | Bus-Id | AICore(%)  Memory-Usage(MB)  [HBM-Usage(MB)] |
 * ("used / total" pairs, a missing figure written NA or -).  The device id
 * is the chip row's second number when it has one (cards with several
 * chips list each chip as a device), else the NPU number.  Memory is the
 * HBM pair when its total is not 0, else the memory pair.  The process
 * table that follows is ignored; a row that does not parse is skipped.
 * Appends to out; returns the number of devices added.
 */
size_t devices_parse_npu_smi(const char *text, struct device_list *out);

/* Everything this machine has; never fails (absent tools mean none). */
void devices_discover(struct device_list *out);
void device_list_release(struct device_list *l);
/*
 * How many devices of a type this machine has: >= 0 when it can tell,
 * -1 when the type cannot be discovered here (e.g. sdaa without tools).
 */
int devices_count(const struct device_list *l, const char *type);
/*
 * Why this machine shows no devices of type, for a message: "NVML
 * (libnvidia-ml.so.1) is not present", "NVML reports 0 GPUs",
 * "TRAINCTL_FAKE_DEVICES is 'npu:8'", ...  Appends to out; probes again.
 */
void devices_why_none(const char *type, struct sbuf *out);

/*
 * Device ids as text, "0,1,3": a job's devices column, and what crosses
 * from the server to `trainctl supervise --devices`.  The one codec.
 */
/* The text of n ids (heap; "" for none). */
char *device_ids_text(const int *ids, int n);
/*
 * The ids of text: decimal numbers 0..65535, each followed by one comma
 * or the end (a last comma is let pass).  0 with *ids (heap, NULL for no
 * ids: NULL or "" text) and *n; or TC_EUSAGE naming text, *ids NULL and
 * *n 0.
 */
int device_ids_parse(const char *text, int **ids, int *n, struct tc_err *err);

#endif
