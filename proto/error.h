/*
 * Error codes of the MetaRoCE engine (proto/).
 *
 * Every function of the engine that can fail returns 0 or a positive value on
 * success and one of these negative codes on failure. The table below is the
 * only list of them: it generates the enum, mrp_strerror() and mrp_err_name().
 * Codes are stable once released: add new ones at the end.
 */
#ifndef MRP_ERROR_H
#define MRP_ERROR_H

/* X(NAME, value, message) */
#define MRP_ERRNO_MAP(X)                                                        \
	X(INVAL, -1, "invalid argument")                                        \
	X(NOMEM, -2, "out of memory")                                           \
	X(NOBUF, -3, "output buffer too small")                                 \
	X(TRUNCATED, -4, "packet shorter than its header")                      \
	X(VERSION, -5, "unsupported protocol version")                          \
	X(OPCODE, -6, "unknown or reserved opcode")                             \
	X(FLAGS, -7, "flag not valid for this opcode")                          \
	X(LENGTH, -8, "length field does not match the packet")                 \
	X(RANGE, -9, "field out of its valid range")                            \
	X(RESERVED, -10, "reserved field is not zero")                          \
	X(TOKEN, -11, "connection token does not match")                        \
	X(NOCONN, -12, "unknown connection")                                    \
	X(NOSTREAM, -13, "unknown stream")                                      \
	X(STATE, -14, "operation not valid in the current state")               \
	X(FULL, -15, "queue or table is full")                                  \
	X(NOENT, -16, "no such entry")                                          \
	X(EXIST, -17, "entry already exists")

enum {
#define MRP_ERR_ENUM(name, val, msg) MRP_ERR_##name = (val),
	MRP_ERRNO_MAP(MRP_ERR_ENUM)
#undef MRP_ERR_ENUM
};

/* A sentence describing the error; "unknown error" for codes not in the table. */
const char *mrp_strerror(int err);

/* The code's name without prefix ("TRUNCATED"), for logs and counters;
 * "OK" for 0 and "UNKNOWN" for codes not in the table. */
const char *mrp_err_name(int err);

#endif
