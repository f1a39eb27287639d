/* SPDX-License-Identifier: Apache-2.0 */
/*
 * plot.c: the usage timeline of a run: gathered from the run's processes, put into its report,
 * and drawn as an SVG picture (`gpucap run --report usage.svg`, `gpucap plot report.json`).
 *
 * Under `gpucap run --report`, each process of the run writes its timeline (GPUCAP_TIMELINE, see
 * libgpucap/core/timeline.c) into the run's directory at exit: buckets of "highest and last figure,
 * denials". They are merged per device by time. The picture has one panel per device: usage over
 * time (the highest figure of each bucket, so no peak is lost), the budget as a red dashed line
 * (a step at each live change of it, one segment per budget period), each denial as a red mark on
 * the budget of its time, and the peak labelled; in audit mode the peak is labelled as
 * the budget the job needs. Each panel is titled with the card's index and name (NVML's) when
 * known. Plain SVG 1.1 with inline styles: any browser or rsvg-convert shows it.
 *
 * A JSON report may come from anywhere: every loop is bounded (gridlines, ticks, points), every
 * number is clamped before it is turned into an integer, and every string written into the SVG is
 * escaped (a uuid or a name holding markup stays text).
 */
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct series {
    char uuid[GPC_UUID_TEXT];
    int index;      /* NVML's index of the card, -1: unknown */
    char name[96];
    uint64_t physical, budget, peak, denials; /* budget GPC_UNLIMITED: none */
    /* The live changes of the budget, in time order: from t_ns on it was `to`; before the first, `first`. */
    struct step {
        uint64_t t_ns, to;
    } step[GPC_LEDGER_CHANGES];
    int nsteps;
    uint64_t first;
    struct gpc_tl_point *p;
    int n, cap;
};

/* The budget of series s at time t (the current one without steps). */
static uint64_t budget_at(const struct series *s, uint64_t t)
{
    uint64_t b = s->nsteps ? s->first : s->budget;
    for (int k = 0; k < s->nsteps && s->step[k].t_ns <= t; k++)
        b = s->step[k].to;
    return b;
}

struct plot {
    struct series dev[GPC_LEDGER_DEVICES];
    int n;
    bool audit;
};

static struct series *series_of(struct plot *pl, const char *uuid)
{
    for (int i = 0; i < pl->n; i++)
        if (strcmp(pl->dev[i].uuid, uuid) == 0)
            return &pl->dev[i];
    if (pl->n == GPC_LEDGER_DEVICES)
        return NULL;
    struct series *s = &pl->dev[pl->n++];
    memset(s, 0, sizeof *s);
    snprintf(s->uuid, sizeof s->uuid, "%s", uuid);
    s->budget = GPC_UNLIMITED;
    s->index = -1;
    return s;
}

/* Points a panel draws at most: the timelines of a run have 512 per process; a report someone
 * else wrote may claim any number. */
#define MAX_POINTS 65536

static int add_point(struct series *s, struct gpc_tl_point pt)
{
    if (s->n == MAX_POINTS)
        return -E2BIG;
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 256;
        struct gpc_tl_point *p = realloc(s->p, (size_t)cap * sizeof *p);
        if (!p)
            return -ENOMEM;
        s->p = p;
        s->cap = cap;
    }
    s->p[s->n++] = pt;
    return 0;
}

static int by_time(const void *a, const void *b)
{
    const struct gpc_tl_point *x = a, *y = b;
    return x->t_ns < y->t_ns ? -1 : x->t_ns > y->t_ns;
}

static void plot_free(struct plot *pl)
{
    for (int i = 0; i < pl->n; i++)
        free(pl->dev[i].p);
    pl->n = 0;
}

/*
 * Reads DIR/timeline.* into *pl (several processes: their buckets merged in time order). The
 * directory is the run's, and the job writes in it: only regular files are read, opened so that a
 * FIFO, a link or a terminal in their place cannot hang or redirect the reader.
 */
