/**
 * Restart Kernel to Free GPU…: asks first, in a dialog that says what a
 * restart frees (all the kernel's VRAM, the CUDA context included, with the
 * figures of its latest sample; no VRAM where the kernel sees no GPU) and
 * that every variable is lost; then JupyterLab's own restart. Its caption
 * says the same.
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

/** What restarting the kernel of `model` frees and loses, one sentence (caption and dialog). */
function restartText(
  model: GpuKernelModel | null,
  trans: ICommandContext['trans']
): string {
  const { process, nonTorch } = restartReturns(model);
  if (process !== null && nonTorch !== null) {
    return trans.__(
      'Restart the kernel: frees all its VRAM (%1, of which %2 CUDA context and libraries that nothing else frees) and loses all variables',
      formatBytes(process),
      formatBytes(nonTorch)
    );
  }
  if (model?.hello && model.hello.devices.length === 0) {
    // no GPU visible to the kernel: nothing about VRAM to promise (issue 29)
    return trans.__(
      'Restart the kernel: frees all the memory of its process (it sees no GPU) and loses all variables'
    );
  }
  if (!model?.hello) {
    return trans.__(
      'Restart the kernel: frees all the memory of its process and loses all variables'
    );
  }
  return trans.__(
    'Restart the kernel: frees all VRAM, including the CUDA context, and loses all variables'
  );
}

/** Register Restart Kernel to Free GPU…. */
export function addRestartCommand(ctx: ICommandContext): void {
  const { monitor, trans } = ctx;
  ctx.commands.addCommand(CommandIDs.restartKernel, {
    label: trans.__('Restart Kernel to Free GPU…'),
    caption: args => restartText(ctx.modelFor(args), trans),
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
      const accepted = await ctx.confirm(
        trans.__('Restart the kernel of %1?', panel.title.label),
        `${restartText(model, trans)}.`,
        trans.__('Restart')
      );
      if (!accepted) {
        return false;
      }
      await panel.sessionContext.restartKernel();
      return true;
    }
  });
}
