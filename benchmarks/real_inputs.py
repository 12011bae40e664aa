"""The seeded inputs of the real programs that benchmarks/eval_npb.py and eval_monitor.py run
with `--command` (README, "A program from Debian"): written into DIR, each the same bytes on
every machine.

    python benchmarks/real_inputs.py DIR

  prot2.fa    12,000 proteins in 800 families, for cd-hit
              (cd-hit -i prot2.fa -o cl.fa -c 0.8 -n 5 -T 2 -M 2000)
  aln150.fa   150 proteins of 400 residues, for Clustal Omega
              (clustalo -i aln150.fa -o out.aln --threads 2 --force)
  m30.fa      the first 30 of them, for MUSCLE 5 (muscle -align m30.fa -output out.afa -threads 2)
  tree100.fa  100 proteins of 250 residues, for FastTree (fasttreeMP -quiet -out tree.nwk tree100.fa)
  dna100.phy  100 DNA sequences of 4,000 sites evolved along a random tree (Jukes-Cantor), for
              IQ-TREE (iqtree2 -s dna100.phy -m GTR+G4 -T 2 -redo -quiet -seed 1 -fast)
  db*         prot2.fa as an mmseqs2 database, where mmseqs is installed (mmseqs createdb), for
              mmseqs2's prefilter (mmseqs-avx2 prefilter db db pref --threads 2 -s 2; the binary
              of this CPU's instructions, which the `mmseqs` script picks: the script itself is bash)
  md.tpr      a box of 1,378 SPC/E water molecules (3.5 nm, OPLS-AA, PME, 2,000 steps of 2 fs), for
              GROMACS, where gmx is installed (gmx solvate and grompp; run with gmx -quiet mdrun -s
              md.tpr -ntmpi 1 -ntomp 2 -nb cpu -deffnm run -pin off; seeded: the same run on every
              machine, as `gmx dump` shows it, though grompp leaves three bytes of the file differing)
  ring.cir    a ring oscillator of 201 CMOS inverters (BSIM4, ngspice's default level-54 model
              cards), a 20 ns transient, for ngspice, whose BSIM4 device loads run in an OpenMP loop
              (OMP_NUM_THREADS=2 ngspice -b ring.cir; about 4.5 s on 2 CPUs)
"""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
from pathlib import Path

AA = "ACDEFGHIKLMNPQRSTVWY"


def proteins_in_families(path: Path) -> None:
    r = random.Random(11)
    n = 0
    with open(path, "w") as f:
        for _ in range(800):
            base = [r.choice(AA) for _ in range(r.randint(150, 450))]
            for _ in range(15):
                f.write(f">s{n}\n" + "".join(c if r.random() > 0.12 else r.choice(AA) for c in base) + "\n")
                n += 1


def proteins_of_one_family(path: Path, seed: int, count: int, length: int, change: float, name: str) -> None:
    r = random.Random(seed)
    base = [r.choice(AA) for _ in range(length)]
    with open(path, "w") as f:
        for m in range(count):
            f.write(f">{name}{m}\n" + "".join(c if r.random() > change else r.choice(AA) for c in base) + "\n")


def dna_along_a_tree(path: Path, taxa: int = 100, sites: int = 4000, seed: int = 2026) -> None:
    """Sequences of a random binary tree's leaves: a random root sequence, each branch (length
    0.02-0.15 substitutions a site) changing a site to a random base with the Jukes-Cantor
    probability 3/4 (1 - exp(-4/3 b))."""
    import numpy as np

    rng = np.random.default_rng(seed)
    seqs = {0: rng.integers(0, 4, sites)}
    tips, nxt = [0], 1
    while len(tips) < taxa:
        parent = tips.pop(int(rng.integers(len(tips))))
        for _ in range(2):
            b = rng.uniform(0.02, 0.15)
            s = seqs[parent].copy()
            m = rng.random(sites) < 0.75 * (1 - np.exp(-4 / 3 * b))
            s[m] = rng.integers(0, 4, int(m.sum()))
            seqs[nxt] = s
            tips.append(nxt)
            nxt += 1
    with open(path, "w") as f:
        f.write(f"{taxa} {sites}\n")
        for i, t in enumerate(tips):
            f.write(f"t{i:03d}  " + "".join("ACGT"[x] for x in seqs[t]) + "\n")