static void timeline_load(const char *dir, struct plot *pl)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "timeline.", 9) != 0)
            continue;
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY);
        struct stat st;
        FILE *f = NULL;
        if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !(f = fdopen(fd, "r"))))
            close(fd);
        if (!f)
            continue;
        char uuid[GPC_UUID_TEXT];
        unsigned long long t, max, last;
        unsigned den;
        while (fscanf(f, "%47s %llu %llu %llu %u", uuid, &t, &max, &last, &den) == 5) {
            struct series *s = series_of(pl, uuid);
            if (s)
                add_point(s, (struct gpc_tl_point){t, max, last, den});
        }
        fclose(f);
    }
    closedir(d);
    for (int i = 0; i < pl->n; i++)
        qsort(pl->dev[i].p, (size_t)pl->dev[i].n, sizeof pl->dev[i].p[0], by_time);
}

void cli_timeline_clean(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "timeline.", 9) == 0) {
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    }
    closedir(d);
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* "GPU-xxxxxxxx-xxxx-..." into 16 bytes: 0, or -EINVAL. */
static int uuid_parse(const char *text, uint8_t out[16])
{
    if (strncmp(text, "GPU-", 4) != 0)
        return -EINVAL;
    int n = 0;
    for (const char *c = text + 4; *c && n < 32; c++) {
        if (*c == '-')
            continue;
        int v = hexval(*c);
        if (v < 0)
            return -EINVAL;
        out[n / 2] = (uint8_t)(n % 2 ? out[n / 2] | v : v << 4);
        n++;
    }
    return n == 32 ? 0 : -EINVAL;
}

/* ---- the picture ---- */

#define W 960.0
#define PANEL_H 420.0
#define LEFT 96.0
#define RIGHT 40.0
#define TOP 84.0
#define BOTTOM 56.0

/*
 * Writes `t` (UTF-8 from jansson, perhaps cut short by a fixed-size copy) as SVG text or an
 * attribute value: markup characters as entities; as '?' each control byte, each byte of a
 * sequence cut short, and the noncharacters U+FFFE and U+FFFF, which XML 1.0 does not allow even
 * as character references.
 */
static void xml_text(FILE *f, const char *t)
{
    for (; *t; t++) {
        unsigned char c = (unsigned char)*t;
        if (c >= 0x80) {
            size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0, k = 1;
            while (k < n && ((unsigned char)t[k] & 0xc0) == 0x80)
                k++;
            bool nonchar = n == 3 && c == 0xef && (unsigned char)t[1] == 0xbf && ((unsigned char)t[2] & 0xfe) == 0xbe;
            if (n == 0 || k < n || nonchar) {
                fputc('?', f);
                t += n && k == n ? n - 1 : 0;
            } else {
                fwrite(t, 1, n, f);
                t += n - 1;
            }
            continue;
        }
        switch (*t) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(c < 0x20 || c == 0x7f ? '?' : *t, f);
        }
    }
}

/* A number from a JSON report as bytes or a count: negative, not a number or beyond 2^64 clamped. */
static uint64_t clamp_u64(double v)
{
    if (!(v > 0))
        return 0;
    if (v >= 18446744073709549568.0)
        return UINT64_MAX;
    return (uint64_t)v;
}

/* "48 MiB", "1.5 GiB": short labels for the axis and the marks. */
static const char *short_size(uint64_t b, char *buf, size_t len)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (b == 0)
        return snprintf(buf, len, "0"), buf;
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 6) {
        v /= 1024;
        u++;
    }
    if (fabs(v - round(v)) < 0.05)
        snprintf(buf, len, "%.0f %s", v, units[u]);
    else
        snprintf(buf, len, "%.1f %s", v, units[u]);
    return buf;
}

/* short_size rounded up (tenths), never down: for what a job needs. */
static const char *short_size_up(uint64_t b, char *buf, size_t len)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (b < 1024)
        return snprintf(buf, len, "%llu B", (unsigned long long)b), buf;
    int u = 0;
    unsigned __int128 unit = 1;
    while ((unsigned __int128)b >= unit * 1024 && u < 6) {
        unit *= 1024;
        u++;
    }
    unsigned long long tenths = (unsigned long long)(((unsigned __int128)b * 10 + unit - 1) / unit);
    if (tenths % 10 == 0)
        snprintf(buf, len, "%llu %s", tenths / 10, units[u]);
    else
        snprintf(buf, len, "%llu.%llu %s", tenths / 10, tenths % 10, units[u]);
    return buf;
}

