# Session 18 call 9, run as `python3 .carry/dump_rr.py` at commit 5fc4f03 (it needs that commit's prototype in
# benchmarks/rr_reduce_gpu.py): the compiled binaries of the prototype and the landed register reduce, to $OUT.
import sys, os, json
sys.path[:0]=['benchmarks','kernels','.']
import torch, triton
import rr_reduce_gpu as b
from nalasr_kernels import nala_rr
from kernel_diag_gpu import _inputs
out=os.environ["OUT"]
q,k,v,_=_inputs(518400,"dense")
spec=triton.jit(nala_rr._fwd_reduce_rr.fn)
for name,kern in (("bench",None),("landed",nala_rr._fwd_reduce_rr),("spec",spec)):
    b.rr_state(k,v,16,128,kern); torch.cuda.synchronize()
    fn = b._fwd_reduce_rr if kern is None else kern
    for dev,cache in fn.device_caches.items():
        for key,c in cache[0].items():
            with open(f"{out}/{name}_{c.n_regs}.cubin","wb") as f: f.write(c.asm["cubin"])
            print(name, c.n_regs, c.n_spills, str(key)[:300])
