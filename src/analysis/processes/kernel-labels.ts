/**
 * Labels of the kernels on the GPU (issue 12): a kernel's notebook, its
 * short name and its execution state in words, for the gauge's tooltip, the
 * "On this GPU" table, the OOM toast and the commands.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import type { IServerSession } from '../../server-kernel-types';
import type { IKernelInfo } from './gpu-process-types';

/** The last path segment: `work/a.ipynb` → `a.ipynb`. */
export function baseName(path: string): string {
  const parts = path.split('/').filter(Boolean);
  return parts.length ? parts[parts.length - 1] : path;
}

/**
 * The kernel's notebook: the path of its first `notebook` session, else the
 * notebook the browser has open on it, else null.
 */
export function notebookOf(
  sessions: ReadonlyArray<IServerSession>,
  browserPath: string | null
): string | null {
  const notebook = sessions.find(s => s.type === 'notebook' && s.path);
  return notebook?.path ?? browserPath ?? null;
}

/**
 * A short, untranslated label of a kernel: its notebook's file name, else
 * its first session's name or path, else null (the view then says "kernel
 * <id>").
 */
export function kernelLabel(kernel: IKernelInfo): string | null {
  if (kernel.notebook) {
    return baseName(kernel.notebook);
  }
  const first = kernel.sessions[0];
  return first ? first.name || first.path || null : null;
}

/** A kernel's execution state in words. */
export function kernelStateLabel(
  state: string | null,
  trans: TranslationBundle
): string {
  switch (state) {
    case 'idle':
      return trans.__('idle');
    case 'busy':
      return trans.__('busy');
    case 'starting':
      return trans.__('starting');
    case 'restarting':
    case 'autorestarting':
      return trans.__('restarting');
    case 'dead':
      return trans.__('dead');
    case null:
    case 'unknown':
      return trans.__('state unknown');
    default:
      return state;
  }
}

/** A kernel's name for the user: its notebook's file name, else `kernel 1a2b3c4d`. */
export function kernelName(
  kernel: IKernelInfo,
  trans: TranslationBundle
): string {
  return kernelLabel(kernel) ?? trans.__('kernel %1', kernel.id.slice(0, 8));
}
