import concurrent.futures, ctypes, gc, os, sys, time
import numpy as np
sys.path.insert(0, "tests")
import ortops
from _scripts import load_script
model = load_script("make_models").recognizer(seq=7, inp=6, hidden=5, classes=4, seed=0).SerializeToString()
x = np.random.default_rng(0).standard_normal((7, 2, 6)).astype(np.float32)
page = os.sysconf("SC_PAGE_SIZE") / 2**20
rss = lambda: int(open("/proc/self/statm").read().split()[1]) * page
def one(_):
    s = ortops.InferenceSession(model, providers=["CPUExecutionProvider"]); s.run(None, {"X": x})
for threads in (1, 4):
    pool = concurrent.futures.ThreadPoolExecutor(threads)
    gc.collect(); ctypes.CDLL("libc.so.6").malloc_trim(0)
    for r in range(120):
        list(pool.map(one, range(threads)))
        if r % 20 == 19:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
            print(f"threads {threads} round {r+1}: RSS {rss():.1f} MB", flush=True)
    pool.shutdown()
