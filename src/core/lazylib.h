/*
 * lazylib.h -- libcurl, libmicrohttpd and libcrypto, loaded on first use;
 * and NVML, which may be absent.
 *
 * Linking them directly pulls in about thirty shared libraries (TLS, GSSAPI,
 * LDAP, SSH, ...) whose loading and relocation cost tens of milliseconds at
 * every start of every command, `trainctl run` included, although most runs
 * never touch object storage, a tester or the HTTP server.  So the binary
 * links none of them: modules include this header instead of the libraries'
 * own, and each call goes through a wrapper that dlopen()s the library the
 * first time.
 *
 * A library that cannot be loaded is reported like memory exhaustion (the
 * xalloc habit): a message naming the library and the Debian package, then
 * exit status 3 (an infrastructure failure), since nothing useful can follow.
 *
 * Include this header after nothing else of the three libraries; it maps
 * their function names onto the wrappers with macros.
 *
 * NVML (libnvidia-ml.so.1) is the other kind: a machine without an NVIDIA
 * driver has none, and that is an answer (no GPUs), not a failure.  It is
 * not linked at build time at all (no header, no package), so tc_nvml()
 * hands out its table of functions, or NULL.
 */
#ifndef TC_CORE_LAZYLIB_H
#define TC_CORE_LAZYLIB_H

#include <curl/curl.h>
#include <microhttpd.h>
#include <openssl/evp.h>

CURLcode tc_curl_global_init(long flags);
CURL *tc_curl_easy_init(void);
CURLcode tc_curl_easy_setopt(CURL *h, CURLoption opt, ...);
CURLcode tc_curl_easy_getinfo(CURL *h, CURLINFO info, ...);
CURLcode tc_curl_easy_perform(CURL *h);
void tc_curl_easy_cleanup(CURL *h);
void tc_curl_easy_reset(CURL *h);
const char *tc_curl_easy_strerror(CURLcode c);
struct curl_slist *tc_curl_slist_append(struct curl_slist *l, const char *s);
void tc_curl_slist_free_all(struct curl_slist *l);

struct MHD_Daemon *tc_MHD_start_daemon(unsigned int flags, uint16_t port,
				       MHD_AcceptPolicyCallback apc, void *apc_cls,
				       MHD_AccessHandlerCallback dh, void *dh_cls, ...);
void tc_MHD_stop_daemon(struct MHD_Daemon *d);
enum MHD_Result tc_MHD_add_response_header(struct MHD_Response *r, const char *h, const char *v);
struct MHD_Response *tc_MHD_create_response_from_buffer(size_t size, void *buf,
							enum MHD_ResponseMemoryMode mode);
struct MHD_Response *tc_MHD_create_response_from_callback(uint64_t size, size_t block,
							  MHD_ContentReaderCallback crc,
							  void *crc_cls,
							  MHD_ContentReaderFreeCallback crfc);
void tc_MHD_destroy_response(struct MHD_Response *r);
const char *tc_MHD_lookup_connection_value(struct MHD_Connection *c, enum MHD_ValueKind k,
					   const char *key);
enum MHD_Result tc_MHD_queue_response(struct MHD_Connection *c, unsigned int status,
				      struct MHD_Response *r);
/* only the info types that take no further argument (fd, address, socket context) */
const union MHD_ConnectionInfo *tc_MHD_get_connection_info(struct MHD_Connection *c,
							   enum MHD_ConnectionInfoType t);
int tc_MHD_get_connection_values(struct MHD_Connection *c, enum MHD_ValueKind k,
				 MHD_KeyValueIterator it, void *it_cls);
struct MHD_Response *tc_MHD_create_response_for_upgrade(MHD_UpgradeHandler h, void *cls);
/* only the actions that take no further argument (MHD_UPGRADE_ACTION_CLOSE) */
enum MHD_Result tc_MHD_upgrade_action(struct MHD_UpgradeResponseHandle *urh,
				      enum MHD_UpgradeAction a);

int tc_EVP_Digest(const void *data, size_t n, unsigned char *md, unsigned int *size,
		  const EVP_MD *type, ENGINE *impl);
