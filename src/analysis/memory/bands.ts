/**
 * The bands of a kernel's memory on one device: live tensors, PyTorch's
 * cache and what is not PyTorch's (the CUDA context and libraries). Cache and
 * context are not leaks: the cache is free for this kernel (and returned by
 * `torch.cuda.empty_cache()`), the context is freed only with the process.
 */
import type { IDeviceSample } from '../../protocol';

/** Bytes of each band; `null` where not measurable. */
export interface IMemoryBands {
  /** PyTorch allocated: live tensors. */
  allocated: number | null;
  /** `reserved − allocated`: kept by PyTorch's caching allocator, free for this kernel. */
  cached: number | null;
  /** `process − reserved` (NVML minus torch): CUDA context, cuBLAS/cuDNN, other allocators. */
  nonTorch: number | null;
}

/**
 * The bands of one device sample. `cached` falls back to
 * `reserved − allocated` when the agent did not send it.
 */
export function memoryBands(device: IDeviceSample): IMemoryBands {
  const cached =
    device.cached ??
    (device.reserved !== null && device.allocated !== null
      ? Math.max(0, device.reserved - device.allocated)
      : null);
  return {
    allocated: device.allocated,
    cached,
    nonTorch: device.nonTorch ?? null
  };
}
