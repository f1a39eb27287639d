/* SPDX-License-Identifier: Apache-2.0 */
/*
 * image.c: what code a module or library image holds, read from its headers at load (the code
 * itself is never looked at), and which of it a device runs: the answer of the functions'
 * CU_FUNC_ATTRIBUTE_BINARY_VERSION and PTX_VERSION, and CUDA_ERROR_NO_BINARY_FOR_GPU where a
 * device can run none of it. Frameworks read those versions: CUB (in PyTorch's masked_select, and
 * so in printing a tensor) picks its tuning by the PTX version of the code that runs, and gives
 * cudaErrorInvalidDeviceFunction for one its binary was not built for (an L4, 8.9, runs PyTorch's
 * sm_86 code: PTX version 86, not 89).
 *
 * The forms, and where the facts come from:
 *  - the runtime's fat binary wrapper (magic 0x466243b1; version 1: a pointer to one fat binary at
 *    offset 8; version 2: a NULL-terminated array of them at offset 16) and the fat binary (magic
 *    0xba55ed50, version 1, header size, then the size of its entries; each entry a header with its
 *    kind at 0 (1 PTX, 2 ELF cubin), its header size at 4, payload size at 8, compressed size at 20
 *    and its architecture at 28 (86 for sm_86)): ZLUDA (vosen/ZLUDA, cuda_types/src/dark_api.rs,
 *    dark_api/src/fatbin.rs), checked against PyTorch's, cuBLAS's and the runtime's fat binaries;
 *  - a CUDA ELF file (e_machine 190, EM_CUDA): the architecture in e_flags, its low byte (and the
 *    PTX version in bits 16-23) for ELF ABI version 7 (the cubins cuBLAS 13 loads, e.g. 0x560556 for
 *    sm_86), bits 8-15 for ABI version 8 (what nvcc and ptxas 13 write: 0x6005a04 for sm_90), as read
 *    from those files;
 *  - PTX text: its `.target sm_XY` line (the PTX ISA's directive).
 * An image in no form known (a test's string, cuLinkComplete's token, a file name) holds code for
 * every architecture, as before. The choice (the CUDA C++ Programming Guide, "Binary
 * Compatibility" and "Application Compatibility"): a cubin of the device's architecture, else of
 * its major revision and the highest minor one not above the device's, else the PTX of the highest
 * architecture not above it, compiled for the device; the architecture-specific and family variants
 * (sm_90a, sm_100f: flag bits of the fat binary's entries) are taken as their base architecture.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <string.h>

#include "fake_internal.h"

#define WRAPPER_MAGIC 0x466243b1u
#define FATBIN_MAGIC 0xba55ed50u
#define EM_CUDA 190

static uint32_t rd32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Whether `p` starts with the `n` bytes of `want`, compared one by one (an image shorter than the
 * magic, a test's string, is not read past its end). */
static bool starts_with(const unsigned char *p, const unsigned char *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != want[i])
            return false;
    return true;
}

static void add(struct fk_image *img, bool ptx, int arch, int ptx_arch)
{
    if (img->n == FK_IMAGE_MAX || arch <= 0) {
        img->any = true; /* more than the fake keeps, or a field it cannot read: no claim */
        return;
    }
    img->code[img->n++] = (struct fk_code){ ptx, (uint16_t)arch, (uint16_t)(ptx_arch > 0 ? ptx_arch : arch) };
}

/* One fat binary (the bytes at `p`, its magic already checked). */
static void read_fatbin(const unsigned char *p, struct fk_image *img)
{
    uint16_t version, header;
    uint64_t size;
    memcpy(&version, p + 4, 2);
    memcpy(&header, p + 6, 2);
    memcpy(&size, p + 8, 8);
    if (version != 1 || header < 16) {
        img->any = true;
        return;
    }
    const unsigned char *e = p + header, *end = e + size;
    while (e + 32 <= end) {
        uint16_t kind;
        memcpy(&kind, e, 2);
        uint32_t ehead = rd32(e + 4), payload = rd32(e + 8), compressed = rd32(e + 20), arch = rd32(e + 28);
        if (ehead < 32) {
            img->any = true;
            return;
        }
        if (kind == 1 || kind == 2)
            add(img, kind == 1, (int)arch, 0);
        else
            img->any = true; /* another kind of entry (no claim about it) */
        e += ehead + (payload > compressed ? payload : compressed);
    }
}

void fk_image_read(const void *image, struct fk_image *img)
{
    static const unsigned char wrapper[4] = { 0xb1, 0x43, 0x62, 0x46 }, fatbin[4] = { 0x50, 0xed, 0x55, 0xba },
                               elf[4] = { 0x7f, 'E', 'L', 'F' };
    const unsigned char *p = image;
    memset(img, 0, sizeof *img);
    if (starts_with(p, wrapper, 4)) {
        uint32_t version = rd32(p + 4);
        const unsigned char *one;
        memcpy(&one, p + 8, sizeof one);
        if (version == 1 && one && starts_with(one, fatbin, 4)) {
            read_fatbin(one, img);
        } else if (version == 2) {
            const unsigned char *const *list;
            memcpy(&list, p + 16, sizeof list);
            for (int i = 0; list && list[i] && i < FK_IMAGE_MAX; i++) {
                if (!starts_with(list[i], fatbin, 4)) {
                    img->any = true;
                    break;
                }
                read_fatbin(list[i], img);
            }
        } else {
            img->any = true;
        }
    } else if (starts_with(p, fatbin, 4)) {
        read_fatbin(p, img);
    } else if (starts_with(p, elf, 4) && p[4] == 2) {
        uint16_t machine;
        memcpy(&machine, p + 18, 2);
        uint32_t flags = rd32(p + 48);
        if (machine != EM_CUDA)
            img->any = true;
        else if (p[8] >= 8)
            add(img, false, (int)(flags >> 8 & 0xff), 0);
        else
            add(img, false, (int)(flags & 0xff), (int)(flags >> 16 & 0xff));
    } else {
        /* PTX: text with a ".target sm_XY" directive (NUL-terminated, as cuModuleLoadData requires). */
        const char *t = strstr((const char *)p, ".target");
        int arch = 0;
        if (t) {
            t += 7;
            while (*t == ' ' || *t == '\t')
                t++;
            if (strncmp(t, "sm_", 3) == 0)
                for (t += 3; *t >= '0' && *t <= '9'; t++)
                    arch = arch * 10 + (*t - '0');
        }
        if (arch)
            add(img, true, arch, arch);
        else
            img->any = true;
    }
    if (img->n == 0)
        img->any = true;
}

CUresult fk_image_select(const struct fk_image *img, int major, int minor, int *binary, int *ptx)
{
    int sm = major * 10 + minor, best = -1;
    for (int i = 0; i < img->n; i++) {
        const struct fk_code *c = &img->code[i];
        if (c->ptx || c->arch / 10 != major || c->arch > sm)
            continue;
        if (best < 0 || c->arch > img->code[best].arch)
            best = i;
    }
    if (best >= 0) {
        *binary = img->code[best].arch;
        *ptx = img->code[best].ptx_arch;
        return CUDA_SUCCESS;
    }
    for (int i = 0; i < img->n; i++) {
        const struct fk_code *c = &img->code[i];
        if (c->ptx && c->arch <= sm && (best < 0 || c->arch > img->code[best].arch))
            best = i;
    }
    if (best >= 0) {
        *binary = sm; /* compiled for the device at the load */
        *ptx = img->code[best].arch;
        return CUDA_SUCCESS;
    }
    if (img->any) {
        *binary = *ptx = sm;
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_NO_BINARY_FOR_GPU;
}
