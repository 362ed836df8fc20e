/**
 * CUDA out of memory: one error toast per (kernel, cell) that failed with
 * CUDA out of memory, with the figures and what held memory; it stays until
 * closed. Setting: `warnOnOutOfMemory`.
 */
import { describeOom } from '../analysis/oom';
import type { IRuleContext, IToastRule } from './rule';

/** The OOM rule: Clean GPU, Restart kernel, What to try… (the diagnosis dialog). */
export function oomRule({ trans, actions }: IRuleContext): IToastRule {
  return {
    id: 'oom',
    policy: 'once',
    describes: 'event',
    onOutOfMemory: (model, oom, settings) => {
      if (!settings.warnOnOutOfMemory) {
        return null;
      }
      const kernelId = model.kernelId;
      return [
        {
          key: String(oom.executionCount ?? 'null'),
          type: 'error',
          message: describeOom(oom, trans),
          autoClose: false,
          actions: [
            actions.cleanGpu(kernelId),
            actions.restartKernel(kernelId),
            actions.whatToTry(oom)
          ]
        }
      ];
    }
  };
}