/* A step of 2^k bytes (or 2^k x 5/4) giving 4 to 8 gridlines up to `top`. */
static uint64_t byte_step(uint64_t top)
{
    uint64_t step = 1;
    while (top / step > 8 && step < (UINT64_C(1) << 62))
        step *= 2;
    return step;
}

/* A tick's time: milliseconds for a run shorter than 2 s, else seconds. */
static void time_label(double t, double span, char *buf, size_t len)
{
    if (span < 2)
        snprintf(buf, len, "%g ms", round(t * 1e6) / 1e3);
    else
        snprintf(buf, len, "%g s", round(t * 1e3) / 1e3);
}

static double time_step(double span)
{
    double p = pow(10, floor(log10(span > 0 ? span : 1)));
    for (;;) {
        if (span / p <= 10)
            break;
        p *= 10;
    }
    double steps[] = {p / 10, p / 5, p / 2, p};
    for (int i = 0; i < 4; i++)
        if (span / steps[i] <= 8)
            return steps[i];
    return p;
}

/* A label's box, to keep labels apart. */
struct box {
    double x0, y0, x1, y1;
};

static bool overlaps(struct box a, struct box b)
{
    return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1;
}

/* The box of a 13 px label of n characters at (x, y) anchored at its start or its end. */
static struct box label_box(double x, double y, size_t n, bool start)
{
    double w = 7.6 * (double)n;
    return start ? (struct box){x, y - 13, x + w, y + 4} : (struct box){x - w, y - 13, x, y + 4};
}

