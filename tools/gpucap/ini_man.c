/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ini_man.c: gpucap-ini-man, a build tool that writes gpucap.ini(5) from libgpucap's options
 * table, the rows the library, `gpucap --help` and `gpucap check` read, so the page cannot drift
 * from them. Run by the build (cmake/install.cmake); not installed.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "gpucap_version.h"
#include "man.h"

int main(void)
{
    FILE *f = stdout;
    fprintf(f, ".TH GPUCAP.INI 5 \"\" \"gpucap %s\" \"File Formats\"\n", GPUCAP_VERSION_STRING);
    gpc_man_section(f, "NAME", "gpucap.ini - settings of libgpucap.so, the GPU memory cap");
    fputs(".SH SYNOPSIS\n.I /etc/gpucap/gpucap.ini\n.br\n[gpucap]\n.br\n\\fIkey\\fR = \\fIvalue\\fR\n.br\n"
          "[device.\\fIordinal\\fR] or [device.GPU\\-\\fIuuid\\fR]\n.br\n\\fIkey\\fR = \\fIvalue\\fR\n", f);
    gpc_man_section(f, "DESCRIPTION",
                    "Every process that preloads libgpucap.so reads this ini file (or the one GPUCAP_CONFIG "
                    "names) once, at start. Each key of section [gpucap] is also an environment variable, "
                    "GPUCAP_ and the key in capitals, with the same meaning; the variable wins, unless the "
                    "platform file sets lock = true, in which case the environment may only tighten. "
                    "Per-device keys may also be given in [device.ORDINAL] or [device.GPU-UUID] sections "
                    "(a prefix of the UUID is enough). Lines starting with ; or # are comments. A value "
                    "that is not valid is an error line naming the key and the value, and its safe state "
                    "applies: for the memory limit, a budget of 0 (every allocation denied), never no cap. "
                    "`gpucap check FILE` validates a file and shows the budgets it gives.");
    fputs(".SH KEYS\n", f);
    for (int i = 0; i < GPC_OPT__COUNT; i++) {
        const struct gpc_option_def *d = &gpc_option_defs[i];
        if (d->flags & GPC_OPTF_ENV_ONLY)
            continue;
        char text[1400];
        size_t n = (size_t)snprintf(text, sizeof text, "%s.", d->doc);
        if (d->def && n < sizeof text)
            n += (size_t)snprintf(text + n, sizeof text - n, " Default: %s.", d->def);
        if (n < sizeof text)
            n += (size_t)snprintf(text + n, sizeof text - n, " Variable: %s%s.", d->env,
                                  d->flags & GPC_OPTF_FILE_ONLY ? " (refused: this key is read from the platform "
                                                                  "file only)" : "");
        if ((d->flags & GPC_OPTF_PER_DEVICE) && n < sizeof text)
            snprintf(text + n, sizeof text - n, " Per device: %s_<ordinal>, %s_GPU-<uuid>, or the key in a "
                     "[device.*] section.", d->env, d->env);
        gpc_man_item(f, d->key, cli_value_form(d, "true|false"), text);
    }
    fprintf(f, ".SS Variables only\n");
    for (int i = 0; i < GPC_OPT__COUNT; i++) {
        const struct gpc_option_def *d = &gpc_option_defs[i];
        if (!(d->flags & GPC_OPTF_ENV_ONLY))
            continue;
        fprintf(f, ".TP\n.B %s\n", d->env);
        gpc_man_text(f, d->doc);
        fputc('\n', f);
    }
    fprintf(f, ".SH SIZES\n");
    gpc_man_text(f, gpc_size_forms);
    fputs(".\n", f);
    fputs(".SH EXAMPLE\n.nf\n[gpucap]\nlog_level = warn\nmemory_limit = 25%\n\n[device.GPU\\-8f3a1c2e]\n"
          "memory_limit = 40GiB\n.fi\n", f);
    fputs(".SH FILES\n.TP\n.I /etc/gpucap/gpucap.ini\nThe platform file: read first by every process; "
          "with lock = true its budgets are the most a process can get. A configuration file of the "
          "libgpucap package.\n", f);
    gpc_man_section(f, "ENVIRONMENT", "GPUCAP_CONFIG names another file (not under the lock); every key "
                                      "above has its variable.");
    fputs(".SH SEE ALSO\n.BR gpucap (1),\n.BR gpucap\\-webhook (1),\n.BR gpucap\\-exporter (1),\n.BR gpucap\\-agent (1)\n",
          f);
    return 0;
}
