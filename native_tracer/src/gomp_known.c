/*
 * gomp_known.c -- the libgomp entry points gomp.c knows, and the check of
 * the libgomp a program runs with (issue 15, "a libgomp version with entry
 * points we do not know: warn once, record what we can").
 *
 * At the first call of any of gomp.c's wrappers (never at load: a program
 * without OpenMP stays silent), gomp.c asks hbt_gomp_check for the GOMP_*
 * functions that the object defining the real entry (libgomp.so.1) exports
 * and that are neither wrapped by this build (the GOMP_* functions this
 * library itself exports: no second list to keep in step with gomp.c) nor
 * in the list below of entry points known to need no wrapper. Both sets of
 * names come from the dynamic symbol tables of the loaded objects, found
 * with dl_iterate_phdr (PT_DYNAMIC: DT_SYMTAB, DT_STRTAB, DT_STRSZ and the
 * symbol count from DT_HASH or DT_GNU_HASH), so no file is opened. The
 * program runs as before whatever the answer; gomp.c warns once.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "autobeat.h"

/*
 * GOMP_* entry points of libgomp that gomp.c does not wrap, on purpose.
 * Harmless: no beat or wait belongs inside them, or their construct is
 * recorded at another entry (a single's or a scope's closing GOMP_barrier,
 * a section's GOMP_sections_end, a critical's _start).
 * Known, not recorded (gomp.c's header says why): doacross waits (variadic),
 * taskloop, the pre-4.9 parallel ABI, teams.
 */
static const char *const gomp_harmless[] = {
    /* ends of constructs whose wait is recorded at their start */
    "GOMP_atomic_start", "GOMP_atomic_end", "GOMP_critical_end", "GOMP_critical_name_end",
    "GOMP_ordered_end",
    /* starts whose beat or wait is at the construct's end */
    "GOMP_single_start", "GOMP_scope_start", "GOMP_taskgroup_start",
    "GOMP_doacross_post", "GOMP_doacross_ull_post",
    /* bookkeeping: no waiting, no unit of work */
    "GOMP_taskyield", "GOMP_cancel", "GOMP_cancellation_point", "GOMP_alloc", "GOMP_free",
    "GOMP_error", "GOMP_warning", "GOMP_task_reduction_remap", "GOMP_taskgroup_reduction_register",
    "GOMP_taskgroup_reduction_unregister", "GOMP_workshare_task_reduction_unregister",
    "GOMP_add_alloc", "GOMP_is_alloc",
    /* offloading (target regions run on a device, or on the host as a region we see) */
    "GOMP_offload_register", "GOMP_offload_register_ver", "GOMP_offload_unregister",
    "GOMP_offload_unregister_ver", "GOMP_target", "GOMP_target_data", "GOMP_target_data_ext",
    "GOMP_target_end_data", "GOMP_target_enter_exit_data", "GOMP_target_ext", "GOMP_target_update",
    "GOMP_target_update_ext", "GOMP_target_map_indirect_ptr", "GOMP_interop",
    /* known, not recorded */
    "GOMP_doacross_wait", "GOMP_doacross_ull_wait", "GOMP_taskloop", "GOMP_taskloop_ull",
    "GOMP_parallel_start", "GOMP_parallel_end", "GOMP_parallel_loop_static_start",
    "GOMP_parallel_loop_dynamic_start", "GOMP_parallel_loop_guided_start",
    "GOMP_parallel_loop_runtime_start", "GOMP_parallel_sections_start", "GOMP_teams",
    "GOMP_teams4", "GOMP_teams_reg",
};

/* the plugin interface of offloading devices: called by plugins, not by programs */
#define GOMP_PLUGIN_PREFIX "GOMP_PLUGIN_"

static int gomp_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int gomp_in(const char *name, const char *const *sorted, size_t n)
{
    return n && bsearch(&name, sorted, n, sizeof *sorted, gomp_cmp) != NULL;
}

size_t hbt_gomp_unknown(const char **names, size_t n, const char **ours, size_t nours,
                        const char **out, size_t max)
{
    qsort(names, n, sizeof *names, gomp_cmp);
    qsort(ours, nours, sizeof *ours, gomp_cmp);
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        const char *s = names[i];
        if (strncmp(s, "GOMP_", 5) != 0 || (i > 0 && strcmp(s, names[i - 1]) == 0))
            continue;   /* not an entry point, or the same name at another version */
        if (strncmp(s, GOMP_PLUGIN_PREFIX, sizeof GOMP_PLUGIN_PREFIX - 1) == 0 ||
            gomp_in(s, ours, nours))
            continue;
        int harmless = 0;
        for (size_t k = 0; k < sizeof gomp_harmless / sizeof *gomp_harmless && !harmless; k++)
            harmless = strcmp(s, gomp_harmless[k]) == 0;
        if (harmless)
            continue;
        if (count < max)
            out[count] = s;
        count++;
    }
    return count;
}

