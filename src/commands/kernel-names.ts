/**
 * How Shut down kernel… names a kernel of this server to the user: its
 * notebook, the VRAM it holds, its state, and the dialog that picks one.
 */
import { InputDialog, Notification } from '@jupyterlab/apputils';
import { formatBytes, formatIdle } from '../analysis/format';
import {
  baseName,
  kernelStateLabel,
  notebookOf
} from '../analysis/processes/kernel-labels';
import { kernelOnGpu } from '../other-kernels';
import type { IServerKernel } from '../server-kernel-types';
import type { ICommandContext } from './context';

/** A server kernel's name for the user: its notebook's file name, else its first session, else its id. */
export function kernelTitle(
  ctx: ICommandContext,
  kernel: IServerKernel
): string {
  const notebook = notebookOf(kernel.sessions, null);
  const first = kernel.sessions[0];
  const { trans } = ctx;
  return notebook
    ? baseName(notebook)
    : first?.name ||
        first?.path ||
        trans.__('kernel %1', kernel.id.slice(0, 8));
}

/** The VRAM a kernel holds, in words ("8.0 GiB of VRAM"), as the agents see it; null when not known. */
export function vramOf(ctx: ICommandContext, kernelId: string): string | null {
  const held = kernelOnGpu(ctx.monitor, kernelId);
  const { trans } = ctx;
  return held && (held.bytes > 0 || held.known)
    ? trans.__('%1 of VRAM', formatBytes(held.bytes))
    : null;
}

/**
 * "python3, idle for 25 min": the server's state, and how long it has been
 * idle where the browser knows its last cell (the server's last activity
 * also counts the agent's own messages, so it is not used here).
 */
export function kernelState(
  ctx: ICommandContext,
  kernel: IServerKernel
): string {
  const { trans } = ctx;
  if (kernel.executionState !== 'idle') {
    return trans.__(
      '%1, %2',
      kernel.name,
      kernelStateLabel(kernel.executionState, trans)
    );
  }
  const info = kernelOnGpu(ctx.monitor, kernel.id)?.kernel;
  return info?.idleSource === 'cells' && info.idleSeconds !== null
    ? trans.__('%1, idle for %2', kernel.name, formatIdle(info.idleSeconds))
    : trans.__('%1, idle', kernel.name);
}

/**
 * The dialog's items for `sorted`: "title · this notebook · state · VRAM",
 * with the id's start appended where two would read the same.
 */
function kernelLabels(
  ctx: ICommandContext,
  sorted: ReadonlyArray<IServerKernel>,
  currentId: string | undefined
): Map<string, IServerKernel> {
  const { trans } = ctx;
  const labels = new Map<string, IServerKernel>();
  for (const k of sorted) {
    let label = [
      kernelTitle(ctx, k),
      k.id === currentId ? trans.__('this notebook') : null,
      kernelStateLabel(k.executionState, trans),
      vramOf(ctx, k.id)
    ]
      .filter(Boolean)
      .join(' · ');
    if (labels.has(label)) {
      label = `${label} · ${k.id.slice(0, 8)}`;
    }
    labels.set(label, k);
  }
  return labels;
}

/**
 * Let the user pick one of the server's kernels, largest VRAM first, another
 * notebook's preselected; null when cancelled or there is none.
 */
export async function chooseKernel(
  ctx: ICommandContext,
  kernels: ReadonlyArray<IServerKernel>
): Promise<IServerKernel | null> {
  const { monitor, trans } = ctx;
  if (!kernels.length) {
    Notification.info(trans.__('No kernel runs on this server.'), {
      autoClose: 5000
    });
    return null;
  }
  const currentId = monitor.currentModel?.kernelId;
  const held = (k: IServerKernel) => kernelOnGpu(monitor, k.id)?.bytes ?? -1;
  const sorted = [...kernels].sort((a, b) => held(b) - held(a));
  const labels = kernelLabels(ctx, sorted, currentId);
  const first = sorted.findIndex(k => k.id !== currentId);
  const choice = await InputDialog.getItem({
    title: trans.__('Shut down which kernel?'),
    label: trans.__('Kernels of this server, largest VRAM first'),
    items: [...labels.keys()],
    current: Math.max(0, first),
    okLabel: trans.__('Next…'),
    cancelLabel: trans.__('Cancel')
  });
  return choice.button.accept && choice.value !== null
    ? (labels.get(choice.value) ?? null)
    : null;
}