const EVP_MD *tc_EVP_sha256(void);
const EVP_MD *tc_EVP_md5(void);
EVP_MD_CTX *tc_EVP_MD_CTX_new(void);
void tc_EVP_MD_CTX_free(EVP_MD_CTX *c);
int tc_EVP_DigestInit_ex(EVP_MD_CTX *c, const EVP_MD *type, ENGINE *impl);
int tc_EVP_DigestUpdate(EVP_MD_CTX *c, const void *d, size_t n);
int tc_EVP_DigestFinal_ex(EVP_MD_CTX *c, unsigned char *md, unsigned int *s);

/* ---- NVML: nvml.h's types and functions as trainctl uses them ---- */

struct tc_nvml_memory {
	unsigned long long total, free, used;
};
struct tc_nvml_utilization {
	unsigned int gpu, memory;
};
struct tc_nvml_event {
	void *device;
	unsigned long long type, data;
	unsigned int gpu_instance, compute_instance;
};
/* Each returns nvmlReturn_t, 0 on success; a device is an opaque handle. */
struct tc_nvml {
	int (*init)(void);                      /* nvmlInit_v2 */
	int (*shutdown)(void);                  /* nvmlShutdown */
	int (*count)(unsigned int *);           /* nvmlDeviceGetCount_v2 */
	int (*handle)(unsigned int, void **);   /* nvmlDeviceGetHandleByIndex_v2 */
	/* may be NULL: an older driver lacks them */
	int (*name)(void *, char *, unsigned int);
	int (*uuid)(void *, char *, unsigned int);
	int (*memory)(void *, struct tc_nvml_memory *);
	int (*utilization)(void *, struct tc_nvml_utilization *);
	int (*power)(void *, unsigned int *);          /* milliwatts */
	int (*temperature)(void *, int, unsigned int *); /* sensor 0: the GPU */
	int (*retired_pending)(void *, int *);
	int (*remapped)(void *, unsigned int *, unsigned int *, unsigned int *, unsigned int *);
	int (*ecc)(void *, int, int, unsigned long long *);
	int (*set_create)(void **);
	int (*set_free)(void *);
	int (*register_events)(void *, unsigned long long, void *);
	int (*wait)(void *, struct tc_nvml_event *, unsigned int);
};
/*
 * NVML's table, loaded once (any thread) and never unloaded; NULL when
 * libnvidia-ml.so.1 cannot be loaded or lacks one of the first four.
 * The caller still calls init() and, when it succeeded, shutdown().
 */
const struct tc_nvml *tc_nvml(void);

#ifndef TC_LAZYLIB_IMPL
#undef curl_easy_setopt
#undef curl_easy_getinfo
#define curl_global_init tc_curl_global_init
#define curl_easy_init tc_curl_easy_init
#define curl_easy_setopt tc_curl_easy_setopt
#define curl_easy_getinfo tc_curl_easy_getinfo
#define curl_easy_perform tc_curl_easy_perform
#define curl_easy_cleanup tc_curl_easy_cleanup
#define curl_easy_reset tc_curl_easy_reset
#define curl_easy_strerror tc_curl_easy_strerror
#define curl_slist_append tc_curl_slist_append
#define curl_slist_free_all tc_curl_slist_free_all
#define MHD_start_daemon tc_MHD_start_daemon
#define MHD_stop_daemon tc_MHD_stop_daemon
#define MHD_add_response_header tc_MHD_add_response_header
#define MHD_create_response_from_buffer tc_MHD_create_response_from_buffer
#define MHD_create_response_from_callback tc_MHD_create_response_from_callback
#define MHD_destroy_response tc_MHD_destroy_response
#define MHD_lookup_connection_value tc_MHD_lookup_connection_value
#define MHD_queue_response tc_MHD_queue_response
#define MHD_get_connection_info tc_MHD_get_connection_info
#define MHD_get_connection_values tc_MHD_get_connection_values
#define MHD_create_response_for_upgrade tc_MHD_create_response_for_upgrade
#define MHD_upgrade_action tc_MHD_upgrade_action
#define EVP_Digest tc_EVP_Digest
#define EVP_sha256 tc_EVP_sha256
#define EVP_md5 tc_EVP_md5
#define EVP_MD_CTX_new tc_EVP_MD_CTX_new
#define EVP_MD_CTX_free tc_EVP_MD_CTX_free
#define EVP_DigestInit_ex tc_EVP_DigestInit_ex
#define EVP_DigestUpdate tc_EVP_DigestUpdate
#define EVP_DigestFinal_ex tc_EVP_DigestFinal_ex
#endif

#endif
