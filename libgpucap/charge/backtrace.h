/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backtrace.h: the call stack of a denied allocation (backtrace.c).
 */
#ifndef GPUCAP_CHARGE_BACKTRACE_H
#define GPUCAP_CHARGE_BACKTRACE_H

void gpc_backtrace_log(void);

#endif
