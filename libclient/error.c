/* Error and completion-status strings from the tables of metaroce.h. */
#include "internal.h"

MRC_API const char *mrc_strerror(int err)
{
	if (err == 0)
		return "success";
	switch (err) {
#define MRC_ERR_STR(name, val, msg) \
	case (val):                 \
		return msg;
		MRC_ERRNO_MAP(MRC_ERR_STR)
#undef MRC_ERR_STR
	}
	return "unknown error";
}

MRC_API const char *mrc_wc_status_str(int status)
{
	switch (status) {
#define MRC_WC_STR(name, val, msg) \
	case (val):                \
		return msg;
		MRC_WC_STATUS_MAP(MRC_WC_STR)
#undef MRC_WC_STR
	}
	return "unknown completion status";
}