static void panel(FILE *f, const struct series *s, double y0, bool audit)
{
    char a[GPC_SIZE_TEXT], b[GPC_SIZE_TEXT], c[GPC_SIZE_TEXT];
    double x0 = LEFT, x1 = W - RIGHT, ytop = y0 + TOP, ybot = y0 + PANEL_H - BOTTOM;
    uint64_t tstart = s->n ? s->p[0].t_ns : 0, tend = s->n ? s->p[s->n - 1].t_ns : 0;
    /* A bucket's width: the smallest gap between two points (buckets are 1 ms and doubled). A run
     * shorter than one bucket is drawn one bucket wide, so that a short run is a shape, not a line. */
    uint64_t width = 0;
    for (int i = 1; i < s->n; i++) {
        uint64_t gap = s->p[i].t_ns - s->p[i - 1].t_ns;
        if (gap && (!width || gap < width))
            width = gap;
    }
    if (!width)
        width = 1000000;
    double span = (double)(tend - tstart + width) / 1e9;
    span *= 1.04; /* room after the last bucket */
    uint64_t top = s->peak;
    for (int i = 0; i < s->n; i++)
        if (s->p[i].max > top)
            top = s->p[i].max;
    if (s->budget != GPC_UNLIMITED && s->budget > top)
        top = s->budget;
    for (int k = 0; k < s->nsteps; k++) {
        if (s->step[k].to != GPC_UNLIMITED && s->step[k].to > top)
            top = s->step[k].to;
        if (!k && s->first != GPC_UNLIMITED && s->first > top)
            top = s->first;
    }
    top = !top ? 1 << 20 : top > UINT64_MAX - top / 8 ? UINT64_MAX : top + top / 8;
#define X(t) (x0 + ((double)((t) - tstart) / 1e9) / span * (x1 - x0))
#define Y(v) (ybot - (double)((v) < top ? (v) : top) / (double)top * (ybot - ytop)) /* clamped: a hostile figure stays inside */

    /* Title: which card, and what the picture answers. */
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" class=\"title\">", x0, y0 + 28);
    if (s->index >= 0) {
        fprintf(f, "GPU %d", s->index);
        if (s->name[0]) {
            fputs(" (", f);
            xml_text(f, s->name);
            fputc(')', f);
        }
    } else {
        /* No index known: the UUID's first group names the card here, the subtitle has all of it. */
        char shortid[16];
        snprintf(shortid, sizeof shortid, "%.12s", s->uuid);
        fputs("device ", f);
        xml_text(f, shortid);
    }
    const char *budget = s->budget == GPC_UNLIMITED ? "no budget" : short_size(s->budget, b, sizeof b);
    if (audit)
        fprintf(f, ": this job needs %s (budget %s)</text>\n", short_size_up(s->peak, a, sizeof a), budget);
    else
        fprintf(f, ": peak %s of a %s budget</text>\n", short_size(s->peak, a, sizeof a), budget);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" class=\"sub\">%" PRIu64 " %s%s; card of %s", x0, y0 + 48, s->denials,
            s->denials == 1 ? "denial" : "denials", audit ? " (audit mode: counted, then admitted)" : "",
            short_size(s->physical, c, sizeof c));
    fputs(", ", f);
    xml_text(f, s->uuid);
    fputs("</text>\n", f);

    /* Legend, on a line of its own under the titles, at the right. */
    double lx = x1 - 300, ly = y0 + 68;
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"16\" height=\"10\" class=\"usagekey\"/>"
               "<text x=\"%.1f\" y=\"%.1f\" class=\"legend\">in use</text>\n", lx, ly - 9, lx + 22, ly);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"budgetkey\"/>"
               "<text x=\"%.1f\" y=\"%.1f\" class=\"legend\">budget</text>\n", lx + 90, ly - 4, lx + 120, ly - 4,
            lx + 126, ly);
    fprintf(f, "<path class=\"denialkey\" d=\"M%.1f %.1f l-6 -11 h12 Z\"/>"
               "<text x=\"%.1f\" y=\"%.1f\" class=\"legend\">denial</text>\n", lx + 200, ly + 1, lx + 210, ly);

    /* Grid and axes: at most 9 gridlines and 12 ticks, whatever the figures. */
    uint64_t step = byte_step(top);
    for (int k = 0; k <= 9; k++) {
        uint64_t v = step * (uint64_t)k;
        if (v > top || (k && v / (uint64_t)k != step))
            break;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>\n", x0, Y(v), x1, Y(v));
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"ytick\">%s</text>\n", x0 - 8, Y(v) + 4,
                short_size(v, a, sizeof a));
    }
    double ts = time_step(span);
    for (int k = 0; k <= 12; k++) {
        double t = ts * k;
        if (t > span + 1e-12)
            break;
        double x = x0 + t / span * (x1 - x0);
        char lab[48];
        time_label(t, span, lab, sizeof lab);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"tick\"/>\n", x, ybot, x, ybot + 5);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"xtick\">%s</text>\n", x, ybot + 20, lab);
    }
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"axis\"/>\n", x0, ybot, x1, ybot);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"xlabel\">time since the first allocation</text>\n",
            (x0 + x1) / 2, ybot + 42);

    /* Usage: each bucket at its highest figure for its width, then its last figure until the next. */
    if (s->n) {
        fprintf(f, "<path class=\"usage\" d=\"M%.1f %.1f", X(tstart), Y(0));
        uint64_t level = 0;
        for (int i = 0; i < s->n; i++) {
            double x = X(s->p[i].t_ns);
            double xe = i + 1 < s->n && s->p[i + 1].t_ns - s->p[i].t_ns < width ? X(s->p[i + 1].t_ns)
                                                                                  : X(s->p[i].t_ns + width);
            fprintf(f, " L%.1f %.1f L%.1f %.1f L%.1f %.1f L%.1f %.1f", x, Y(level), x, Y(s->p[i].max), xe,
                    Y(s->p[i].max), xe, Y(s->p[i].last));
            level = s->p[i].last;
        }
        fprintf(f, " L%.1f %.1f L%.1f %.1f Z\"/>\n", x1, Y(level), x1, Y(0));
    }

    /* Each denial as a mark on the budget line; the boxes of the marks, the labels keep off them
     * (beyond MAX_MARK_BOXES marks, the whole line's band). */
