/**
 * Restart Kernel to Free GPU…: JupyterLab's own restart, with its
 * confirmation; its caption says how much VRAM it returns.
 */
import { formatBytes } from '../analysis/format';
import type { GpuKernelModel } from '../model';
import { CommandIDs } from '../tokens';
import { kernelArgs } from './args';
import type { ICommandContext } from './context';

/**
 * What restarting a kernel returns, from its latest sample: this process's
 * VRAM on every device (NVML) and the part of it only a restart frees (the
 * CUDA context and libraries), bytes; null where not measured.
 */
export function restartReturns(model: GpuKernelModel | null): {
  process: number | null;
  nonTorch: number | null;
} {
  const devices = model?.latestSample?.devices ?? [];
  const total = (values: Array<number | null>): number | null =>
    values.some(v => v !== null)
      ? values.reduce<number>((sum, v) => sum + (v ?? 0), 0)
      : null;
  return {
    process: total(devices.map(d => d.process)),
    nonTorch: total(devices.map(d => d.nonTorch))
  };
}

/** Register Restart Kernel to Free GPU…. */
export function addRestartCommand(ctx: ICommandContext): void {
  const { monitor, trans } = ctx;
  ctx.commands.addCommand(CommandIDs.restartKernel, {
    label: trans.__('Restart Kernel to Free GPU…'),
    caption: args => {
      const { process, nonTorch } = restartReturns(ctx.modelFor(args));
      if (process !== null && nonTorch !== null) {
        return trans.__(
          'Restart the kernel: frees all its VRAM (%1, of which %2 CUDA context and libraries that nothing else frees) and loses all variables',
          formatBytes(process),
          formatBytes(nonTorch)
        );
      }
      return trans.__(
        'Restart the kernel: frees all VRAM, including the CUDA context, and loses all variables'
      );
    },
    describedBy: kernelArgs,
    isEnabled: args => {
      const model = ctx.modelFor(args);
      return !!model && !!monitor.panelFor(model);
    },
    execute: async args => {
      const model = ctx.modelFor(args);
      const panel = model ? monitor.panelFor(model) : null;
      if (!panel) {
        return false;
      }
      if (ctx.sessionDialogs) {
        return ctx.sessionDialogs.restart(panel.sessionContext);
      }
      await panel.sessionContext.restartKernel();
      return true;
    }
  });
}
