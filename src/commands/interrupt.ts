/**
 * Interrupt Kernel: stop the running cell (a `KeyboardInterrupt` in the
 * kernel) while the kernel and its variables stay; the leak toast offers it
 * while a training cell climbs.
 */
import { CommandIDs } from '../tokens';
import { kernelArgs } from './args';
import type { ICommandContext } from './context';

/** Register Interrupt Kernel. */
export function addInterruptCommand(ctx: ICommandContext): void {
  const { monitor, trans } = ctx;
  const kernelOf = (args: Parameters<ICommandContext['modelFor']>[0]) => {
    const model = ctx.modelFor(args);
    const panel = model ? monitor.panelFor(model) : null;
    return panel?.sessionContext.session?.kernel ?? null;
  };
  ctx.commands.addCommand(CommandIDs.interruptKernel, {
    label: trans.__('Interrupt Kernel'),
    caption: trans.__(
      'Interrupt the running cell (KeyboardInterrupt): the kernel and its variables stay'
    ),
    describedBy: kernelArgs,
    isEnabled: args => !!kernelOf(args),
    execute: async args => {
      const kernel = kernelOf(args);
      if (!kernel) {
        return false;
      }
      await kernel.interrupt();
      return true;
    }
  });
}