#define MAX_MARK_BOXES 64
    struct box taken[MAX_MARK_BOXES + 2];
    int ntaken = 0, marks = 0;
    double yd = s->budget != GPC_UNLIMITED ? Y(s->budget) : ytop;
    for (int i = 0; i < s->n; i++) {
        if (!s->p[i].denials)
            continue;
        double x = X(s->p[i].t_ns);
        uint64_t then = budget_at(s, s->p[i].t_ns);
        double ym = then != GPC_UNLIMITED ? Y(then) : ytop; /* on the budget of its time */
        fprintf(f, "<g class=\"denial\"><title>%u denial%s at %.3f s</title>"
                   "<path d=\"M%.1f %.1f l-6 -11 h12 Z\"/></g>\n",
                s->p[i].denials, s->p[i].denials == 1 ? "" : "s", (double)(s->p[i].t_ns - tstart) / 1e9, x, ym);
        if (marks++ < MAX_MARK_BOXES)
            taken[ntaken++] = (struct box){x - 8, yd - 13, x + 8, yd + 1};
        else
            taken[0] = (struct box){x0, yd - 13, x1, yd + 1}, ntaken = 1;
    }
    /* The budget line, one segment per budget period with a step at each live change (a change
     * before the first point is at the left edge), labelled at its right end, else its left end:
     * where no mark is. */
    if (s->nsteps) {
        double xa = x0;
        uint64_t b = s->first;
        for (int k = 0; k <= s->nsteps; k++) {
            double xb = k < s->nsteps ? (s->step[k].t_ns <= tstart ? x0 : X(s->step[k].t_ns)) : x1;
            if (xb > x1)
                xb = x1;
            if (b != GPC_UNLIMITED && xb > xa)
                fprintf(f, "<line class=\"budget\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", xa, Y(b), xb,
                        Y(b));
            if (k < s->nsteps) {
                uint64_t to = s->step[k].to;
                if (b != GPC_UNLIMITED && to != GPC_UNLIMITED && to != b)
                    fprintf(f, "<line class=\"budgetstep\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", xb,
                            Y(b), xb, Y(to));
                b = to;
                xa = xb;
            }
        }
    }
    if (s->budget != GPC_UNLIMITED) {
        if (!s->nsteps)
            fprintf(f, "<line class=\"budget\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x0, yd, x1, yd);
        char lab[48];
        snprintf(lab, sizeof lab, "budget %s", short_size(s->budget, a, sizeof a));
        struct box right = label_box(x1 - 4, yd - 8, strlen(lab), false), left = label_box(x0 + 12, yd - 8, strlen(lab), true);
        bool right_free = true;
        for (int k = 0; k < ntaken; k++)
            right_free = right_free && !overlaps(right, taken[k]);
        struct box at = right_free ? right : left;
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"budgetlabel\" text-anchor=\"%s\">%s</text>\n",
                right_free ? x1 - 4 : x0 + 12, yd - 8, right_free ? "end" : "start", lab);
        taken[ntaken++] = at;
    }

    /* The peak, at the first bucket that reached it (the ledger's figure is the authority); its
     * label where it meets neither the denial marks nor the budget's label. */
    int hi = -1;
    for (int i = 0; i < s->n; i++)
        if (hi < 0 || s->p[i].max > s->p[hi].max)
            hi = i;
    if (hi >= 0) {
        uint64_t pk = s->peak > s->p[hi].max ? s->peak : s->p[hi].max;
        double x = X(s->p[hi].t_ns), y = Y(pk);
        bool right = x < (x0 + x1) / 2;
        char lab[96];
        snprintf(lab, sizeof lab, "peak %s%s", audit ? short_size_up(pk, a, sizeof a) : short_size(pk, a, sizeof a),
                 audit ? ": the budget this job needs" : "");
        double lx2 = right ? x + 10 : x - 10, tries[] = {y - 10, y + 22, y - 26, y + 38, y - 42, y + 54}, ly2 = tries[0];
        for (size_t t = 0; t < sizeof tries / sizeof tries[0]; t++) {
            struct box bx = label_box(lx2, tries[t], strlen(lab), right);
            bool clash = bx.y0 < ytop - 4 || bx.y1 > ybot;
            for (int k = 0; k < ntaken && !clash; k++)
                clash = overlaps(bx, taken[k]);
            if (!clash) {
                ly2 = tries[t];
                break;
            }
        }
        fprintf(f, "<circle class=\"peak\" cx=\"%.1f\" cy=\"%.1f\" r=\"5\"/>\n", x, y);
        fprintf(f, "<text class=\"peaklabel\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">%s</text>\n", lx2, ly2,
                right ? "start" : "end", lab);
    }
