/* test_devices.c -- src/devices/: the kind table, the `npu-smi info` parser, the device ids' text */
#include "test.h"

#include "core/sbuf.h"
#include "devices/devices.h"

#include <sys/stat.h>
#include <unistd.h>

/*
 * Tables in the layout `npu-smi info` prints (Ascend driver 23.x-25.x): the
 * figures are made up, the columns and their separators are as printed.
 */
static const char single_chip[] =
	"+------------------------------------------------------------------------------------------------+\n"
	"| npu-smi 24.1.rc1                 Version: 24.1.rc1                                             |\n"
	"+---------------------------+---------------+----------------------------------------------------+\n"
	"| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|\n"
	"| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |\n"
	"+===========================+===============+====================================================+\n"
	"| 0     910B3               | OK            | 97.4        41                0    / 0             |\n"
	"| 0                         | 0000:C1:00.0  | 35          0    / 0          3300 / 65536         |\n"
	"+===========================+===============+====================================================+\n"
	"| 1     910B3               | Warning       | NA          39                0    / 0             |\n"
	"| 0                         | 0000:C2:00.0  | 0           0    / 0          41200/ 65536         |\n"
	"+===========================+===============+====================================================+\n"
	"+---------------------------+---------------+----------------------------------------------------+\n"
	"| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |\n"
	"+===========================+===============+====================================================+\n"
	"| 0       0                 | 4242          | python3                  | 3000                    |\n"
	"+===========================+===============+====================================================+\n";

/* two chips per card, each with its physical id; DDR and HBM pairs */
static const char two_chips[] =
	"| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|\n"
	"| Chip  Phy-ID              | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |\n"
	"+===========================+===============+====================================================+\n"
	"| 0     Ascend910           | OK            | 170.5       36                0    / 0             |\n"
	"| 0     0                   | 0000:9D:00.0  | 12          0    / 0          3400 / 65536         |\n"
	"+------------------------------------------------------------------------------------------------+\n"
	"| 0     Ascend910           | OK            | -           37                0    / 0             |\n"
	"| 1     1                   | 0000:9F:00.0  | 0           0    / 0          3100 / 65536         |\n"
	"+===========================+===============+====================================================+\n";

/* an older card: the HBM pair counts even when unused; an inference card with DDR only */
static const char older[] =
	"| 3     910A                | OK            | 66.0        44                0    / 0             |\n"
	"| 0                         | 0000:3D:00.0  | 0           2500 / 15500      0    / 32768         |\n"
	"| 5     310P3               | OK            | NA          45                0     / 0            |\n"
	"| 0     2                   | 0000:3B:00.0  | 7           1600 / 21500                           |\n";

TEST(npu_smi_single_chip_cards)
{
	struct device_list l = DEVICE_LIST_INIT;
	CHECK_INT(devices_parse_npu_smi(single_chip, &l), 2);
	CHECK_INT(l.nr, 2);
	CHECK_STR(l.v[0].type, "npu");
	CHECK_INT(l.v[0].id, 0);
	CHECK_STR(l.v[0].name, "910B3");
	CHECK_STR(l.v[0].source, "npu-smi");
	CHECK(l.v[0].power_w > 97.3 && l.v[0].power_w < 97.5);
	CHECK(l.v[0].temp_c == 41);
	CHECK_INT(l.v[0].util_percent, 35);
	CHECK(l.v[0].mem_used == 3300ull << 20 && l.v[0].mem_total == 65536ull << 20);
	CHECK_INT(l.v[1].id, 1);
	CHECK(l.v[1].power_w == -1); /* NA */
	CHECK_INT(l.v[1].util_percent, 0);
	CHECK(l.v[1].mem_used == 41200ull << 20); /* "41200/ 65536" */
	device_list_release(&l);
}

TEST(npu_smi_chips_with_physical_ids)
{
	struct device_list l = DEVICE_LIST_INIT;
	CHECK_INT(devices_parse_npu_smi(two_chips, &l), 2);
	CHECK_INT(l.v[0].id, 0);
	CHECK_INT(l.v[1].id, 1);
	CHECK(l.v[1].power_w == -1); /* "-" */
	CHECK(l.v[1].temp_c == 37);
	CHECK(l.v[1].mem_used == 3100ull << 20);
	device_list_release(&l);
}

TEST(npu_smi_hbm_else_memory)
{
	struct device_list l = DEVICE_LIST_INIT;
	CHECK_INT(devices_parse_npu_smi(older, &l), 2);
	CHECK_INT(l.v[0].id, 3);
	CHECK(l.v[0].mem_used == 0 && l.v[0].mem_total == 32768ull << 20);
	CHECK_INT(l.v[1].id, 2);
	CHECK_STR(l.v[1].name, "310P3");
	CHECK(l.v[1].mem_used == 1600ull << 20 && l.v[1].mem_total == 21500ull << 20);
	CHECK_INT(l.v[1].util_percent, 7);
	device_list_release(&l);
}

