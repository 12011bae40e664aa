/*
 * fortran.c -- what the generated Fortran wrappers (tools/gen_fortran.py)
 * need beside the C ones: the real Fortran PMPI functions, and Fortran
 * arguments seen as C values for the counting.
 */
#include "wrap_mpi.h"

#include <dlfcn.h>

void *hbp_fortran_real(void **cache, const char *name)
{
    void *p = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
    if (p || !name)
        return p;
    p = dlsym(RTLD_NEXT, name);
    if (!p)
        p = dlsym(RTLD_DEFAULT, name);
    if (!p) {
        hbp_warn("the MPI Fortran library has no %s; the call returns MPI_ERR_INTERN", name);
        return NULL;
    }
    __atomic_store_n(cache, p, __ATOMIC_RELEASE);
    return p;
}

/* Open MPI's Fortran MPI_IN_PLACE is the address of a common block, under
 * any of the four symbol spellings; the dynamic linker makes them one. */
const void *hbp_fortran_buf(const void *p)
{
    static const void *in_place[4];
    static int looked;
    static const char *const names[4] = {
        "mpi_fortran_in_place_", "mpi_fortran_in_place", "mpi_fortran_in_place__",
        "MPI_FORTRAN_IN_PLACE",
    };
    if (!__atomic_load_n(&looked, __ATOMIC_ACQUIRE)) {
        for (int i = 0; i < 4; i++)
            in_place[i] = dlsym(RTLD_DEFAULT, names[i]);
        __atomic_store_n(&looked, 1, __ATOMIC_RELEASE);
    }
    for (int i = 0; p && i < 4; i++)
        if (p == in_place[i])
            return MPI_IN_PLACE;
    return p;
}

MPI_Datatype *hbp_fortran_types(const void *f, int n)
{
    if (!f || n <= 0)
        return NULL;
    MPI_Datatype *t = malloc((size_t)n * sizeof *t);
    if (!t)
        return NULL;
    const MPI_Fint *h = f;
    for (int i = 0; i < n; i++)
        t[i] = PMPI_Type_f2c(h[i]);
    return t;
}