#undef X
#undef Y
}

static void svg_write(FILE *f, const struct plot *pl)
{
    int n = pl->n ? pl->n : 1;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
               "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n",
            W, PANEL_H * n, W, PANEL_H * n);
    fprintf(f, "<style>\n"
               ".title{font-size:17px;font-weight:bold;fill:#222}\n"
               ".sub{font-size:13px;fill:#555}\n"
               ".grid{stroke:#e4e4e4;stroke-width:1}\n"
               ".axis{stroke:#444;stroke-width:1.2}\n"
               ".tick{stroke:#444}\n"
               ".ytick{font-size:12px;fill:#444;text-anchor:end}\n"
               ".xtick{font-size:12px;fill:#444;text-anchor:middle}\n"
               ".xlabel{font-size:12px;fill:#666;text-anchor:middle}\n"
               ".usage,.usagekey{fill:#4c78a8;fill-opacity:0.28;stroke:#1f4e79;stroke-width:2;stroke-linejoin:round}\n"
               ".budget,.budgetkey{stroke:#d62728;stroke-width:2.5;stroke-dasharray:9 6}\n"
               ".budgetstep{stroke:#d62728;stroke-width:2.5}\n"
               ".budgetlabel{font-size:13px;font-weight:bold;fill:#d62728}\n"
               ".denial,.denialkey{fill:#d62728;stroke:#7f0000;stroke-width:1}\n"
               ".legend{font-size:12px;fill:#444}\n"
               ".peak{fill:#1f4e79;stroke:#fff;stroke-width:1.5}\n"
               ".peaklabel{font-size:13px;font-weight:bold;fill:#1f4e79}\n"
               ".budgetlabel,.peaklabel{paint-order:stroke;stroke:#fff;stroke-width:4px;stroke-linejoin:round}\n"
               "</style>\n<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n");
    if (!pl->n)
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" class=\"title\">no device memory was allocated under a budget</text>\n",
                LEFT, TOP);
    for (int i = 0; i < pl->n; i++)
        panel(f, &pl->dev[i], PANEL_H * i, pl->audit);
    fprintf(f, "</svg>\n");
}

static bool is_svg(const char *dest)
{
    size_t n = strlen(dest);
    return n > 4 && strcasecmp(dest + n - 4, ".svg") == 0;
}

int cli_report_write(int fd, const struct gpc_ledger *l, int ledger_fd, bool json, bool audit, const char *dir,
                     const char *dest, const struct gpc_report_run *run)
{
    struct plot pl = {.audit = audit};
    timeline_load(dir, &pl);
    int rc = 0;
    if (dest && is_svg(dest)) {
        /* The ledger's figures for every device it knows; the timelines of those. */
        struct plot out = {.audit = audit};
        for (int i = 0; l && i < GPC_LEDGER_DEVICES; i++) {
            const struct gpc_ledger_dev *d = &l->dev[i];
            if (atomic_load(&d->state) != 1)
                continue;
            char uuid[GPC_UUID_TEXT];
            gpc_uuid_format(d->uuid, uuid);
            struct series *s = series_of(&out, uuid), *t = series_of(&pl, uuid);
            if (!s || !t)
                continue;
            s->physical = d->physical;
            s->budget = atomic_load(&d->slot.limit);
            s->peak = gpc_ledger_peak(l, i);
            uint16_t nch = atomic_load(&d->limit_changes);
            int kept = nch < GPC_LEDGER_CHANGES ? nch : GPC_LEDGER_CHANGES;
            for (int k = 0; k < kept; k++) {
                const struct gpc_limit_change *c = &d->changes[(uint16_t)(nch - kept + k) % GPC_LEDGER_CHANGES];
                if (!k)
                    s->first = atomic_load(&c->from);
                s->step[s->nsteps++] = (struct step){atomic_load(&c->t_ns), atomic_load(&c->to)};
            }
            for (int k = 0; run && k < run->ndev; k++)
                if (memcmp(run->dev[k].uuid, d->uuid, sizeof d->uuid) == 0) {
                    s->index = run->dev[k].index;
                    snprintf(s->name, sizeof s->name, "%s", run->dev[k].name);
                }
            s->denials = atomic_load(&d->slot.denials);
            s->p = t->p;
            s->n = t->n;
            t->p = NULL;
            t->n = 0;
        }
        FILE *f = fdopen(dup(fd), "w");
        if (!f)
            rc = -errno;
        else {
            svg_write(f, &out);
            if (fclose(f) != 0)
                rc = -EIO;
        }
        plot_free(&out);
    } else {
        struct gpc_timeline tl[GPC_LEDGER_DEVICES];
        int ntl = 0;
        for (int i = 0; i < pl.n; i++)
            if (uuid_parse(pl.dev[i].uuid, tl[ntl].uuid) == 0 && pl.dev[i].n) {
                tl[ntl].p = pl.dev[i].p;
                tl[ntl++].n = pl.dev[i].n;
            }
        rc = gpc_report_write_run(fd, l, ledger_fd, json, audit, tl, ntl, run);
    }
    plot_free(&pl);
    return rc;
}

