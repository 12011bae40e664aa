"""gen_fortran.py -- the Fortran entry points of libhbprof's MPI wrappers (gen_wrappers.py calls it).

Open MPI's Fortran bindings call the C PMPI_ functions directly, so a Fortran program never
reaches the C MPI_ wrappers. This module wraps the Fortran entry points themselves, the way
mpiP and Score-P do:

  mpif.h, use mpi     mpi_send_ (and the spellings mpi_send__, mpi_send, MPI_SEND)
  use mpi_f08         mpi_send_f08_

Each calls the library's own Fortran PMPI twin (pmpi_send_, pmpi_send_f08_), found with
dlsym(RTLD_NEXT) on first use, with every argument unchanged, so Open MPI keeps all of the
Fortran semantics (MPI_IN_PLACE, MPI_STATUS_IGNORE, strings, status conversion). Around
the call the wrapper does what the C wrapper of the same line does: enter, beat, count by
its class, leave. Only the counting reads arguments: the list's byte expressions are
evaluated over C values converted from the Fortran ones (handles with PMPI_*_f2c, the
Fortran MPI_IN_PLACE to the C one), so one expression serves both languages.

The Fortran argument list follows from the C prototype (the MPI standard's rule, which
Open MPI's prototypes_mpi.h follows): one pointer per C parameter (a choice buffer is its
address, or a descriptor's, passed on untouched), then the error code (optional in
mpi_f08: NULL when absent), then one hidden length per character argument, by value.
MPI_Init and MPI_Init_thread drop argc and argv. A spelling is wrapped only when the
installed Fortran libraries export it and its PMPI twin (nm -D, --fortran-symbols).
"""

from __future__ import annotations

import re

from gen_wrappers import MPI_CLASSES, Entry, ListError, Param, Prototype, count_statement, wrapper_body

# C handle type -> its Fortran-to-C conversion
F2C = {"MPI_Comm": "PMPI_Comm_f2c", "MPI_Datatype": "PMPI_Type_f2c", "MPI_Op": "PMPI_Op_f2c",
       "MPI_File": "PMPI_File_f2c", "MPI_Info": "PMPI_Info_f2c", "MPI_Group": "PMPI_Group_f2c",
       "MPI_Win": "PMPI_Win_f2c", "MPI_Request": "PMPI_Request_f2c", "MPI_Message": "PMPI_Message_f2c"}
# Fortran arguments of these C functions: the C parameters from this index on
DROPPED_LEADING = {"MPI_Init": 2, "MPI_Init_thread": 2}


def spellings(name: str, symbols: set[str]) -> tuple[list[str], str | None, str | None, str | None]:
    """(the mpif.h spellings the library exports, their PMPI twin, the mpi_f08 name, its twin)."""
    lower, upper = name.lower(), name.upper()
    f77 = [n for n in (lower + "_", lower + "__", lower, upper) if n in symbols]
    twin = next((p for p in ("p" + lower + "_", "p" + lower + "__", "p" + lower, "P" + upper) if p in symbols), None)
    if twin is None:
        f77 = []
    f08, twin08 = lower + "_f08_", "p" + lower + "_f08_"
    if f08 not in symbols or twin08 not in symbols:
        f08 = twin08 = None
    return f77, twin, f08, twin08


def fortran_params(e: Entry, proto: Prototype) -> tuple[list[Param], int]:
    """(the C parameters that have a Fortran argument, the number of hidden string lengths)."""
    params = list(proto.params[DROPPED_LEADING.get(e.name, 0):])
    strings = sum(1 for p in params if "char" in p.type_tokens)
    return params, strings


