/* ranktable.c -- Ascend hccl.json v1.0 (docs/formats.md, "Ascend rank table"). */
#include "launch/launch.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <jansson.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int ranktable_device_ips(const char *hccn_conf, const int *ids, int n, char **ips,
			 struct tc_err *err)
{
	struct sbuf text = SBUF_INIT;
	int rc = read_file(hccn_conf, &text, err);
	for (int i = 0; i < n; i++)
		ips[i] = NULL;
	if (!rc)
		rc = ranktable_parse_ips(text.buf, text.len, hccn_conf, ids, n, ips, err);
	sbuf_release(&text);
	return rc;
}

int ranktable_parse_ips(const char *conf, size_t len, const char *name, const int *ids, int n,
			char **ips, struct tc_err *err)
{
	struct sbuf text = SBUF_INIT;
	int rc = 0;
	sbuf_add(&text, conf, len); /* a copy to cut into lines, NUL-terminated */
	for (int i = 0; i < n; i++)
		ips[i] = NULL;
	for (char *line = text.buf; line && *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		char *eq = strchr(line, '=');
		long id;
		if (!strncmp(line, "address_", 8) && eq) {
			*eq = '\0';
			if (parse_long(line + 8, 0, 65535, &id)) {
				struct sbuf ip = SBUF_INIT;
				sbuf_adds(&ip, eq + 1);
				sbuf_rtrim(&ip);
				for (int i = 0; i < n; i++)
					if (ids[i] == id) {
						free(ips[i]);
						ips[i] = xstrdup(ip.buf);
					}
				sbuf_release(&ip);
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	for (int i = 0; i < n; i++)
		if (!ips[i]) {
			rc = tc_error(err, TC_ESPEC, "%s: no address_%d line for npu %d", name, ids[i],
				      ids[i]);
			break;
		}
	if (rc)
		for (int i = 0; i < n; i++) {
			free(ips[i]);
			ips[i] = NULL;
		}
	sbuf_release(&text);
	return rc;
}

char *ranktable_json(const char *server_id, const int *ids, char *const *ips, int n,
		     int first_rank)
{
	json_t *root = json_object();
	json_t *devs = json_array();
	for (int i = 0; i < n; i++) {
		json_t *d = json_object();
		struct sbuf num = SBUF_INIT;
		sbuf_addf(&num, "%d", ids[i]);
		json_object_set_new(d, "device_id", json_string(num.buf));
		json_object_set_new(d, "device_ip", json_string(ips[i]));
		sbuf_reset(&num);
		sbuf_addf(&num, "%d", first_rank + i);
		json_object_set_new(d, "rank_id", json_string(num.buf));
		sbuf_release(&num);
		json_array_append_new(devs, d);
	}
	json_t *server = json_object();
	json_object_set_new(server, "server_id", json_string(server_id));
	json_object_set_new(server, "device", devs);
	json_object_set_new(server, "host_nic_ip", json_string("reserve"));
	json_t *list = json_array();
	json_array_append_new(list, server);
	json_object_set_new(root, "version", json_string("1.0"));
	json_object_set_new(root, "server_count", json_string("1"));
	json_object_set_new(root, "server_list", list);
	json_object_set_new(root, "status", json_string("completed"));
	char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(root);
	if (!text)
		xdie_oom(0);
	struct sbuf sb = SBUF_INIT;
	sbuf_adds(&sb, text);
	sbuf_addch(&sb, '\n');
	free(text);
	return sbuf_detach(&sb);
}

char *route_default_iface(const char *route, size_t len)
{
	char *best = NULL;
	unsigned long best_metric = 0;
	struct sbuf text = SBUF_INIT;
	sbuf_add(&text, route, len); /* NUL-terminated, to cut into lines */
	char *save = NULL;
	for (char *line = strtok_r(text.buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char iface[64];
		unsigned long dest, gw, flags, refcnt, use, metric, mask;
		/* Iface Destination Gateway Flags RefCnt Use Metric Mask ... (hex) */
		if (sscanf(line, "%63s %lx %lx %lx %lu %lu %lu %lx", iface, &dest, &gw, &flags,
			   &refcnt, &use, &metric, &mask) != 8)
			continue; /* the header line, or a line cut short */
		if (dest || mask || !(flags & 0x1 /* RTF_UP */))
			continue;
		if (!best || metric < best_metric) {
			free(best);
			best = xstrdup(iface);
			best_metric = metric;
		}
	}
	sbuf_release(&text);
	return best;
}

/* The first up, non-loopback IPv4 address, of interface `only` when given. */
static char *iface_ipv4(const struct ifaddrs *ifa, const char *only)
{
	for (const struct ifaddrs *i = ifa; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
		    (i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP) ||
		    (only && strcmp(i->ifa_name, only)))
			continue;
		char buf[INET_ADDRSTRLEN];
		const struct sockaddr_in *sin = (const struct sockaddr_in *)i->ifa_addr;
		if (inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf)))
			return xstrdup(buf);
	}
	return NULL;
}

/*
 * The address other hosts reach this one by: the default route's interface
 * (a bridge such as cni-podman0 may come first in the interface list), else
 * the first non-loopback one.  hccl_tools.py resolves the host name instead,
 * which gives 127.0.1.1 under Debian's /etc/hosts (docs/environment.md).
 */
char *host_ipv4(void)
{
	struct ifaddrs *ifa = NULL;
	char *found = NULL;
	struct sbuf route = SBUF_INIT;
	char *iface = NULL;
	if (read_file("/proc/net/route", &route, NULL) == 0)
		iface = route_default_iface(route.buf, route.len);
	sbuf_release(&route);
	if (getifaddrs(&ifa) == 0) {
		if (iface)
			found = iface_ipv4(ifa, iface);
		if (!found)
			found = iface_ipv4(ifa, NULL);
		freeifaddrs(ifa);
	}
	free(iface);
	return found ? found : xstrdup("127.0.0.1");
}

/* ---- multi-node tables ---- */

char *ranktable_merge(char *const *part_texts, int nodes, struct tc_err *err)
{
	json_t *list = json_array();
	char *out = NULL;
	int rank = 0;
	for (int n = 0; n < nodes; n++) {
		json_error_t je;
		json_t *part = json_loads(part_texts[n], 0, &je);
		json_t *servers = json_object_get(part, "server_list");
		json_t *server = json_array_get(servers, 0);
		json_t *devs = json_object_get(server, "device");
		if (!json_is_object(server) || json_array_size(servers) != 1 || !json_is_array(devs) ||
		    !json_is_string(json_object_get(server, "server_id"))) {
			tc_error(err, TC_EBACKEND, "rank table part of node %d is not a one-server hccl.json%s%s",
				 n, part ? "" : ": ", part ? "" : je.text);
			json_decref(part);
			goto out;
		}
		size_t i;
		json_t *d;
		json_array_foreach(devs, i, d) {
			struct sbuf num = SBUF_INIT;
			sbuf_addf(&num, "%d", rank++);
			json_object_set_new(d, "rank_id", json_string(num.buf));
			sbuf_release(&num);
		}
		json_array_append(list, server);
		json_decref(part);
	}
	json_t *root = json_object();
	struct sbuf cnt = SBUF_INIT;
	sbuf_addf(&cnt, "%d", nodes);
	json_object_set_new(root, "version", json_string("1.0"));
	json_object_set_new(root, "server_count", json_string(cnt.buf));
	json_object_set_new(root, "server_list", list);
	json_object_set_new(root, "status", json_string("completed"));
	list = NULL;
	sbuf_release(&cnt);
	char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(root);
	if (!text)
		xdie_oom(0);
	struct sbuf sb = SBUF_INIT;
	sbuf_adds(&sb, text);
	sbuf_addch(&sb, '\n');
	free(text);
	out = sbuf_detach(&sb);
out:
	json_decref(list);
	return out;
}

static char *part_path(const char *dir, int node)
{
	struct sbuf sb = SBUF_INIT;
	sbuf_addf(&sb, "%s/node-%d.json", dir, node);
	return sbuf_detach(&sb);
}

int ranktable_exchange(const char *dir, int node_rank, int nodes, const char *part_text,
		       double timeout, struct tc_err *err)
{
	struct sbuf table = SBUF_INIT, missing = SBUF_INIT;
	char **parts = xcalloc((size_t)nodes, sizeof(char *));
	char *mine = part_path(dir, node_rank);
	int rc = mkdir_p(dir, err);
	if (!rc)
		rc = write_file_atomic(mine, part_text, strlen(part_text), err);
	sbuf_addf(&table, "%s/hccl.json", dir);
	double deadline = now_wall() + timeout;
	while (!rc) {
		sbuf_reset(&missing);
		if (node_rank == 0) {
			for (int n = 0; n < nodes; n++) {
				if (parts[n])
					continue;
				char *p = part_path(dir, n);
				struct sbuf text = SBUF_INIT;
				if (path_exists(p) && read_file(p, &text, NULL) == 0)
					parts[n] = sbuf_detach(&text);
				else
					sbuf_addf(&missing, "%s%d", missing.len ? ", " : "", n);
				sbuf_release(&text);
				free(p);
			}
			if (!missing.len) {
				char *merged = ranktable_merge(parts, nodes, err);
				rc = merged ? write_file_atomic(table.buf, merged, strlen(merged), err)
					    : err->code;
				free(merged);
				break;
			}
		} else if (path_exists(table.buf)) {
			break;
		}
		if (now_wall() > deadline) {
			if (node_rank == 0)
				rc = tc_error(err, TC_EBACKEND,
					      "rank table: node 0 waited %.0f s for the parts of node%s %s in %s",
					      timeout, strchr(missing.buf, ',') ? "s" : "", missing.buf, dir);
			else
				rc = tc_error(err, TC_EBACKEND,
					      "rank table: node %d waited %.0f s for node 0 to write %s",
					      node_rank, timeout, table.buf);
			break;
		}
		usleep(50 * 1000);
	}
	for (int n = 0; n < nodes; n++)
		free(parts[n]);
	free(parts);
	free(mine);
	sbuf_release(&table);
	sbuf_release(&missing);
	return rc;
}
