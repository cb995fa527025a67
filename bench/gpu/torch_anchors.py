"""PyTorch's figures on the lease's GPU, the second anchor beside cuda_bench's
cuBLAS rows (bench/gpu/NOTES.md): matmul (float16, bfloat16 at 4096^3 and
8192^3; float32 at 4096^3 with TF32 off), a device-to-device copy of 1 GiB,
elementwise add over 1 GiB float32, softmax and layer_norm over rows. Random
inputs, CUDA events, the median of the timed runs after a warm-up."""
import statistics
import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = torch.device("cuda:0")
print(torch.cuda.get_device_name(0), "torch", torch.__version__, "cuda", torch.version.cuda)


def median_ms(fn, runs=20, warm=3):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


for dt, n in ((torch.float16, 4096), (torch.bfloat16, 4096), (torch.float16, 8192),
              (torch.bfloat16, 8192), (torch.float32, 4096)):
    a = torch.rand(n, n, device=dev, dtype=dt) * 2 - 1
    b = torch.rand(n, n, device=dev, dtype=dt) * 2 - 1
    ms = median_ms(lambda: torch.matmul(a, b))
    print(f"torch matmul {str(dt)[6:]:9s} {n:5d}: {ms:8.3f} ms {2 * n**3 / ms / 1e9:8.1f} TFLOP/s")
    del a, b

n = 1 << 28
x = torch.rand(n, device=dev)
y = torch.rand(n, device=dev)
z = torch.empty_like(x)
ms = median_ms(lambda: z.copy_(x))
print(f"torch copy 1 GiB: {ms:.3f} ms {2 * n * 4 / ms / 1e6:.0f} GB/s (read + write)")
ms = median_ms(lambda: torch.add(x, y, out=z))
print(f"torch add 1 GiB: {ms:.3f} ms {3 * n * 4 / ms / 1e6:.0f} GB/s")
del x, y, z
rows = torch.rand(16384, 8192, device=dev) * 4 - 2
ms = median_ms(lambda: torch.softmax(rows, dim=-1))
print(f"torch softmax 16384x8192 f32: {ms:.3f} ms {2 * rows.numel() * 4 / ms / 1e6:.0f} GB/s")
w = torch.rand(8192, device=dev)
ms = median_ms(lambda: torch.nn.functional.layer_norm(rows, (8192,), w, w))
print(f"torch layer_norm 16384x8192 f32: {ms:.3f} ms {2 * rows.numel() * 4 / ms / 1e6:.0f} GB/s")
ms = median_ms(lambda: torch.sum(rows, dim=-1))
print(f"torch sum rows 16384x8192 f32: {ms:.3f} ms {rows.numel() * 4 / ms / 1e6:.0f} GB/s")