def conversions(e: Entry, params: list[Param]) -> tuple[str, str]:
    """C locals named as the list's parameters, converted from the Fortran arguments a1, a2, ...
    (only those the counting statement uses); and what frees them."""
    stmt = count_statement(e) + (" comm" if e.cls == "boundary" else "") + (" errorcode" if e.cls == "abort" else "")
    used = [(i, p) for i, p in enumerate(params) if re.search(rf"\b{re.escape(p.name)}\b", stmt)]
    first, later, cleanup = [], [], []
    for i, p in used:
        arg, n = f"a{i + 1}", p.name
        base = tuple(t for t in p.type_tokens if t != "const")
        if base == ("int",):
            first.append(f"int {n} = (int)*(const MPI_Fint *){arg};")
        elif len(base) == 1 and base[0] in F2C:
            first.append(f"{base[0]} {n} = {F2C[base[0]]}(*(const MPI_Fint *){arg});")
        elif len(base) == 1 and base[0] in ("MPI_Aint", "MPI_Offset", "MPI_Count"):
            first.append(f"{base[0]} {n} = *(const {base[0]} *){arg};")
        elif base == ("void", "*"):
            first.append(f"const void *{n} = hbp_fortran_buf({arg});")
        elif base == ("int", "*"):
            first.append(f"const int *{n} = (const int *){arg};")
        elif base == ("MPI_Datatype", "*") and any(q.name == "comm" for _, q in used):
            later.append(f"MPI_Datatype *{n} = hbp_fortran_types({arg}, csize(comm));")
            cleanup.append(f"free({n});")
        else:
            raise ListError(f"{e.name}: the Fortran wrapper cannot convert parameter {p.name} "
                            f"({p.type_text()}) for the counting; teach gen_fortran.conversions() it")
    ind = "        "
    return "".join(ind + s + "\n" for s in first + later), "".join(ind + s + "\n" for s in cleanup)


def emit_fortran(e: Entry, proto: Prototype, index: int | None, symbols: set[str]) -> str:
    """The Fortran entry points of e ("" when the Fortran libraries have none)."""
    f77, twin, f08, twin08 = spellings(e.name, symbols)
    if not f77 and not f08:
        return ""
    params, strings = fortran_params(e, proto)
    sig = "".join(f"void *a{i + 1}, " for i in range(len(params))) + "MPI_Fint *ierr" + \
        "".join(f", size_t l{i + 1}" for i in range(strings))
    args = "".join(f"a{i + 1}, " for i in range(len(params))) + "ierr" + \
        "".join(f", l{i + 1}" for i in range(strings))
    ptypes = ", ".join(["void *"] * len(params) + ["MPI_Fint *"] + ["size_t"] * strings)
    convert, cleanup = conversions(e, params) if MPI_CLASSES[e.cls].call or e.cls == "abort" else ("", "")
    real77 = f'"{twin}"' if twin else "NULL"
    real08 = f'"{twin08}"' if twin08 else "NULL"
    out = [f"typedef void (*hbp_ft_{e.name})({ptypes});",
           f"static void *hbp_fp_{e.name}[2];",
           f"static void hbp_fw_{e.name}(unsigned v, {sig})",
           "{",
           f"    hbp_ft_{e.name} real = (hbp_ft_{e.name})hbp_fortran_real(&hbp_fp_{e.name}[v], "
           f"v ? {real08} : {real77});",
           "    MPI_Fint own_ierr = MPI_SUCCESS;",
           "    if (!ierr)",
           "        ierr = &own_ierr;   /* use mpi_f08: ierror is optional */",
           "    if (!real) {",
           "        *ierr = MPI_ERR_INTERN;",
           "        return;",
           "    }"]
    body = wrapper_body(e, index, f"real({args});", "    int rc = (int)*ierr;\n    (void)rc;\n", convert, cleanup)
    out.append(body.rstrip("\n"))
    out.append("}")
    for k, name in enumerate(f77):
        out += [f"HBP_EXPORT void hbp_f77_{e.name}_{k}({sig}) __asm__(\"{name}\");",
                f"void hbp_f77_{e.name}_{k}({sig})", "{", f"    hbp_fw_{e.name}(0, {args});", "}"]
    if f08:
        out += [f"HBP_EXPORT void hbp_f08_{e.name}({sig}) __asm__(\"{f08}\");",
                f"void hbp_f08_{e.name}({sig})", "{", f"    hbp_fw_{e.name}(1, {args});", "}"]
    return "/* its Fortran entry points */\n" + "\n".join(out) + "\n"