/* ------------------------------------------------------------------ */
/* the dynamic symbol table of a loaded object                          */

struct gomp_exports {
    uintptr_t base;
    const char *prefix;
    const char **out;
    size_t max, n;
    int found;
};

/* A d_ptr of the dynamic section: glibc relocates them in place on most
 * machines, not on all (the section is read-only on some): absolute either way. */
static uintptr_t gomp_dptr(uintptr_t v, uintptr_t base)
{
    return v < base ? v + base : v;
}

/* The number of dynamic symbols from a DT_GNU_HASH table: one past the
 * highest index any bucket's chain reaches. */
static size_t gomp_gnu_hash_count(const uint32_t *h)
{
    uint32_t nbuckets = h[0], symoffset = h[1], bloom = h[2];
    const uint32_t *buckets = h + 4 + bloom * (sizeof(ElfW(Addr)) / 4);
    const uint32_t *chain = buckets + nbuckets;
    uint32_t last = 0;
    for (uint32_t b = 0; b < nbuckets; b++)
        if (buckets[b] > last)
            last = buckets[b];
    if (last < symoffset)
        return symoffset;
    while (!(chain[last - symoffset] & 1))
        last++;
    return (size_t)last + 1;
}

static int gomp_phdr_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct gomp_exports *x = arg;
    (void)size;
    if ((uintptr_t)info->dlpi_addr != x->base)
        return 0;
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (!dyn)
        return 0;   /* e.g. the vDSO at base 0 of a non-PIE program: keep looking */
    uintptr_t base = info->dlpi_addr;
    const ElfW(Sym) *sym = NULL;
    const char *str = NULL;
    size_t strsz = 0, nsyms = 0;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        switch (dyn->d_tag) {
        case DT_SYMTAB: sym = (const ElfW(Sym) *)gomp_dptr(dyn->d_un.d_ptr, base); break;
        case DT_STRTAB: str = (const char *)gomp_dptr(dyn->d_un.d_ptr, base); break;
        case DT_STRSZ: strsz = dyn->d_un.d_val; break;
        case DT_HASH: nsyms = ((const uint32_t *)gomp_dptr(dyn->d_un.d_ptr, base))[1]; break;
        case DT_GNU_HASH:
            if (!nsyms)
                nsyms = gomp_gnu_hash_count((const uint32_t *)gomp_dptr(dyn->d_un.d_ptr, base));
            break;
        default: break;
        }
    }
    x->found = 1;
    if (!sym || !str || !strsz)
        return 1;
    size_t plen = strlen(x->prefix);
    for (size_t i = 1; i < nsyms; i++) {
        const ElfW(Sym) *s = &sym[i];
        int type = ELF64_ST_TYPE(s->st_info), bind = ELF64_ST_BIND(s->st_info);
        if (s->st_shndx == SHN_UNDEF || s->st_name >= strsz ||
            (type != STT_FUNC && type != STT_GNU_IFUNC) || (bind != STB_GLOBAL && bind != STB_WEAK) ||
            ELF64_ST_VISIBILITY(s->st_other) != STV_DEFAULT)
            continue;
        const char *name = str + s->st_name;
        if (strnlen(name, strsz - s->st_name) == strsz - s->st_name || strncmp(name, x->prefix, plen) != 0)
            continue;
        if (x->n < x->max)
            x->out[x->n] = name;
        x->n++;
    }
    return 1;
}

size_t hbt_elf_exports(const void *addr, const char *prefix, const char **out, size_t max)
{
    Dl_info info;
    if (!addr || !dladdr(addr, &info))
        return 0;
    struct gomp_exports x = {.base = (uintptr_t)info.dli_fbase, .prefix = prefix, .out = out,
                             .max = max};
    /* dli_fbase is the object's load address for a shared object; for a non-PIE executable
     * it is its lowest mapping while dlpi_addr is 0 */
    dl_iterate_phdr(gomp_phdr_cb, &x);
    if (!x.found) {
        x.base = 0;
        dl_iterate_phdr(gomp_phdr_cb, &x);
    }
    return x.n < max ? x.n : max;
}

#define GOMP_MAX_NAMES 2048

size_t hbt_gomp_check(const void *real, const char **first, size_t max, const char **object)
{
    static const char *theirs[GOMP_MAX_NAMES], *ours[GOMP_MAX_NAMES];
    Dl_info info;
    *object = "libgomp";
    if (real && dladdr(real, &info) && info.dli_fname) {
        const char *slash = strrchr(info.dli_fname, '/');
        *object = slash ? slash + 1 : info.dli_fname;
    }
    size_t n = hbt_elf_exports(real, "GOMP_", theirs, GOMP_MAX_NAMES);
    size_t nours = hbt_elf_exports((const void *)hbt_gomp_check, "GOMP_", ours, GOMP_MAX_NAMES);
    return hbt_gomp_unknown(theirs, n, ours, nours, first, max);
}
