/* metaroce-conform: the case table. */
#ifndef CF_CASES_H
#define CF_CASES_H

#include <stddef.h>
#include <stdint.h>

#include "net.h"

enum { CF_PASS, CF_FAIL, CF_SKIP };

typedef struct cf_ctx {
	cf_net *n;
	const char *status_cmd;  /* prints the target's status JSON, or NULL */
	const char *trigger_cmd; /* makes the target connect to %a, or NULL */
	const char *stop_cmd;    /* stops the target gracefully, or NULL */
	const char *app_exit_cmd; /* makes the application of app_svc exit, or NULL */
	uint32_t app_svc;
	unsigned end_wait_ms;    /* how long the target may take to end a connection
				  * on its own (retry budget, shutdown) */
	unsigned challenge_wait_ms; /* ... to end one whose challenge (9.6) is
				     * unanswered */
	uint32_t svc;            /* service the connection cases open */
	uint32_t refused_svc;    /* a service the target refuses us, 0: none given */
	int has_refused_svc;
	/* a region of the target without remote write (--ro-region) */
	int has_ro;
	uint32_t ro_svc, ro_rkey;
	uint64_t ro_addr, ro_len;
	/* a second local address of the tool (--plane-addr), 0: none */
	int has_plane2;
	cf_sa plane2;
	char msg[2048];          /* fail: sent / got / required; skip: why */
	int trigger_done;
	int trigger_pid;
	int stop_pid;
	int app_pid;
} cf_ctx;

typedef struct cf_case {
	const char *name;
	const char *section; /* of proto/SPEC.md */
	const char *what;    /* one line: the rule checked */
	int (*run)(cf_ctx *x);
} cf_case;

extern const cf_case cf_cases[];
extern const size_t cf_ncases;

/* Reap what the acceptor cases started. */
void cf_cases_cleanup(cf_ctx *x);

#endif
