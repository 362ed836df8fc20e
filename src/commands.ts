/**
 * Commands: Clean GPU (insert and run the clear_gpu cell) and Restart kernel
 * (JupyterLab's own restart, with its confirmation).
 */
import { ISessionContextDialogs, Notification } from '@jupyterlab/apputils';
import { NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import type { ITranslator, TranslationBundle } from '@jupyterlab/translation';
import type { CommandRegistry } from '@lumino/commands';
import { generateCleanCell, planClean } from './analysis/cleanup';
import { gpuCleanIcon } from './icons';
import type { GpuKernelModel } from './model';
import { CommandIDs, IGpuMonitor } from './tokens';

/** Dependencies of {@link addCommands}. */
export interface ICommandDeps {
  commands: CommandRegistry;
  monitor: IGpuMonitor;
  sessionDialogs: ISessionContextDialogs | null;
  translator: ITranslator;
  trans: TranslationBundle;
}

/** Arguments accepted by the commands. */
const kernelArgs = {
  args: {
    type: 'object' as const,
    properties: {
      kernelId: {
        type: 'string' as const,
        description: 'Kernel to act on (default: the current notebook’s kernel)'
      }
    }
  }
};

function modelFor(
  monitor: IGpuMonitor,
  args: { kernelId?: unknown }
): GpuKernelModel | null {
  if (typeof args.kernelId === 'string') {
    return monitor.models.find(m => m.kernelId === args.kernelId) ?? null;
  }
  return monitor.currentModel;
}

/**
 * Insert the clean cell below the active cell of `panel`, and run it when asked.
 *
 * @returns the index of the inserted cell.
 */
export async function insertCleanCell(
  panel: NotebookPanel,
  code: string,
  run: boolean,
  deps: Pick<ICommandDeps, 'sessionDialogs' | 'translator'>
): Promise<number> {
  const notebook = panel.content;
  const model = notebook.model;
  if (!model) {
    throw new Error('The notebook has no model.');
  }
  const at = Math.min(
    Math.max(notebook.activeCellIndex, -1) + 1,
    model.cells.length
  );
  model.sharedModel.insertCell(at, {
    cell_type: 'code',
    source: code,
    metadata: { tags: ['gpu-hygiene-clean'] }
  });
  notebook.activeCellIndex = at;
  notebook.mode = 'command';
  if (run) {
    await NotebookActions.run(
      notebook,
      panel.sessionContext,
      deps.sessionDialogs ?? undefined,
      deps.translator
    );
  }
  return at;
}

/**
 * Register the commands.
 */
export function addCommands(deps: ICommandDeps): void {
  const { commands, monitor, trans } = deps;

  commands.addCommand(CommandIDs.clean, {
    label: trans.__('Clean GPU'),
    caption: trans.__(
      'Insert and run a cell that frees VRAM held by stale references (output cache, last traceback), then empties PyTorch’s cache'
    ),
    describedBy: kernelArgs,
    icon: args => (args.isPalette ? undefined : gpuCleanIcon),
    isEnabled: args => {
      const model = modelFor(monitor, args);
      return (
        !!model && model.status !== 'unsupported' && !!monitor.panelFor(model)
      );
    },
    execute: async args => {
      const model = modelFor(monitor, args);
      const panel = model ? monitor.panelFor(model) : null;
      if (!model || !panel) {
        Notification.error(
          trans.__('Clean GPU: open a notebook with a Python kernel first.'),
          {
            autoClose: 5000
          }
        );
        return;
      }
      if (model.status === 'unsupported') {
        Notification.error(
          trans.__(
            'Clean GPU: the kernel language (%1) is not supported.',
            model.language ?? '?'
          ),
          { autoClose: 5000 }
        );
        return;
      }
      const code = generateCleanCell(planClean(model.inventory));
      const run = monitor.settings.cleanAction === 'insert-and-run';
      await insertCleanCell(panel, code, run, deps);
    }
  });

  commands.addCommand(CommandIDs.restartKernel, {
    label: trans.__('Restart Kernel to Free GPU…'),
    caption: trans.__(
      'Restart the kernel: frees all VRAM, including the CUDA context, and loses all variables'
    ),
    describedBy: kernelArgs,
    isEnabled: args => {
      const model = modelFor(monitor, args);
      return !!model && !!monitor.panelFor(model);
    },
    execute: async args => {
      const model = modelFor(monitor, args);
      const panel = model ? monitor.panelFor(model) : null;
      if (!panel) {
        return false;
      }
      if (deps.sessionDialogs) {
        return deps.sessionDialogs.restart(panel.sessionContext);
      }
      await panel.sessionContext.restartKernel();
      return true;
    }
  });
}
