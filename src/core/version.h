/* version.h -- trainctl's version: `trainctl --version` and GET /api/v1/info. */
#ifndef TC_CORE_VERSION_H
#define TC_CORE_VERSION_H

#define TRAINCTL_VERSION "0.1.0"

#endif
