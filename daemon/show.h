/*
 * The control commands that show the daemon as it is: status, show planes,
 * show peers, show conns, show paths, metrics and telemetry
 * (docs/control-protocol.md). Read-only; registered in the control
 * socket's command table by main.c.
 */
#ifndef MRD_SHOW_H
#define MRD_SHOW_H

typedef struct mrd mrd;

/* Add the commands to the control socket's table. Returns 0 or -1. */
int mrd_show_register(mrd *d);

#endif