/* ---- gpucap plot REPORT.json ---- */

enum { F_OUTPUT, F_COUNT };
static const struct tool_flag plot_flags[F_COUNT] = {
    [F_OUTPUT] = {"output", 'o', "FILE", NULL, "stdout", "write the SVG picture to FILE"},
};

const struct tool_cmd cli_plot_cmd = {
    CLI_COMMAND("plot", plot_flags, "[-o FILE] REPORT.json", "draw a gpucap JSON report as an SVG picture"),
    .about = "Draws the usage timeline of a JSON report (gpucap run --report FILE --json, or GPUCAP_REPORT\n"
             "with GPUCAP_REPORT_FORMAT=json) as an SVG picture: per device (titled with its index and\n"
             "name) the usage over time, the budget, each denial, the peak.",
    .tail = "Exit 0, 1 when the report cannot be read or the picture written, 2 for a usage error.\n",
    .max_operands = 1,
    .no_operand = "no REPORT.json given",
};

static uint64_t num(json_t *o, const char *key, uint64_t def)
{
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0)
           : json_is_real(v)  ? clamp_u64(json_real_value(v))
                              : def;
}

/* "2026-12-03T08:44:01.250Z" (the report's times) in ns since the epoch; 0 when it is not one. */
static uint64_t iso_ns(json_t *v)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *s = json_is_string(v) ? json_string_value(v) : "";
    unsigned ms = 0;
    char *end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!end)
        return 0;
    if (*end == '.')
        ms = (unsigned)strtoul(end + 1, NULL, 10) % 1000;
    time_t t = timegm(&tm);
    return t < 0 ? 0 : (uint64_t)t * 1000000000u + (uint64_t)ms * 1000000u;
}

/* The live changes of device d of a JSON report, into s, times made relative to its timeline's start. */
static void steps_from_json(json_t *d, struct series *s)
{
    json_t *changes = json_object_get(d, "budget_changes");
    uint64_t start = iso_ns(json_object_get(json_object_get(d, "timeline"), "start"));
    size_t k;
    json_t *c;
    json_array_foreach(changes, k, c) {
        if (s->nsteps == GPC_LEDGER_CHANGES || !json_is_object(c))
            break;
        uint64_t at = iso_ns(json_object_get(c, "at"));
        if (!s->nsteps)
            s->first = json_is_number(json_object_get(c, "from")) ? num(c, "from", 0) : GPC_UNLIMITED;
        s->step[s->nsteps++] = (struct step){at > start ? at - start : 0,
                                             json_is_number(json_object_get(c, "to")) ? num(c, "to", 0) : GPC_UNLIMITED};
    }
}

