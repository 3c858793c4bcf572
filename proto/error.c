#include "error.h"

const char *mrp_strerror(int err)
{
	switch (err) {
	case 0:
		return "success";
#define MRP_ERR_MSG(name, val, msg)                                             \
	case MRP_ERR_##name:                                                    \
		return msg;
		MRP_ERRNO_MAP(MRP_ERR_MSG)
#undef MRP_ERR_MSG
	}
	return "unknown error";
}

const char *mrp_err_name(int err)
{
	switch (err) {
	case 0:
		return "OK";
#define MRP_ERR_NAME(name, val, msg)                                            \
	case MRP_ERR_##name:                                                    \
		return #name;
		MRP_ERRNO_MAP(MRP_ERR_NAME)
#undef MRP_ERR_NAME
	}
	return "UNKNOWN";
}
