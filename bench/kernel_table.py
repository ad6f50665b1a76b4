"""GPU kernel times of a call as the GPU ran them, read through torch.profiler (CUPTI), so Tripy's
CUDA-graph replays and torch's are seen alike: the kernels of every library in the process count.

report(label, fn, sync) runs fn a few times under the profiler and prints per-call kernel count,
summed kernel time, and the costliest kernels by name.
"""


def report(label, fn, sync, calls=5, top=10):
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        sync()
    by_name = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and e.device_time_total > 0:
            n, t = by_name.get(e.name, (0, 0.0))
            by_name[e.name] = (n + 1, t + e.device_time_total)
    total = sum(t for _, t in by_name.values()) / calls
    count = sum(n for n, _ in by_name.values()) / calls
    print(f"\nkernels {label}: {count:.0f} per call, {total / 1e3:.3f} ms of kernel time per call (CUPTI)")
    for name, (n, t) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"  {t / calls / 1e3:8.3f} ms {n / calls:5.0f}x  {name[:100]}")
