/* lazylib.c -- libcurl, libmicrohttpd, libcrypto loaded on first use, NVML if present; see lazylib.h. */
#define TC_LAZYLIB_IMPL
#include "core/lazylib.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* One row per library: its soname, the Debian package, the symbols we use. */
struct lib {
	const char *soname, *package;
	const char *const *names;
	void **slots;
	pthread_once_t once;
};

static _Noreturn void die_missing(const struct lib *l, const char *what)
{
	fprintf(stderr, "trainctl: cannot load %s (%s): %s; install the Debian package %s\n",
		l->soname, what ? what : "not found", dlerror(), l->package);
	exit(3);
}

/* Fill l's slots (a symbol not there: NULL); false when the library is not there. */
static bool try_load(struct lib *l)
{
	void *h = dlopen(l->soname, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return false;
	for (size_t i = 0; l->names[i]; i++)
		l->slots[i] = dlsym(h, l->names[i]);
	return true;
}

static void load(struct lib *l)
{
	if (!try_load(l))
		die_missing(l, NULL);
	for (size_t i = 0; l->names[i]; i++)
		if (!l->slots[i])
			die_missing(l, l->names[i]);
}

/* ---- libcurl ---- */

static const char *const curl_names[] = {
	"curl_global_init", "curl_easy_init", "curl_easy_setopt", "curl_easy_getinfo",
	"curl_easy_perform", "curl_easy_cleanup", "curl_easy_reset", "curl_easy_strerror",
	"curl_slist_append", "curl_slist_free_all", NULL,
};
static struct {
	CURLcode (*global_init)(long);
	CURL *(*easy_init)(void);
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	CURLcode (*easy_perform)(CURL *);
	void (*easy_cleanup)(CURL *);
	void (*easy_reset)(CURL *);
	const char *(*easy_strerror)(CURLcode);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
} cu;
static struct lib curl_lib = { "libcurl.so.4", "libcurl4", curl_names, (void **)&cu,
			       PTHREAD_ONCE_INIT };
static void curl_load(void) { load(&curl_lib); }
#define CURL_READY() pthread_once(&curl_lib.once, curl_load)

CURLcode tc_curl_global_init(long flags) { CURL_READY(); return cu.global_init(flags); }
CURL *tc_curl_easy_init(void) { CURL_READY(); return cu.easy_init(); }
CURLcode tc_curl_easy_perform(CURL *h) { CURL_READY(); return cu.easy_perform(h); }
void tc_curl_easy_cleanup(CURL *h) { CURL_READY(); cu.easy_cleanup(h); }
void tc_curl_easy_reset(CURL *h) { CURL_READY(); cu.easy_reset(h); }
const char *tc_curl_easy_strerror(CURLcode c) { CURL_READY(); return cu.easy_strerror(c); }
struct curl_slist *tc_curl_slist_append(struct curl_slist *l, const char *s)
{
	CURL_READY();
	return cu.slist_append(l, s);
}
void tc_curl_slist_free_all(struct curl_slist *l) { CURL_READY(); cu.slist_free_all(l); }

/* The option number says what its one argument is (curl.h's CURLOPTTYPE_*). */
CURLcode tc_curl_easy_setopt(CURL *h, CURLoption opt, ...)
{
	CURL_READY();
	va_list ap;
	CURLcode rc;
	va_start(ap, opt);
	if (opt < CURLOPTTYPE_OBJECTPOINT)
		rc = cu.easy_setopt(h, opt, va_arg(ap, long));
	else if (opt < CURLOPTTYPE_FUNCTIONPOINT)
		rc = cu.easy_setopt(h, opt, va_arg(ap, void *));
	else if (opt < CURLOPTTYPE_OFF_T)
		rc = cu.easy_setopt(h, opt, va_arg(ap, void (*)(void)));
	else if (opt < CURLOPTTYPE_BLOB)
		rc = cu.easy_setopt(h, opt, va_arg(ap, curl_off_t));
	else
		rc = cu.easy_setopt(h, opt, va_arg(ap, void *));
	va_end(ap);
	return rc;
}

/* Every CURLINFO takes one pointer. */
CURLcode tc_curl_easy_getinfo(CURL *h, CURLINFO info, ...)
{
	CURL_READY();
	va_list ap;
	va_start(ap, info);
	void *p = va_arg(ap, void *);
	va_end(ap);
	return cu.easy_getinfo(h, info, p);
}

/* ---- libmicrohttpd ---- */

static const char *const mhd_names[] = {
	"MHD_start_daemon_va", "MHD_stop_daemon", "MHD_add_response_header",
	"MHD_create_response_from_buffer", "MHD_create_response_from_callback",
	"MHD_destroy_response", "MHD_lookup_connection_value", "MHD_queue_response",
	"MHD_get_connection_info", "MHD_get_connection_values", "MHD_create_response_for_upgrade",
	"MHD_upgrade_action", NULL,
};
static struct {
	struct MHD_Daemon *(*start_daemon_va)(unsigned int, uint16_t, MHD_AcceptPolicyCallback,
					      void *, MHD_AccessHandlerCallback, void *, va_list);
	void (*stop_daemon)(struct MHD_Daemon *);
	enum MHD_Result (*add_response_header)(struct MHD_Response *, const char *, const char *);
	struct MHD_Response *(*create_response_from_buffer)(size_t, void *,
							     enum MHD_ResponseMemoryMode);
	struct MHD_Response *(*create_response_from_callback)(uint64_t, size_t,
							       MHD_ContentReaderCallback, void *,
							       MHD_ContentReaderFreeCallback);
	void (*destroy_response)(struct MHD_Response *);
	const char *(*lookup_connection_value)(struct MHD_Connection *, enum MHD_ValueKind,
					       const char *);
	enum MHD_Result (*queue_response)(struct MHD_Connection *, unsigned int,
					  struct MHD_Response *);
	const union MHD_ConnectionInfo *(*get_connection_info)(struct MHD_Connection *,
							       enum MHD_ConnectionInfoType, ...);
	int (*get_connection_values)(struct MHD_Connection *, enum MHD_ValueKind,
				     MHD_KeyValueIterator, void *);
	struct MHD_Response *(*create_response_for_upgrade)(MHD_UpgradeHandler, void *);
	enum MHD_Result (*upgrade_action)(struct MHD_UpgradeResponseHandle *, enum MHD_UpgradeAction,
					  ...);
} mh;
static struct lib mhd_lib = { "libmicrohttpd.so.12", "libmicrohttpd12", mhd_names, (void **)&mh,
			      PTHREAD_ONCE_INIT };
static void mhd_load(void) { load(&mhd_lib); }
#define MHD_READY() pthread_once(&mhd_lib.once, mhd_load)

struct MHD_Daemon *tc_MHD_start_daemon(unsigned int flags, uint16_t port,
				       MHD_AcceptPolicyCallback apc, void *apc_cls,
				       MHD_AccessHandlerCallback dh, void *dh_cls, ...)
{
	MHD_READY();
	va_list ap;
	va_start(ap, dh_cls);
	struct MHD_Daemon *d = mh.start_daemon_va(flags, port, apc, apc_cls, dh, dh_cls, ap);
	va_end(ap);
	return d;
}
void tc_MHD_stop_daemon(struct MHD_Daemon *d) { MHD_READY(); mh.stop_daemon(d); }
enum MHD_Result tc_MHD_add_response_header(struct MHD_Response *r, const char *h, const char *v)
{
	MHD_READY();
	return mh.add_response_header(r, h, v);
}
struct MHD_Response *tc_MHD_create_response_from_buffer(size_t size, void *buf,
							enum MHD_ResponseMemoryMode mode)
{
	MHD_READY();
	return mh.create_response_from_buffer(size, buf, mode);
}
struct MHD_Response *tc_MHD_create_response_from_callback(uint64_t size, size_t block,
							  MHD_ContentReaderCallback crc,
							  void *crc_cls,
							  MHD_ContentReaderFreeCallback crfc)
{
	MHD_READY();
	return mh.create_response_from_callback(size, block, crc, crc_cls, crfc);
}
void tc_MHD_destroy_response(struct MHD_Response *r) { MHD_READY(); mh.destroy_response(r); }
const char *tc_MHD_lookup_connection_value(struct MHD_Connection *c, enum MHD_ValueKind k,
					   const char *key)
{
	MHD_READY();
	return mh.lookup_connection_value(c, k, key);
}
enum MHD_Result tc_MHD_queue_response(struct MHD_Connection *c, unsigned int status,
				      struct MHD_Response *r)
{
	MHD_READY();
	return mh.queue_response(c, status, r);
}
const union MHD_ConnectionInfo *tc_MHD_get_connection_info(struct MHD_Connection *c,
							   enum MHD_ConnectionInfoType t)
{
	MHD_READY();
	return mh.get_connection_info(c, t);
}
int tc_MHD_get_connection_values(struct MHD_Connection *c, enum MHD_ValueKind k,
				 MHD_KeyValueIterator it, void *it_cls)
{
	MHD_READY();
	return mh.get_connection_values(c, k, it, it_cls);
}
struct MHD_Response *tc_MHD_create_response_for_upgrade(MHD_UpgradeHandler h, void *cls)
{
	MHD_READY();
	return mh.create_response_for_upgrade(h, cls);
}
/* The actions without arguments (close, and the cork ones take one: not used). */
enum MHD_Result tc_MHD_upgrade_action(struct MHD_UpgradeResponseHandle *urh,
				      enum MHD_UpgradeAction a)
{
	MHD_READY();
	return mh.upgrade_action(urh, a);
}

/* ---- libcrypto ---- */

static const char *const evp_names[] = {
	"EVP_Digest", "EVP_sha256", "EVP_md5", "EVP_MD_CTX_new", "EVP_MD_CTX_free",
	"EVP_DigestInit_ex", "EVP_DigestUpdate", "EVP_DigestFinal_ex", NULL,
};
static struct {
	int (*digest)(const void *, size_t, unsigned char *, unsigned int *, const EVP_MD *,
		      ENGINE *);
	const EVP_MD *(*sha256)(void);
	const EVP_MD *(*md5)(void);
	EVP_MD_CTX *(*ctx_new)(void);
	void (*ctx_free)(EVP_MD_CTX *);
	int (*init_ex)(EVP_MD_CTX *, const EVP_MD *, ENGINE *);
	int (*update)(EVP_MD_CTX *, const void *, size_t);
	int (*final_ex)(EVP_MD_CTX *, unsigned char *, unsigned int *);
} ev;
static struct lib evp_lib = { "libcrypto.so.3", "libssl3", evp_names, (void **)&ev,
			      PTHREAD_ONCE_INIT };
static void evp_load(void) { load(&evp_lib); }
#define EVP_READY() pthread_once(&evp_lib.once, evp_load)

int tc_EVP_Digest(const void *data, size_t n, unsigned char *md, unsigned int *size,
		  const EVP_MD *type, ENGINE *impl)
{
	EVP_READY();
	return ev.digest(data, n, md, size, type, impl);
}
const EVP_MD *tc_EVP_sha256(void) { EVP_READY(); return ev.sha256(); }
const EVP_MD *tc_EVP_md5(void) { EVP_READY(); return ev.md5(); }
EVP_MD_CTX *tc_EVP_MD_CTX_new(void) { EVP_READY(); return ev.ctx_new(); }
void tc_EVP_MD_CTX_free(EVP_MD_CTX *c) { EVP_READY(); ev.ctx_free(c); }
int tc_EVP_DigestInit_ex(EVP_MD_CTX *c, const EVP_MD *type, ENGINE *impl)
{
	EVP_READY();
	return ev.init_ex(c, type, impl);
}
int tc_EVP_DigestUpdate(EVP_MD_CTX *c, const void *d, size_t n)
{
	EVP_READY();
	return ev.update(c, d, n);
}
int tc_EVP_DigestFinal_ex(EVP_MD_CTX *c, unsigned char *md, unsigned int *s)
{
	EVP_READY();
	return ev.final_ex(c, md, s);
}

/* ---- NVML, optional ---- */

/* in struct tc_nvml's order */
static const char *const nvml_names[] = {
	"nvmlInit_v2", "nvmlShutdown", "nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2",
	"nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetMemoryInfo",
	"nvmlDeviceGetUtilizationRates", "nvmlDeviceGetPowerUsage", "nvmlDeviceGetTemperature",
	"nvmlDeviceGetRetiredPagesPendingStatus", "nvmlDeviceGetRemappedRows",
	"nvmlDeviceGetTotalEccErrors", "nvmlEventSetCreate", "nvmlEventSetFree",
	"nvmlDeviceRegisterEvents", "nvmlEventSetWait_v2", NULL,
};
static struct tc_nvml nv;
_Static_assert(sizeof(nv) == (sizeof(nvml_names) / sizeof(nvml_names[0]) - 1) * sizeof(void *),
	       "one name per member of struct tc_nvml");
static struct lib nvml_lib = { "libnvidia-ml.so.1", "the NVIDIA driver", nvml_names, (void **)&nv,
			       PTHREAD_ONCE_INIT };
static bool nvml_there;
static void nvml_load(void)
{
	nvml_there = try_load(&nvml_lib) && nv.init && nv.shutdown && nv.count && nv.handle;
}

const struct tc_nvml *tc_nvml(void)
{
	pthread_once(&nvml_lib.once, nvml_load);
	return nvml_there ? &nv : NULL;
}
