/**
 * CUDA out of memory: one error toast per (kernel, cell) that failed with
 * CUDA out of memory, with the figures and what held memory; it stays until
 * closed. When the user's own idle kernels held most of the device, the
 * toast says so and offers to shut the largest one down first. Setting:
 * `warnOnOutOfMemory`.
 */
import { describeOom } from '../analysis/oom/oom-diagnosis';
import { oomKernelsOf } from '../other-kernels';
import type { IRuleContext, IToastRule } from './rule';

/**
 * The OOM rule: Shut down idle kernel… (when the user's idle kernels held
 * most of the device), Clean GPU, Restart kernel, What to try… (the
 * diagnosis dialog).
 */
export function oomRule({ trans, actions, monitor }: IRuleContext): IToastRule {
  return {
    id: 'oom',
    policy: 'once',
    describes: 'event',
    onOutOfMemory: (model, oom, settings) => {
      if (!settings.warnOnOutOfMemory) {
        return null;
      }
      const kernelId = model.kernelId;
      const kernels = monitor ? oomKernelsOf(model, oom, monitor) : null;
      const largest = kernels?.mostly
        ? kernels.kernels.find(k => k.kernel.inServer)
        : undefined;
      return [
        {
          key: String(oom.executionCount ?? 'null'),
          type: 'error',
          message: describeOom(oom, trans, kernels),
          autoClose: false,
          actions: [
            ...(largest ? [actions.shutDownKernel(largest.kernel.id)] : []),
            actions.cleanGpu(kernelId),
            actions.restartKernel(kernelId),
            actions.whatToTry(oom, () =>
              monitor ? oomKernelsOf(model, oom, monitor) : null
            )
          ]
        }
      ];
    }
  };
}
