"""200 Python threads, each summing its own range; prints the total. Exit 0."""
import threading

results = [0] * 200


def work(k: int) -> None:
    results[k] = sum(range(k * 1000, (k + 1) * 1000))


threads = [threading.Thread(target=work, args=(k,)) for k in range(200)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(sum(results))