static int plot_from_json(json_t *root, struct plot *pl, char *why, size_t len)
{
    json_t *devs = json_object_get(root, "devices");
    if (!json_is_array(devs)) {
        snprintf(why, len, "no \"devices\" array: not a gpucap JSON report");
        return -EINVAL;
    }
    json_t *mode = json_object_get(root, "mode");
    pl->audit = json_is_string(mode) && strcmp(json_string_value(mode), "audit") == 0;
    size_t i;
    json_t *d;
    json_array_foreach(devs, i, d) {
        json_t *uuid = json_object_get(d, "uuid");
        if (!json_is_string(uuid))
            continue;
        struct series *s = series_of(pl, json_string_value(uuid));
        if (!s)
            break;
        s->physical = num(d, "physical", 0);
        json_t *budget = json_object_get(d, "budget"), *index = json_object_get(d, "index"),
               *name = json_object_get(d, "name");
        s->budget = json_is_number(budget) ? num(d, "budget", 0) : GPC_UNLIMITED;
        if (json_is_number(index) && json_number_value(index) >= 0 && json_number_value(index) < 1 << 20)
            s->index = (int)json_number_value(index);
        if (json_is_string(name))
            snprintf(s->name, sizeof s->name, "%s", json_string_value(name));
        /* A report the library wrote (GPUCAP_REPORT) names the card by UUID alone: NVML's index and
         * name for it, where this machine has that card. */
        int here;
        char here_name[sizeof s->name];
        if (s->index < 0 && cli_device_name(s->uuid, &here, here_name, sizeof here_name) == 0) {
            s->index = here;
            if (!s->name[0])
                snprintf(s->name, sizeof s->name, "%s", here_name);
        }
        s->peak = num(d, "peak", 0);
        s->denials = num(d, "denials", 0);
        steps_from_json(d, s);
        json_t *tl = json_object_get(d, "timeline"), *pts = json_object_get(tl, "points");
        size_t k;
        json_t *p;
        json_array_foreach(pts, k, p) {
            if (!json_is_array(p) || json_array_size(p) < 4)
                continue;
            /* Seconds from the start, at most about 30 years; figures clamped to 64 bits. */
            double t = json_number_value(json_array_get(p, 0));
            uint64_t den = clamp_u64(json_number_value(json_array_get(p, 3)));
            struct gpc_tl_point pt = {clamp_u64((t < 1e9 ? t : 1e9) * 1e9 + 0.5),
                                      clamp_u64(json_number_value(json_array_get(p, 1))),
                                      clamp_u64(json_number_value(json_array_get(p, 2))),
                                      den > UINT32_MAX ? UINT32_MAX : (uint32_t)den};
            if (add_point(s, pt) != 0)
                break;
        }
        qsort(s->p, (size_t)s->n, sizeof s->p[0], by_time);
    }
    return 0;
}

int cmd_plot(int argc, char **argv)
{
    const char *out = NULL; /* plot's one flag, -o */
    int optind, rc = tool_begin_values(&cli_plot_cmd, argc, argv, &out, &optind);
    if (rc >= 0)
        return rc;
    json_error_t err;
    /* Integers as reals: a figure beyond 2^63 (a report someone else wrote) loads, and is clamped. */
    json_t *root = json_load_file(argv[optind], JSON_DECODE_INT_AS_REAL, &err);
    if (!root) {
        fprintf(stderr, "gpucap plot: %s: %s (line %d)\n", argv[optind], err.text, err.line);
        return 1;
    }
    struct plot pl = {0};
    char why[160];
    rc = plot_from_json(root, &pl, why, sizeof why);
    json_decref(root);
    if (rc != 0) {
        fprintf(stderr, "gpucap plot: %s: %s\n", argv[optind], why);
        return 1;
    }
    FILE *f = out ? fopen(out, "w") : stdout;
    if (!f) {
        fprintf(stderr, "gpucap plot: %s cannot be written (%s)\n", out, strerror(errno));
        plot_free(&pl);
        return 1;
    }
    svg_write(f, &pl);
    rc = (out ? fclose(f) : fflush(f)) != 0 ? 1 : 0;
    if (rc)
        fprintf(stderr, "gpucap plot: %s: write failed\n", out ? out : "stdout");
    plot_free(&pl);
    return rc;
}
