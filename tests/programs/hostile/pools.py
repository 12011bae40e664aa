"""A fork pool of 8 and a spawn pool of 2 squaring numbers; prints both results, then
exits with status 3."""
import multiprocessing as mp
import sys


def square(x: int) -> int:
    return x * x


if __name__ == "__main__":
    with mp.get_context("fork").Pool(8) as pool:
        print(sum(pool.map(square, range(2000))))
    with mp.get_context("spawn").Pool(2) as pool:
        print(sum(pool.map(square, range(200))))
    sys.stdout.flush()
    sys.exit(3)
