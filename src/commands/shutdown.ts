/**
 * Shut down kernel…: another kernel of this server that holds the GPU (or,
 * from the palette, one the user picks), after a dialog that says what it
 * frees. Not JupyterLab's "Shut Down Kernel", which shuts down the current
 * notebook's kernel without a dialog.
 */
import { Notification } from '@jupyterlab/apputils';
import type { Kernel } from '@jupyterlab/services';
import type { IServerKernel } from '../server-kernel-types';
import { CommandIDs } from '../tokens';
import { shutdownArgs } from './args';
import type { ICommandContext } from './context';
import { chooseKernel, kernelState, kernelTitle, vramOf } from './kernel-names';

/** The kernel of the server's last answer with id `id`; null when none or not a string. */
function serverKernel(ctx: ICommandContext, id: unknown): IServerKernel | null {
  return typeof id === 'string'
    ? (ctx.monitor.serverKernels.answer?.kernels.find(k => k.id === id) ?? null)
    : null;
}

/** The command's caption: what shutting down the kernel `kernelId` frees. */
function shutdownCaption(ctx: ICommandContext, kernelId: unknown): string {
  const { trans } = ctx;
  const kernel = serverKernel(ctx, kernelId);
  if (!kernel) {
    return trans.__(
      'Choose one of this server’s kernels and shut it down after a confirmation: frees all its VRAM, its variables are lost'
    );
  }
  const vram = vramOf(ctx, kernel.id);
  return vram
    ? trans.__(
        'Ask, then shut down the kernel of %1: frees %2, its variables are lost',
        kernelTitle(ctx, kernel),
        vram
      )
    : trans.__(
        'Ask, then shut down the kernel of %1: frees all its VRAM, its variables are lost',
        kernelTitle(ctx, kernel)
      );
}

/** The server's kernels as they are now (fetched again); null, after a toast, when they cannot be listed. */
async function currentKernels(
  ctx: ICommandContext
): Promise<ReadonlyArray<IServerKernel> | null> {
  const { trans } = ctx;
  const state = await ctx.monitor.serverKernels.refresh(0);
  if (state.status === 'ok') {
    return state.answer.kernels;
  }
  Notification.warning(
    state.status === 'missing'
      ? trans.__(
          'Shut down kernel: this server does not list its kernels (the jupyterlab_gpu_hygiene server extension is not enabled).'
        )
      : trans.__(
          'Shut down kernel: the server’s kernel list could not be read; nothing was shut down.'
        ),
    { autoClose: 5000 }
  );
  return null;
}

/** The kernel `kernelId` names among `kernels` (a toast when it is gone), else the user's pick. */
async function pickKernel(
  ctx: ICommandContext,
  kernelId: unknown,
  kernels: ReadonlyArray<IServerKernel>
): Promise<IServerKernel | null> {
  if (kernelId === undefined) {
    return chooseKernel(ctx, kernels);
  }
  const kernel = kernels.find(k => k.id === kernelId) ?? null;
  if (!kernel) {
    const { trans } = ctx;
    Notification.warning(
      trans.__(
        'That kernel no longer runs on this server; nothing was shut down.'
      ),
      { autoClose: 5000 }
    );
  }
  return kernel;
}

/** Ask whether to shut down `kernel`, saying what it frees and whether it is this notebook's own. */
function confirmShutdown(
  ctx: ICommandContext,
  kernel: IServerKernel
): Promise<boolean> {
  const { trans } = ctx;
  const title = kernelTitle(ctx, kernel);
  const current = ctx.monitor.currentModel?.kernelId === kernel.id;
  const vram = vramOf(ctx, kernel.id);
  const frees = vram
    ? trans.__('it frees %1 and all its variables are lost.', vram)
    : trans.__(
        'it frees all the VRAM it holds (how much is not known here) and all its variables are lost.'
      );
  return ctx.confirm(
    current
      ? trans.__('Shut down this notebook’s own kernel (%1)?', title)
      : trans.__('Shut down the kernel of %1?', title),
    current
      ? trans.__(
          'This is the kernel of the notebook you are working in, %1 (%2). Shutting it down stops it: %3 The notebook stays open without a kernel; start one to run it again.',
          title,
          kernelState(ctx, kernel),
          frees
        )
      : trans.__(
          'The kernel of %1 (%2) will be shut down: %3 The notebook file is not changed; start a new kernel to run it again.',
          title,
          kernelState(ctx, kernel),
          frees
        ),
    trans.__('Shut down')
  );
}

/** Shut down `kernel` through `manager`; a toast when it fails; the server's list is fetched again either way. */
async function shutDown(
  ctx: ICommandContext,
  manager: Pick<Kernel.IManager, 'shutdown'>,
  kernel: IServerKernel
): Promise<boolean> {
  try {
    await manager.shutdown(kernel.id);
  } catch (reason) {
    const { trans } = ctx;
    Notification.error(
      trans.__(
        'The kernel of %1 could not be shut down: %2',
        kernelTitle(ctx, kernel),
        reason instanceof Error ? reason.message : String(reason)
      ),
      { autoClose: 8000 }
    );
    return false;
  } finally {
    void ctx.monitor.serverKernels.refresh(0);
  }
  return true;
}

/** Register Shut down kernel…. */
export function addShutdownCommand(ctx: ICommandContext): void {
  const { monitor, trans } = ctx;
  ctx.commands.addCommand(CommandIDs.shutdownKernel, {
    // Not JupyterLab's "Shut Down Kernel" (the current notebook's, no dialog):
    // from the palette it lets the user choose one of the server's kernels.
    label: args =>
      args.kernelId === undefined
        ? trans.__('Shut Down a Kernel of This Server…')
        : trans.__('Shut Down Kernel…'),
    caption: args => shutdownCaption(ctx, args.kernelId),
    describedBy: shutdownArgs,
    isEnabled: args =>
      !!ctx.kernels &&
      monitor.serverKernels.state.status !== 'missing' &&
      (args.kernelId === undefined ||
        monitor.serverKernels.state.status !== 'ok' ||
        serverKernel(ctx, args.kernelId) !== null),
    execute: async args => {
      const manager = ctx.kernels;
      if (!manager) {
        return false;
      }
      // The answer as it is now: the dialog names what the server runs.
      const kernels = await currentKernels(ctx);
      const kernel = kernels && (await pickKernel(ctx, args.kernelId, kernels));
      if (!kernel || !(await confirmShutdown(ctx, kernel))) {
        return false;
      }
      return shutDown(ctx, manager, kernel);
    }
  });
}