TEST(npu_smi_garbage_adds_nothing)
{
	struct device_list l = DEVICE_LIST_INIT;
	CHECK_INT(devices_parse_npu_smi("", &l), 0);
	CHECK_INT(devices_parse_npu_smi("dcmi module initialize failed. ret is -8005\n", &l), 0);
	CHECK_INT(devices_parse_npu_smi("| a | b | c |\n| 0 | x | y |\n|||\n| 1 910B | OK | 1 2", &l), 0);
	/* a chip row without its card row above is not a device */
	CHECK_INT(devices_parse_npu_smi("| 0 | 0000:C1:00.0 | 0 0 / 0 1 / 2 |\n", &l), 0);
	CHECK_INT(l.nr, 0);
	device_list_release(&l);
}

/* tests/fuzz/corpus/npu_smi/crash-huge-figures: the conversions to int and uint64_t overflowed */
TEST(npu_smi_absurd_figures_are_unknown)
{
	static const char huge[] =
		"| 0     Ascend910           | OK            | 1e300       36                0    / 0             |\n"
		"| 0     0                   | 0000:9D:00.0  | 1e30        0    / 0          3400 / 653333333333333333333333536 |\n"
		"| 1     Ascend910           | OK            | 1.5         37                0    / 0             |\n"
		"| 0     1                   | 0000:9F:00.0  | 101         99999999999999999999 / 1e19  1 / inf |\n";
	struct device_list l = DEVICE_LIST_INIT;
	CHECK_INT(devices_parse_npu_smi(huge, &l), 2);
	CHECK_INT(l.v[0].util_percent, -1);
	CHECK(l.v[0].mem_used == 0 && l.v[0].mem_total == 0); /* HBM total unreadable, DDR 0 / 0 */
	CHECK(l.v[0].power_w == -1);
	CHECK_INT(l.v[1].util_percent, -1);
	CHECK(l.v[1].mem_used == 0 && l.v[1].mem_total == 0);
	device_list_release(&l);
}

/* discovery runs the tool: a fake npu-smi on PATH prints the table */
TEST(npu_smi_discovery_through_the_tool)
{
	struct sbuf dir = SBUF_INIT, tool = SBUF_INIT, table = SBUF_INIT, path = SBUF_INIT;
	sbuf_addf(&dir, "%s/bin", test_tmpdir());
	CHECK(mkdir(dir.buf, 0755) == 0);
	sbuf_addf(&table, "%s/table.txt", test_tmpdir());
	FILE *f = fopen(table.buf, "w");
	CHECK(f && fputs(single_chip, f) >= 0 && fclose(f) == 0);
	sbuf_addf(&tool, "%s/npu-smi", dir.buf);
	f = fopen(tool.buf, "w");
	CHECK(f && fprintf(f, "#!/bin/sh\n[ \"$1 $2\" = \"info \" ] && exec cat '%s'\nexit 1\n",
			   table.buf) > 0 && fclose(f) == 0);
	CHECK(chmod(tool.buf, 0755) == 0);
	sbuf_addf(&path, "%s:/usr/bin:/bin", dir.buf);
	CHECK(setenv("PATH", path.buf, 1) == 0);
	CHECK(unsetenv("TRAINCTL_FAKE_DEVICES") == 0);
	struct device_list l = DEVICE_LIST_INIT;
	devices_discover(&l);
	int npus = 0;
	for (size_t i = 0; i < l.nr; i++)
		if (!strcmp(l.v[i].type, "npu")) {
			CHECK_STR(l.v[i].source, "npu-smi");
			CHECK(l.v[i].temp_c > 0);
			npus++;
		}
	CHECK_INT(npus, 2);
	CHECK_INT(devices_count(&l, "npu"), 2);
	device_list_release(&l);
	sbuf_release(&dir);
	sbuf_release(&tool);
	sbuf_release(&table);
	sbuf_release(&path);
}

/* a table it cannot parse: the ids of `npu-smi info -l` (stderr dropped) */
TEST(npu_smi_discovery_falls_back_to_the_list)
{
	struct sbuf dir = SBUF_INIT, tool = SBUF_INIT, path = SBUF_INIT;
	sbuf_addf(&dir, "%s/bin", test_tmpdir());
	CHECK(mkdir(dir.buf, 0755) == 0);
	sbuf_addf(&tool, "%s/npu-smi", dir.buf);
	FILE *f = fopen(tool.buf, "w");
	CHECK(f && fputs("#!/bin/sh\necho noise >&2\n"
			 "[ \"$2\" = -l ] || { echo 'dcmi module initialize failed'; exit 0; }\n"
			 "printf '\\tTotal Count : 2\\n\\n\\tNPU ID : 3\\n\\tNPU ID : 5\\n'\nexit 2\n",
			 f) >= 0 && fclose(f) == 0);
	CHECK(chmod(tool.buf, 0755) == 0);
	sbuf_addf(&path, "%s:/usr/bin:/bin", dir.buf);
	CHECK(setenv("PATH", path.buf, 1) == 0);
	CHECK(unsetenv("TRAINCTL_FAKE_DEVICES") == 0);
	struct device_list l = DEVICE_LIST_INIT;
	devices_discover(&l);
	int ids = 0;
	for (size_t i = 0; i < l.nr; i++)
		if (!strcmp(l.v[i].type, "npu"))
			ids += l.v[i].id;
	CHECK_INT(devices_count(&l, "npu"), 2);
	CHECK_INT(ids, 3 + 5);
	device_list_release(&l);
	sbuf_release(&dir);
	sbuf_release(&tool);
	sbuf_release(&path);
}