GROMACS_MDP = """integrator = md
dt = 0.002
nsteps = 2000
cutoff-scheme = Verlet
nstlist = 10
coulombtype = PME
rcoulomb = 1.0
rvdw = 1.0
tcoupl = v-rescale
tc-grps = System
tau-t = 0.1
ref-t = 300
gen-vel = yes
gen-seed = 2026
ld-seed = 2026
constraints = h-bonds
nstenergy = 500
nstlog = 500
"""


def ring_oscillator(path: Path, stages: int = 201) -> None:
    """ring.cir: `stages` inverters in a ring, each a BSIM4 pair and a load of 5 fF; the wave that
    runs round the ring moves the devices' work from one thread's share of the loop to the
    other's as it goes."""
    lines = ["* ring oscillator of BSIM4 inverters", ".model nch nmos level=54 version=4.8",
             ".model pch pmos level=54 version=4.8", "vdd vdd 0 1.0"]
    for i in range(stages):
        a, b = f"n{i}", f"n{(i + 1) % stages}"
        lines += [f"mp{i} {b} {a} vdd vdd pch w=2u l=0.1u", f"mn{i} {b} {a} 0 0 nch w=1u l=0.1u", f"c{i} {b} 0 5f"]
    lines += [".ic v(n0)=0", ".tran 10p 20n", ".print tran v(n0)", ".end"]
    path.write_text("\n".join(lines) + "\n")


def water_box(out: Path) -> None:
    """md.tpr: GROMACS's own spc216 water, solvated into a 3.5 nm box, with the mdp above."""
    def gmx(*args: str) -> None:
        subprocess.run(["gmx", "-quiet", *args], cwd=out, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    gmx("solvate", "-cs", "spc216.gro", "-box", "3.5", "3.5", "3.5", "-o", "water.gro")
    molecules = (len((out / "water.gro").read_text().splitlines()) - 3) // 3
    (out / "topol.top").write_text('#include "oplsaa.ff/forcefield.itp"\n#include "oplsaa.ff/spce.itp"\n'
                                   f"[ system ]\nwater\n[ molecules ]\nSOL {molecules}\n")
    (out / "md.mdp").write_text(GROMACS_MDP)
    gmx("grompp", "-f", "md.mdp", "-c", "water.gro", "-p", "topol.top", "-o", "md.tpr")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python benchmarks/real_inputs.py DIR", file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    proteins_in_families(out / "prot2.fa")
    proteins_of_one_family(out / "aln150.fa", 150, 150, 400, 0.3, "a")
    proteins_of_one_family(out / "m30.fa", 150, 30, 400, 0.3, "a")   # (aln150.fa's first 30)
    proteins_of_one_family(out / "tree100.fa", 100, 100, 250, 0.25, "t")
    dna_along_a_tree(out / "dna100.phy")
    ring_oscillator(out / "ring.cir")
    wrote = "prot2.fa, aln150.fa, m30.fa, tree100.fa, dna100.phy and ring.cir"
    if shutil.which("mmseqs"):
        for old in out.glob("db*"):
            old.unlink()
        subprocess.run(["mmseqs", "createdb", "prot2.fa", "db"], cwd=out, check=True, stdout=subprocess.DEVNULL)
        wrote = "prot2.fa, aln150.fa, m30.fa, tree100.fa, dna100.phy, ring.cir and the mmseqs2 database db"
    if shutil.which("gmx"):
        water_box(out)
        wrote += " and GROMACS's md.tpr"
    print(f"wrote {wrote} in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
