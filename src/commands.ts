/**
 * Commands: Clean GPU (insert and run the clear_gpu cell), the VRAM panel's
 * per-row actions (free, delete…, fix a graph holder, move a variable's CUDA
 * tensors to the CPU or delete it), Restart kernel (JupyterLab's own
 * restart, with its confirmation) and Shut down kernel… (another kernel of
 * this server that holds the GPU, after a dialog).
 */
import {
  Dialog,
  InputDialog,
  ISessionContextDialogs,
  Notification,
  showDialog
} from '@jupyterlab/apputils';
import { NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import type { Kernel } from '@jupyterlab/services';
import type { ITranslator, TranslationBundle } from '@jupyterlab/translation';
import type { CommandRegistry } from '@lumino/commands';
import {
  generateCleanCell,
  isPythonIdentifier,
  planClean
} from './analysis/cleanup';
import { formatBytes, formatIdle, sumBytes } from './analysis/format';
import {
  baseName,
  kernelStateLabel,
  notebookOf
} from './analysis/gpuprocesses';
import { canFixGraph, generateDetachCell } from './analysis/graphs';
import {
  generateDeleteVariableCell,
  generateMoveToCpuCell
} from './analysis/tensorcells';
import { deletableNames } from './analysis/holders';
import {
  describeHoldings,
  finishedTrainerOwner
} from './analysis/findings/owner-object';
import { generateDropTrainerCell, holdingLabels } from './analysis/trainer';
import { generateDropWorkersCell, workersToDrop } from './analysis/workers';
import {
  CLEAN_ACTION,
  fingerprint,
  placeActionCell,
  replaceableCells,
  type IActionCell
} from './actioncells';
import { gpuCleanIcon } from './icons';
import type { GpuKernelModel } from './model';
import { kernelOnGpu } from './otherkernels';
import type { IModelInfo, IRootBytes } from './protocol';
import type { IServerKernel } from './serverkernels';
import { CommandIDs, IGpuMonitor } from './tokens';

/** Dependencies of {@link addCommands}. */
export interface ICommandDeps {
  commands: CommandRegistry;
  monitor: IGpuMonitor;
  sessionDialogs: ISessionContextDialogs | null;
  translator: ITranslator;
  trans: TranslationBundle;
  /**
   * JupyterLab's kernel manager (`app.serviceManager.kernels`), for Shut
   * down kernel…; without it that command is disabled.
   */
  kernels?: Pick<Kernel.IManager, 'shutdown'>;
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

/** Arguments of the per-model commands (VRAM panel rows). */
const modelArgs = {
  args: {
    type: 'object' as const,
    properties: {
      modelId: {
        type: 'string' as const,
        description: 'Inventory id of the model (hex id() in the kernel)'
      },
      kernelId: kernelArgs.args.properties.kernelId
    },
    required: ['modelId']
  }
};

/** Arguments of the delete command: a model and, optionally, which variables to delete. */
const deleteArgs = {
  args: {
    ...modelArgs.args,
    properties: {
      ...modelArgs.args.properties,
      names: {
        type: 'array' as const,
        items: { type: 'string' as const },
        description:
          'User variables to delete (default: those that name the model itself); only variables that reach the model and are Python identifiers are kept'
      }
    }
  }
};

/** Arguments of the shut-down command: a kernel of the server's answer. */
const shutdownArgs = {
  args: {
    type: 'object' as const,
    properties: {
      kernelId: {
        type: 'string' as const,
        description:
          'Id of a kernel of this server, as GET gpu-hygiene/kernels lists it (default: choose one in a dialog)'
      }
    }
  }
};

/** Arguments of the drop-trainer command: a YOLO and the variable naming it. */
const dropTrainerArgs = {
  args: {
    ...modelArgs.args,
    properties: {
      ...modelArgs.args.properties,
      name: {
        type: 'string' as const,
        description:
          'The user variable that names the YOLO (default: the first variable naming it itself)'
      }
    }
  }
};

/**
 * The variable whose finished Ultralytics trainer the drop-trainer command
 * drops, or null: `requested` when it is a user variable naming `model`
 * itself, else the first such variable; null for a model without a
 * finished trainer ({@link finishedTrainerOwner}).
 */
export function trainerOwner(
  model: IModelInfo,
  requested: unknown
): string | null {
  const first = finishedTrainerOwner(model);
  if (first === null) {
    return null;
  }
  return typeof requested === 'string' &&
    deletableNames(model).includes(requested)
    ? requested
    : first;
}

/**
 * The variables the delete command deletes for `model`: `requested` (a
 * finding's owner, e.g. `trainer` holding it as `trainer.model`) kept only
 * where a user-variable holder of the model has that name and it is a
 * Python identifier; without `requested`, {@link deletableNames}.
 */
export function namesToDelete(model: IModelInfo, requested: unknown): string[] {
  if (!Array.isArray(requested)) {
    return deletableNames(model);
  }
  const roots = new Set(
    model.holders.filter(h => h.kind === 'variable').map(h => h.name)
  );
  return [
    ...new Set(
      requested.filter(
        (n): n is string =>
          typeof n === 'string' && roots.has(n) && isPythonIdentifier(n)
      )
    )
  ];
}

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

function modelFor(
  monitor: IGpuMonitor,
  args: { kernelId?: unknown }
): GpuKernelModel | null {
  if (typeof args.kernelId === 'string') {
    return monitor.models.find(m => m.kernelId === args.kernelId) ?? null;
  }
  return monitor.currentModel;
}

/** Arguments of the graph-holder command (VRAM panel, toast). */
const graphArgs = {
  args: {
    type: 'object' as const,
    properties: {
      name: {
        type: 'string' as const,
        description:
          'The user variable that keeps autograd graphs (a graph holder of the inventory)'
      },
      kernelId: kernelArgs.args.properties.kernelId
    },
    required: ['name']
  }
};

/** Arguments of the drop-workers command. */
const workersArgs = {
  args: {
    type: 'object' as const,
    properties: {
      names: {
        type: 'array' as const,
        items: { type: 'string' as const },
        description:
          'User variables that keep DataLoader workers (holders of the inventory’s children); only identifiers that are the loader or iterator themselves are kept'
      },
      kernelId: kernelArgs.args.properties.kernelId
    },
    required: ['names']
  }
};

/** Arguments of the per-variable commands (move to CPU, delete). */
const variableArgs = {
  args: {
    type: 'object' as const,
    properties: {
      name: {
        type: 'string' as const,
        description:
          'The user variable (a variable root of the inventory; Python identifiers only)'
      },
      kernelId: kernelArgs.args.properties.kernelId
    },
    required: ['name']
  }
};

/**
 * Insert an action's cell below the active cell of `panel`, and run it when
 * asked. The earlier cells of the same action that the user has not edited
 * are replaced, in one undoable step (see `actioncells.ts`): a second Clean
 * GPU leaves one clean cell, with the second run's output. A toast says so
 * when one of them was elsewhere in the notebook.
 *
 * @param action - the cell's tag and action key (default Clean GPU's).
 * @returns the index of the inserted cell.
 */
export async function insertCleanCell(
  panel: NotebookPanel,
  code: string,
  run: boolean,
  deps: Pick<ICommandDeps, 'sessionDialogs' | 'translator' | 'trans'>,
  action: IActionCell = CLEAN_ACTION
): Promise<number> {
  const notebook = panel.content;
  const model = notebook.model;
  if (!model) {
    throw new Error('The notebook has no model.');
  }
  const [sha256, replace] = await Promise.all([
    fingerprint(code),
    replaceableCells(model.sharedModel, action.key)
  ]);
  const { index, replaced } = placeActionCell(
    model.sharedModel,
    notebook.activeCellIndex,
    code,
    action,
    sha256,
    replace
  );
  notebook.activeCellIndex = index;
  notebook.deselectAll(); // run this cell only, not a selection around it
  notebook.mode = 'command';
  const elsewhere = replaced.filter(
    i => i !== index + replaced.filter(r => r < i).length
  );
  if (elsewhere.length) {
    Notification.info(
      deps.trans._n(
        'Replaced the earlier, unedited cell of this action; Undo (Z) brings it back.',
        'Replaced %1 earlier, unedited cells of this action; Undo (Z) brings them back.',
        replaced.length
      ),
      { autoClose: 5000 }
    );
  }
  if (run) {
    await NotebookActions.run(
      notebook,
      panel.sessionContext,
      deps.sessionDialogs ?? undefined,
      deps.translator
    );
  }
  return index;
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

  /** The kernel model, its notebook and the inventory entry named by `args.modelId`. */
  const target = (args: { kernelId?: unknown; modelId?: unknown }) => {
    const model = modelFor(monitor, args);
    const panel = model ? monitor.panelFor(model) : null;
    const inventory = model?.inventory ?? null;
    const info = inventory?.models.find(m => m.id === args.modelId) ?? null;
    return { model, panel, inventory, info };
  };
  const gone = () =>
    Notification.warning(
      trans.__(
        'That model is no longer alive in the kernel; the VRAM panel shows the latest inventory.'
      ),
      { autoClose: 5000 }
    );

  commands.addCommand(CommandIDs.freeModel, {
    label: trans.__('Free Stale Model'),
    caption: trans.__(
      'Insert and run a cell that drops only the references (output cache, last traceback) that keep this stale model alive'
    ),
    describedBy: modelArgs,
    isEnabled: args => {
      const { panel, info } = target(args);
      return !!panel && !!info?.stale;
    },
    execute: async args => {
      const { panel, inventory, info } = target(args);
      if (!panel || !info || !info.stale) {
        gone();
        return;
      }
      const code = generateCleanCell(
        planClean(inventory, { modelId: info.id })
      );
      const run = monitor.settings.cleanAction === 'insert-and-run';
      await insertCleanCell(panel, code, run, deps, {
        tag: CLEAN_ACTION.tag,
        key: `free:${info.id}`
      });
    }
  });

  commands.addCommand(CommandIDs.deleteModel, {
    label: trans.__('Delete Variables Holding Model…'),
    caption: trans.__(
      'Ask, then insert and run a cell that deletes the variables naming this model and frees it'
    ),
    describedBy: deleteArgs,
    isEnabled: args => {
      const { panel, info } = target(args);
      return !!panel && !!info && namesToDelete(info, args.names).length > 0;
    },
    execute: async args => {
      const { panel, inventory, info } = target(args);
      if (!panel || !info) {
        gone();
        return false;
      }
      const names = namesToDelete(info, args.names);
      if (!names.length) {
        Notification.error(
          trans.__(
            'No variable that can be deleted names this model: its holders are not plain Python names.'
          ),
          { autoClose: 5000 }
        );
        return false;
      }
      const result = await showDialog({
        title: trans._n(
          'Delete the variable %2?',
          'Delete the variables %2?',
          names.length,
          names.join(', ')
        ),
        body: trans.__(
          'A cell running "del %1" is inserted below the active cell, then the output-cache entries that hold %2 (%3) are dropped and PyTorch’s cache is emptied. The model is freed unless something else still holds it. You can no longer use %1 afterwards.',
          names.join(', '),
          info.label,
          formatBytes(sumBytes(info.bytes))
        ),
        buttons: [
          Dialog.cancelButton({ label: trans.__('Cancel') }),
          Dialog.warnButton({ label: trans.__('Delete') })
        ]
      });
      if (!result.button.accept) {
        return false;
      }
      const code = generateCleanCell(
        planClean(inventory, { modelId: info.id, deleteNames: names })
      );
      const run = monitor.settings.cleanAction === 'insert-and-run';
      await insertCleanCell(panel, code, run, deps, {
        tag: CLEAN_ACTION.tag,
        key: `delete:${[...names].sort().join(',')}`
      });
      return true;
    }
  });

  commands.addCommand(CommandIDs.dropTrainer, {
    label: trans.__('Drop Finished Trainer, Keep Model…'),
    caption: trans.__(
      'Ask, then insert and run a cell that drops what a finished model.train() left on the YOLO (the trainer, its model and EMA copies, optimizer state, dataloaders); the model keeps working'
    ),
    describedBy: dropTrainerArgs,
    isEnabled: args => {
      const { panel, info } = target(args);
      return !!panel && !!info && trainerOwner(info, args.name) !== null;
    },
    execute: async args => {
      const { panel, info } = target(args);
      const name = info ? trainerOwner(info, args.name) : null;
      if (!panel || !info || name === null) {
        gone();
        return false;
      }
      const held = (info.parts ?? []).filter(p =>
        p.path.startsWith('trainer.')
      );
      const bytes = held.reduce((sum, p) => sum + sumBytes(p.bytes), 0);
      const holdings = describeHoldings(held, trans);
      const result = await showDialog({
        title: trans.__('Drop the finished trainer of %1?', name),
        body: trans.__(
          'A cell setting "%1.trainer = None" is inserted below the active cell: it frees %2 (%3) and keeps %1, which still predicts, validates and exports. A new %1.train() builds a new trainer.',
          name,
          formatBytes(bytes),
          holdings
        ),
        buttons: [
          Dialog.cancelButton({ label: trans.__('Cancel') }),
          Dialog.warnButton({ label: trans.__('Drop trainer') })
        ]
      });
      if (!result.button.accept) {
        return false;
      }
      const code = generateDropTrainerCell({
        name,
        holds: holdingLabels(held),
        bytes
      });
      if (code === null) {
        return false;
      }
      const run = monitor.settings.cleanAction === 'insert-and-run';
      await insertCleanCell(panel, code, run, deps, {
        tag: 'gpu-hygiene-drop-trainer',
        key: `drop-trainer:${name}`
      });
      return true;
    }
  });

  /** The kernel model, its notebook and the graph holder named by `args.name`. */
  const graphTarget = (args: { kernelId?: unknown; name?: unknown }) => {
    const model = modelFor(monitor, args);
    const panel = model ? monitor.panelFor(model) : null;
    const graph =
      model?.inventory?.graphs.find(g => g.name === args.name) ?? null;
    return { panel, graph };
  };

  commands.addCommand(CommandIDs.fixGraphHolder, {
    label: trans.__('Detach Autograd Graphs…'),
    caption: trans.__(
      'Ask, then insert and run a cell that replaces the tensors with a grad_fn in this variable by tensor.detach(): same values, no graph'
    ),
    describedBy: graphArgs,
    isEnabled: args => {
      const { panel, graph } = graphTarget(args);
      return !!panel && !!graph && canFixGraph(graph);
    },
    execute: async args => {
      const { panel, graph } = graphTarget(args);
      const code = graph ? generateDetachCell(graph) : null;
      if (!panel || !graph || code === null) {
        Notification.warning(
          graph
            ? trans.__(
                'That variable cannot be fixed from here: it is not a plain Python name holding the tensors itself.'
              )
            : trans.__(
                'That variable no longer keeps autograd graphs; the VRAM panel shows the latest inventory.'
              ),
          { autoClose: 5000 }
        );
        return false;
      }
      const result = await showDialog({
        title: trans.__('Detach the tensors in %1?', graph.name),
        body: trans.__(
          'A cell is inserted below the active cell that replaces each tensor with a grad_fn directly in %1 by tensor.detach(): the values stay, the autograd graphs (%2) are freed. You can no longer call backward() through them. Next time store loss.item() or loss.detach(), or run evaluation under torch.no_grad().',
          graph.name,
          formatBytes(sumBytes(graph.bytes))
        ),
        buttons: [
          Dialog.cancelButton({ label: trans.__('Cancel') }),
          Dialog.warnButton({ label: trans.__('Detach') })
        ]
      });
      if (!result.button.accept) {
        return false;
      }
      const run = monitor.settings.cleanAction === 'insert-and-run';
      await insertCleanCell(panel, code, run, deps, {
        tag: 'gpu-hygiene-detach-graphs',
        key: `detach-graphs:${graph.name}`
      });
      return true;
    }
  });

  /** The kernel model, its notebook and what `args.names` keep. */
  const workersTarget = (args: { kernelId?: unknown; names?: unknown }) => {
    const model = modelFor(monitor, args);
    const panel = model ? monitor.panelFor(model) : null;
    return { panel, drop: workersToDrop(model?.inventory ?? null, args.names) };
  };

  commands.addCommand(CommandIDs.dropWorkers, {
    label: trans.__('Drop DataLoader Workers…'),
    caption: trans.__(
      'Ask, then insert and run a cell that shuts down the DataLoader workers these variables keep and deletes the variables'
    ),
    describedBy: workersArgs,
    isEnabled: args => {
      const { panel, drop } = workersTarget(args);
      return !!panel && drop.names.length > 0;
    },
    execute: async args => {
      const { panel, drop } = workersTarget(args);
      const code = generateDropWorkersCell(drop.names, drop.pids.length);
      if (!panel || code === null) {
        Notification.warning(
          trans.__(
            'Those variables no longer keep DataLoader workers; the VRAM panel shows the latest inventory.'
          ),
          { autoClose: 5000 }
        );
        return false;
      }
      const names = drop.names.join(', ');
      const result = await showDialog({
        title: trans._n(
          'Drop %2 and its workers?',
          'Drop %2 and their workers?',
          drop.names.length,
          names
        ),
        body: trans._n(
          'A cell is inserted below the active cell that shuts down %1 DataLoader worker process (pid %3) and deletes %2. You can no longer use %2 afterwards: create the DataLoader again to train.',
          'A cell is inserted below the active cell that shuts down %1 DataLoader worker processes (pids %3) and deletes %2. You can no longer use %2 afterwards: create the DataLoader again to train.',
          drop.pids.length,
          names,
          drop.pids.join(', ')
        ),
        buttons: [
          Dialog.cancelButton({ label: trans.__('Cancel') }),
          Dialog.warnButton({ label: trans.__('Drop') })
        ]
      });
      if (!result.button.accept) {
        return false;
      }
      const run = monitor.settings.cleanAction === 'insert-and-run';
      await insertCleanCell(panel, code, run, deps, {
        tag: 'gpu-hygiene-drop-workers',
        key: `drop-workers:${drop.names.join(',')}`
      });
      return true;
    }
  });

  /** The kernel model, its notebook and the variable root named by `args.name`. */
  const variableTarget = (args: { kernelId?: unknown; name?: unknown }) => {
    const model = modelFor(monitor, args);
    const panel = model ? monitor.panelFor(model) : null;
    const root: IRootBytes | null =
      model?.inventory?.roots.find(
        r => r.kind === 'variable' && r.name === args.name
      ) ?? null;
    return { panel, root };
  };
  const variableGone = () =>
    Notification.warning(
      trans.__(
        'That variable no longer holds tensors or is not a plain Python name; the VRAM panel shows the latest inventory.'
      ),
      { autoClose: 5000 }
    );
  const run = () => monitor.settings.cleanAction === 'insert-and-run';

  /** Ask, then insert the delete cell of `name`; resolves to whether it was inserted. */
  const deleteVariable = async (
    panel: NotebookPanel,
    root: IRootBytes,
    ask: boolean
  ): Promise<boolean> => {
    const alone = root.sole ?? root.bytes;
    const code = generateDeleteVariableCell(root.name, alone);
    if (code === null) {
      variableGone();
      return false;
    }
    if (ask) {
      const result = await showDialog({
        title: trans.__('Delete the variable %1?', root.name),
        body: trans.__(
          'A cell running "del %1" is inserted below the active cell, then PyTorch’s cache is emptied; it frees %2 unless something else still holds it. You can no longer use %1 afterwards.',
          root.name,
          formatBytes(sumBytes(alone))
        ),
        buttons: [
          Dialog.cancelButton({ label: trans.__('Cancel') }),
          Dialog.warnButton({ label: trans.__('Delete') })
        ]
      });
      if (!result.button.accept) {
        return false;
      }
    }
    await insertCleanCell(panel, code, run(), deps, {
      tag: 'gpu-hygiene-delete-variable',
      key: `delete-variable:${root.name}`
    });
    return true;
  };

  commands.addCommand(CommandIDs.moveTensorsToCpu, {
    label: trans.__('Move CUDA Tensors to CPU…'),
    caption: trans.__(
      'Ask, then insert and run a cell that replaces the CUDA tensors of this variable (or of its list, dict or tuple) by CPU copies; the dialog also offers to delete it'
    ),
    describedBy: variableArgs,
    isEnabled: args => {
      const { panel, root } = variableTarget(args);
      return !!panel && !!root && generateMoveToCpuCell(root.name) !== null;
    },
    execute: async args => {
      const { panel, root } = variableTarget(args);
      const alone = root ? (root.sole ?? root.bytes) : {};
      const code = root ? generateMoveToCpuCell(root.name, alone) : null;
      if (!panel || !root || code === null) {
        variableGone();
        return false;
      }
      const shared = sumBytes(root.shared ?? {});
      const result = await showDialog({
        title: trans.__('Move the CUDA tensors of %1 to the CPU?', root.name),
        body:
          trans.__(
            'A cell is inserted below the active cell that replaces the CUDA tensors in %1 (the tensor itself, or those in its list, dict or tuple) by CPU copies (tensor.cpu()): the values stay, %2 of VRAM is freed. Or delete %1 if you no longer need it.',
            root.name,
            formatBytes(sumBytes(alone))
          ) +
          (shared > 0
            ? ` ${trans.__(
                '%1 more is shared with %2 and stays on the GPU while %2 holds it.',
                formatBytes(shared),
                (root.sharedWith ?? []).join(', ') || trans.__('another holder')
              )}`
            : ''),
        buttons: [
          Dialog.cancelButton({ label: trans.__('Cancel') }),
          Dialog.warnButton({
            label: trans.__('Delete %1', root.name),
            actions: ['delete']
          }),
          Dialog.okButton({ label: trans.__('Move to CPU') })
        ]
      });
      if (result.button.actions.includes('delete')) {
        return deleteVariable(panel, root, false);
      }
      if (!result.button.accept) {
        return false;
      }
      await insertCleanCell(panel, code, run(), deps, {
        tag: 'gpu-hygiene-move-to-cpu',
        key: `move-to-cpu:${root.name}`
      });
      return true;
    }
  });

  commands.addCommand(CommandIDs.deleteVariable, {
    label: trans.__('Delete Variable…'),
    caption: trans.__(
      'Ask, then insert and run a cell that deletes this variable and empties PyTorch’s cache'
    ),
    describedBy: variableArgs,
    isEnabled: args => {
      const { panel, root } = variableTarget(args);
      return (
        !!panel && !!root && generateDeleteVariableCell(root.name) !== null
      );
    },
    execute: async args => {
      const { panel, root } = variableTarget(args);
      if (!panel || !root) {
        variableGone();
        return false;
      }
      return deleteVariable(panel, root, true);
    }
  });

  /** A server kernel's name for the user: its notebook's file name, else its first session, else its id. */
  const kernelTitle = (kernel: IServerKernel): string => {
    const notebook = notebookOf(kernel.sessions, null);
    const first = kernel.sessions[0];
    return notebook
      ? baseName(notebook)
      : first?.name ||
          first?.path ||
          trans.__('kernel %1', kernel.id.slice(0, 8));
  };
  /** The VRAM a kernel holds, in words ("8.0 GiB of VRAM"), as the agents see it. */
  const vramOf = (kernelId: string): string | null => {
    const held = kernelOnGpu(monitor, kernelId);
    return held && (held.bytes > 0 || held.known)
      ? trans.__('%1 of VRAM', formatBytes(held.bytes))
      : null;
  };
  /**
   * "python3, idle for 25 min": the server's state, and how long it has been
   * idle where the browser knows its last cell (the server's last activity
   * also counts the agent's own messages, so it is not used here).
   */
  const kernelState = (kernel: IServerKernel): string => {
    if (kernel.executionState !== 'idle') {
      return trans.__(
        '%1, %2',
        kernel.name,
        kernelStateLabel(kernel.executionState, trans)
      );
    }
    const info = kernelOnGpu(monitor, kernel.id)?.kernel;
    return info?.idleSource === 'cells' && info.idleSeconds !== null
      ? trans.__('%1, idle for %2', kernel.name, formatIdle(info.idleSeconds))
      : trans.__('%1, idle', kernel.name);
  };
  const serverKernel = (id: unknown): IServerKernel | null =>
    typeof id === 'string'
      ? (monitor.serverKernels.answer?.kernels.find(k => k.id === id) ?? null)
      : null;

  /** Let the user pick one of the server's kernels; null when cancelled. */
  const chooseKernel = async (
    kernels: ReadonlyArray<IServerKernel>
  ): Promise<IServerKernel | null> => {
    if (!kernels.length) {
      Notification.info(trans.__('No kernel runs on this server.'), {
        autoClose: 5000
      });
      return null;
    }
    const currentId = monitor.currentModel?.kernelId;
    const held = (k: IServerKernel) => kernelOnGpu(monitor, k.id)?.bytes ?? -1;
    const sorted = [...kernels].sort((a, b) => held(b) - held(a));
    const labels = new Map<string, IServerKernel>();
    for (const k of sorted) {
      const vram = vramOf(k.id);
      let label = [
        kernelTitle(k),
        k.id === currentId ? trans.__('this notebook') : null,
        kernelStateLabel(k.executionState, trans),
        vram
      ]
        .filter(Boolean)
        .join(' · ');
      if (labels.has(label)) {
        label = `${label} · ${k.id.slice(0, 8)}`;
      }
      labels.set(label, k);
    }
    const items = [...labels.keys()];
    const first = sorted.findIndex(k => k.id !== currentId);
    const choice = await InputDialog.getItem({
      title: trans.__('Shut down which kernel?'),
      label: trans.__('Kernels of this server, largest VRAM first'),
      items,
      current: Math.max(0, first),
      okLabel: trans.__('Next…'),
      cancelLabel: trans.__('Cancel')
    });
    return choice.button.accept && choice.value !== null
      ? (labels.get(choice.value) ?? null)
      : null;
  };

  commands.addCommand(CommandIDs.shutdownKernel, {
    // Not JupyterLab's "Shut Down Kernel" (the current notebook's, no dialog):
    // from the palette it lets the user choose one of the server's kernels.
    label: args =>
      args.kernelId === undefined
        ? trans.__('Shut Down a Kernel of This Server…')
        : trans.__('Shut Down Kernel…'),
    caption: args => {
      const kernel = serverKernel(args.kernelId);
      if (!kernel) {
        return trans.__(
          'Choose one of this server’s kernels and shut it down after a confirmation: frees all its VRAM, its variables are lost'
        );
      }
      const vram = vramOf(kernel.id);
      return vram
        ? trans.__(
            'Ask, then shut down the kernel of %1: frees %2, its variables are lost',
            kernelTitle(kernel),
            vram
          )
        : trans.__(
            'Ask, then shut down the kernel of %1: frees all its VRAM, its variables are lost',
            kernelTitle(kernel)
          );
    },
    describedBy: shutdownArgs,
    isEnabled: args =>
      !!deps.kernels &&
      monitor.serverKernels.state.status !== 'missing' &&
      (args.kernelId === undefined ||
        monitor.serverKernels.state.status !== 'ok' ||
        serverKernel(args.kernelId) !== null),
    execute: async args => {
      const manager = deps.kernels;
      if (!manager) {
        return false;
      }
      // The answer as it is now: the dialog names what the server runs.
      const state = await monitor.serverKernels.refresh(0);
      if (state.status !== 'ok') {
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
        return false;
      }
      const kernels = state.answer.kernels;
      let kernel: IServerKernel | null = null;
      if (args.kernelId !== undefined) {
        kernel = kernels.find(k => k.id === args.kernelId) ?? null;
        if (!kernel) {
          Notification.warning(
            trans.__(
              'That kernel no longer runs on this server; nothing was shut down.'
            ),
            { autoClose: 5000 }
          );
          return false;
        }
      } else {
        kernel = await chooseKernel(kernels);
        if (!kernel) {
          return false;
        }
      }
      const title = kernelTitle(kernel);
      const current = monitor.currentModel?.kernelId === kernel.id;
      const vram = vramOf(kernel.id);
      const frees = vram
        ? trans.__('it frees %1 and all its variables are lost.', vram)
        : trans.__(
            'it frees all the VRAM it holds (how much is not known here) and all its variables are lost.'
          );
      const result = await showDialog({
        title: current
          ? trans.__('Shut down this notebook’s own kernel (%1)?', title)
          : trans.__('Shut down the kernel of %1?', title),
        body: current
          ? trans.__(
              'This is the kernel of the notebook you are working in, %1 (%2). Shutting it down stops it: %3 The notebook stays open without a kernel; start one to run it again.',
              title,
              kernelState(kernel),
              frees
            )
          : trans.__(
              'The kernel of %1 (%2) will be shut down: %3 The notebook file is not changed; start a new kernel to run it again.',
              title,
              kernelState(kernel),
              frees
            ),
        buttons: [
          Dialog.cancelButton({ label: trans.__('Cancel') }),
          Dialog.warnButton({ label: trans.__('Shut down') })
        ]
      });
      if (!result.button.accept) {
        return false;
      }
      try {
        await manager.shutdown(kernel.id);
      } catch (reason) {
        Notification.error(
          trans.__(
            'The kernel of %1 could not be shut down: %2',
            title,
            reason instanceof Error ? reason.message : String(reason)
          ),
          { autoClose: 8000 }
        );
        return false;
      } finally {
        void monitor.serverKernels.refresh(0);
      }
      return true;
    }
  });

  commands.addCommand(CommandIDs.restartKernel, {
    label: trans.__('Restart Kernel to Free GPU…'),
    caption: args => {
      const { process, nonTorch } = restartReturns(modelFor(monitor, args));
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

  commands.addCommand(CommandIDs.interruptKernel, {
    label: trans.__('Interrupt Kernel'),
    caption: trans.__(
      'Interrupt the running cell (KeyboardInterrupt): the kernel and its variables stay'
    ),
    describedBy: kernelArgs,
    isEnabled: args => {
      const model = modelFor(monitor, args);
      const panel = model ? monitor.panelFor(model) : null;
      return !!panel?.sessionContext.session?.kernel;
    },
    execute: async args => {
      const model = modelFor(monitor, args);
      const kernel = model
        ? monitor.panelFor(model)?.sessionContext.session?.kernel
        : null;
      if (!kernel) {
        return false;
      }
      await kernel.interrupt();
      return true;
    }
  });
}