TEST(kind_table)
{
	CHECK_STR(device_kind_find("npu")->visible_var, "ASCEND_RT_VISIBLE_DEVICES");
	CHECK(device_kind_find("cpu")->visible_var == NULL);
	CHECK(device_kind_find("tpu") == NULL);
}

/* ---- health (devices/health.h): the pure parts; NVML is tested through tests/fake ---- */
#include "devices/health.h"

TEST(npu_smi_health_cell)
{
	struct device_list l = DEVICE_LIST_INIT;
	CHECK_INT(devices_parse_npu_smi(single_chip, &l), 2);
	CHECK_STR(l.v[0].health, "OK");
	CHECK_STR(l.v[1].health, "Warning");
	CHECK(!health_npu_reason(l.v[0].health));
	char *why = health_npu_reason(l.v[1].health);
	CHECK_STR(why, "npu-smi health Warning");
	free(why);
	why = health_npu_reason(NULL);
	CHECK_STR(why, "npu-smi health unknown");
	free(why);
	device_list_release(&l);
}

TEST(xid_device_or_application)
{
	CHECK(health_xid_is_device(79)); /* fallen off the bus */
	CHECK(health_xid_is_device(48)); /* double-bit ECC */
	CHECK(health_xid_is_device(94) && health_xid_is_device(95));
	CHECK(!health_xid_is_device(13)); /* the application's kernel */
	CHECK(!health_xid_is_device(31) && !health_xid_is_device(43));
}

TEST(health_table)
{
	CHECK_CONTAINS(health_checks_of("gpu"), "row remapping");
	CHECK_CONTAINS(health_checks_of("npu"), "npu-smi");
	CHECK_CONTAINS(health_checks_of("mlu"), "nothing");
	setenv("TRAINCTL_FAKE_DEVICES", "gpu:2", 1);
	CHECK(!health_checked("gpu")); /* declared devices are never checked */
	CHECK(!health_open("gpu"));
	unsetenv("TRAINCTL_FAKE_DEVICES");
	CHECK(health_checked("npu") && !health_checked("cpu"));
	int ids[1] = { 0 };
	char *why[1];
	CHECK_INT(health_check(NULL, ids, 1, why), 0);
	CHECK(!why[0]);
}

TEST(device_ids_text_round_trip)
{
	const int ids[] = { 0, 3, 7, 65535 };
	char *text = device_ids_text(ids, 4);
	CHECK_STR(text, "0,3,7,65535");
	int *back = NULL, n = -1;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(device_ids_parse(text, &back, &n, &err), 0);
	CHECK_INT(n, 4);
	for (int i = 0; i < 4 && n == 4; i++)
		CHECK_INT(back[i], ids[i]);
	free(back);
	free(text);
	/* none: "" both ways, and NULL reads as none */
	text = device_ids_text(ids, 0);
	CHECK_STR(text, "");
	CHECK_INT(device_ids_parse(text, &back, &n, &err), 0);
	CHECK(back == NULL && n == 0);
	CHECK_INT(device_ids_parse(NULL, &back, &n, &err), 0);
	CHECK(back == NULL && n == 0);
	free(text);
	/* a last comma is let pass, as the server and supervise always did */
	CHECK_INT(device_ids_parse("1,2,", &back, &n, &err), 0);
	CHECK(n == 2 && back[0] == 1 && back[1] == 2);
	free(back);
	tc_err_release(&err);
}

TEST(device_ids_parse_refusals)
{
	const char *bad[] = { "a", "1,,2", ",1", "-1", "65536", "1;2", "1 2", "0x1", "1,b",
			      "99999999999999999999" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int sentinel = 0, *ids = &sentinel, n = -1;
		struct tc_err err = TC_ERR_INIT;
		CHECK_INT(device_ids_parse(bad[i], &ids, &n, &err), TC_EUSAGE);
		CHECK(ids == NULL && n == 0);
		CHECK_CONTAINS(err.msg, bad[i]);
		tc_err_release(&err);
	}
	/* without a place for the message, the answer is the same */
	int *ids = NULL, n = 0;
	CHECK_INT(device_ids_parse("x", &ids, &n, NULL), TC_EUSAGE);
}
