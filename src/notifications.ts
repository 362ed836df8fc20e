/**
 * Toasts: a warning when model instances stack up in a kernel, a warning
 * when PyTorch's allocated memory climbs steadily (each one toast per kernel,
 * updated rather than stacked), an info toast after a clean, an error toast
 * per cell that failed with CUDA out of memory, and a warning per variable
 * that keeps large autograd graphs alive.
 */
import { Dialog, Notification, showDialog } from '@jupyterlab/apputils';
import type { TranslationBundle } from '@jupyterlab/translation';
import type { CommandRegistry } from '@lumino/commands';
import type { IDisposable } from '@lumino/disposable';
import React from 'react';
import {
  formatBytes,
  formatPlacement,
  listNames,
  MAX_TOAST,
  sumBytes
} from './analysis/format';
import { graphsToWarn, IGraphRow } from './analysis/graphs';
import { findLeak } from './analysis/leak';
import { describeOom } from './analysis/oom';
import {
  findStackedModels,
  holderNames,
  IStackedGroup,
  stackingSignature
} from './analysis/stacking';
import { FLOOR_SIZE, ILeakTrend } from './analysis/trend';
import type { GpuKernelModel } from './model';
import { OomDetails } from './oomdetails';
import type { ICleaned, IInventory, IModelInfo, IOom } from './protocol';
import { CommandIDs, IGpuMonitor } from './tokens';

function familyName(model: IModelInfo): string {
  return model.family === 'ultralytics' ? 'YOLO' : model.className;
}

/**
 * Text of the stacking warning for one group: names both models, their sizes
 * and what holds the older one. Kept under JupyterLab's 140-character toast
 * limit by shortening the holder list.
 */
export function describeStacking(
  group: IStackedGroup,
  trans: TranslationBundle,
  moreGroups = 0
): string {
  const older = group.older[group.older.length - 1];
  const newest = group.newest;
  const compose = (maxNames: number): string => {
    const holders = holderNames({
      ...older,
      holders: older.holders.filter(h => h.kind !== 'hidden')
    });
    const stale = older.stale;
    const held = holders.length
      ? stale
        ? trans.__('held only by %1', listNames(holders, maxNames))
        : trans.__('still named by %1', listNames(holders, maxNames))
      : trans.__('held by nothing named (reference cycle)');
    const olderCount =
      group.older.length > 1
        ? trans.__(' (+%1 older)', group.older.length - 1)
        : '';
    const more = moreGroups ? trans.__(' +%1 more', moreGroups) : '';
    return trans.__(
      'Stacked %1: older %2, %3, %4%5; newer %6, %7.%8',
      familyName(newest),
      older.label,
      formatBytes(sumBytes(older.bytes)),
      held,
      olderCount,
      newest.label,
      formatPlacement(newest.bytes),
      more
    );
  };
  for (const maxNames of [6, 3, 1]) {
    const text = compose(maxNames);
    if (text.length <= MAX_TOAST) {
      return text;
    }
  }
  const text = compose(1);
  return `${text.slice(0, MAX_TOAST - 1)}…`;
}

/**
 * Text of the leak-trend warning, e.g. "PyTorch allocated climbs ~12.0 MiB
 * per cell over 8 cells. Tensors kept alive? e.g. losses.append(loss)
 * instead of loss.item()". Kept under 140 characters.
 *
 * @param devices - how many devices the kernel sees (the device is named when several).
 */
export function describeLeak(
  trend: ILeakTrend,
  trans: TranslationBundle,
  devices = 1
): string {
  const where = devices > 1 ? trans.__(' on cuda:%1', trend.device) : '';
  const hint = trans.__(
    'Tensors kept alive? e.g. losses.append(loss), not loss.item()'
  );
  const text =
    trend.basis === 'cells'
      ? trans.__(
          'PyTorch allocated climbs ~%1 per cell over %2 cells%3. %4',
          formatBytes(trend.rate),
          trend.points,
          where,
          hint
        )
      : trans.__(
          'PyTorch allocated climbs ~%1 per minute in cell %2%3. %4',
          formatBytes(trend.rate),
          trend.executionCount === null ? '[*]' : `[${trend.executionCount}]`,
          where,
          hint
        );
  return text.length <= MAX_TOAST ? text : `${text.slice(0, MAX_TOAST - 1)}…`;
}

/** The leak trend of a kernel (moved to `analysis/leak.ts`). */
export { findLeak };

/**
 * Text of the graph-holder warning, e.g. "val_losses keeps 4 autograd graphs
 * alive (~1.0 GiB on cuda:0): store loss.item() or loss.detach(), or run
 * evaluation under torch.no_grad()." Kept under 140 characters by shortening
 * the variable's path.
 */
export function describeGraphHolder(
  row: IGraphRow,
  trans: TranslationBundle
): string {
  const { graph } = row;
  const compose = (path: string) =>
    trans._n(
      '%2 keeps %1 autograd graph alive (%3%4 on %5): store loss.item() or loss.detach(), or run evaluation under torch.no_grad().',
      '%2 keeps %1 autograd graphs alive (%3%4 on %5): store loss.item() or loss.detach(), or run evaluation under torch.no_grad().',
      graph.count,
      path,
      graph.truncated ? '≥' : '~',
      formatBytes(row.deviceBytes),
      row.device ?? '?'
    );
  const text = compose(graph.path);
  if (text.length <= MAX_TOAST) {
    return text;
  }
  const room = Math.max(8, MAX_TOAST - (compose('').length + 1));
  return compose(`${graph.path.slice(0, room)}…`).slice(0, MAX_TOAST);
}

/**
 * Text of the info toast after a clean cell.
 */
export function describeCleaned(
  cleaned: ICleaned,
  trans: TranslationBundle
): string {
  const freed = sumBytes(cleaned.freed);
  const allocated = cleaned.allocated
    ? Object.values(cleaned.allocated).reduce(
        (sum, v) => sum + Math.max(0, v.before - v.after),
        0
      )
    : null;
  const reserved = cleaned.reserved
    ? Object.values(cleaned.reserved).reduce(
        (sum, v) => sum + Math.max(0, v.before - v.after),
        0
      )
    : null;
  const parts = [
    trans.__(
      'Clean GPU freed %1 of models (%2 → %3 live).',
      formatBytes(freed),
      cleaned.models.before,
      cleaned.models.after
    )
  ];
  if (allocated !== null && reserved !== null) {
    parts.push(
      trans.__(
        'PyTorch allocated −%1, reserved −%2.',
        formatBytes(allocated),
        formatBytes(reserved)
      )
    );
  }
  return parts.join(' ');
}

/**
 * Raises and updates the toasts for every kernel the monitor watches.
 */
export class GpuNotifier implements IDisposable {
  constructor(options: GpuNotifier.IOptions) {
    this._monitor = options.monitor;
    this._commands = options.commands;
    this._trans = options.trans;
    this._monitor.modelAdded.connect(this._watch, this);
    this._monitor.settingsChanged.connect(this._onSettings, this);
    this._monitor.models.forEach(m => this._watch(this._monitor, m));
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._monitor.modelAdded.disconnect(this._watch, this);
    this._monitor.settingsChanged.disconnect(this._onSettings, this);
    for (const model of this._watched) {
      model.inventoryChanged.disconnect(this._onInventory, this);
      model.cleaned.disconnect(this._onCleaned, this);
      model.changed.disconnect(this._onChanged, this);
      model.outOfMemory.disconnect(this._onOom, this);
    }
    this._watched.clear();
  }

  private _watch(_: IGpuMonitor, model: GpuKernelModel): void {
    if (this._watched.has(model)) {
      return;
    }
    this._watched.add(model);
    model.inventoryChanged.connect(this._onInventory, this);
    model.cleaned.connect(this._onCleaned, this);
    model.changed.connect(this._onChanged, this);
    model.outOfMemory.connect(this._onOom, this);
    model.disposed.connect(this._forget, this);
  }

  private _forget(model: GpuKernelModel): void {
    this._watched.delete(model);
    model.inventoryChanged.disconnect(this._onInventory, this);
    model.cleaned.disconnect(this._onCleaned, this);
    model.changed.disconnect(this._onChanged, this);
    model.outOfMemory.disconnect(this._onOom, this);
    const toast = this._toasts.get(model.kernelId);
    if (toast) {
      Notification.dismiss(toast.id);
      this._toasts.delete(model.kernelId);
    }
    this._dismissLeak(model.kernelId);
    this._leakChecked.delete(model);
    this._cleanedToasts.delete(model.kernelId);
    this._dismissGraphs(model.kernelId, () => true);
    for (const key of [...this._oomToasts.keys()]) {
      if (key.startsWith(`${model.kernelId}\u0000`)) {
        this._oomToasts.delete(key);
      }
    }
  }

  /**
   * Re-check the leak trend when it can have changed: the first sample after
   * a new inventory (the cell's "after" value), and every few samples while
   * a cell runs (the trend inside a long cell).
   */
  private _onChanged(model: GpuKernelModel): void {
    const sample = model.latestSample;
    if (!sample) {
      return;
    }
    const checked = this._leakChecked.get(model);
    const cells = model.cells.length;
    const lastCell = model.cells[cells - 1];
    const afterNewCell =
      cells !== checked?.cells && !!lastCell && sample.t >= lastCell.t;
    const inLongCell =
      sample.busy &&
      sample.seq !== checked?.seq &&
      sample.seq % FLOOR_SIZE === 0;
    if (!afterNewCell && !inLongCell) {
      return;
    }
    this._leakChecked.set(model, { cells, seq: sample.seq });
    this._checkLeak(model);
  }

  private _onSettings(): void {
    for (const model of this._watched) {
      // Turning the stacked-model warning off (or on) applies to the toasts now.
      if (model.inventory) {
        this._onInventory(model, model.inventory);
      }
      this._checkLeak(model);
      this._checkGraphs(model);
    }
  }

  /** Raise, update or dismiss the leak toast of one kernel. */
  private _checkLeak(model: GpuKernelModel): void {
    const settings = this._monitor.settings;
    const trend = settings.warnOnLeak ? findLeak(model, settings) : null;
    const kernelId = model.kernelId;
    const state = this._leakToasts.get(kernelId);
    if (!trend) {
      this._dismissLeak(kernelId);
      return;
    }
    const devices = model.latestSample?.devices.length ?? 1;
    const message = describeLeak(trend, this._trans, devices);
    if (state?.closed) {
      // The user closed it: quiet until the climb stops and starts again.
      return;
    }
    if (state && state.message === message) {
      return;
    }
    const options = {
      autoClose: false as const,
      actions: [
        {
          label: this._trans.__('Open VRAM panel'),
          caption: this._trans.__(
            'See allocated memory per cell and who holds VRAM'
          ),
          displayType: 'accent' as const,
          callback: () => {
            void this._commands.execute(CommandIDs.openPanel);
          }
        },
        {
          label: this._trans.__("Don't warn again"),
          caption: this._trans.__(
            'Turn off leak-trend warnings in the settings'
          ),
          displayType: 'link' as const,
          callback: () => {
            void this._monitor.setSetting('warnOnLeak', false);
          }
        }
      ]
    };
    if (state) {
      if (
        Notification.update({
          id: state.id,
          message,
          type: 'warning',
          ...options
        })
      ) {
        state.message = message;
      } else {
        state.closed = true;
      }
      return;
    }
    const id = Notification.warning(message, options);
    this._leakToasts.set(kernelId, { id, message, closed: false });
  }

  private _dismissLeak(kernelId: string): void {
    const state = this._leakToasts.get(kernelId);
    if (state) {
      if (!state.closed) {
        Notification.dismiss(state.id);
      }
      this._leakToasts.delete(kernelId);
    }
  }

  private _onInventory(model: GpuKernelModel, inventory: IInventory): void {
    this._checkGraphs(model);
    this._checkStacking(model, inventory);
  }

  /**
   * One warning per (kernel, variable) that keeps ≥ 64 MiB of autograd
   * graphs on a CUDA device: raised once, dismissed when the variable no
   * longer qualifies, never raised again for the same name in that kernel.
   */
  private _checkGraphs(model: GpuKernelModel): void {
    const kernelId = model.kernelId;
    const rows = this._monitor.settings.warnOnGraphHolders
      ? graphsToWarn(model.inventory)
      : [];
    const current = new Set(rows.map(r => r.graph.name));
    this._dismissGraphs(kernelId, name => !current.has(name));
    for (const row of rows) {
      const key = `${kernelId}\u0000${row.graph.name}`;
      if (this._graphWarned.has(key)) {
        continue;
      }
      this._graphWarned.add(key);
      const name = row.graph.name;
      const actions = [
        ...(row.fixable
          ? [
              {
                label: this._trans.__('Fix…'),
                caption: this._trans.__(
                  'Ask, then insert a cell that replaces the tensors in %1 by tensor.detach() (same values, no graph)',
                  name
                ),
                displayType: 'accent' as const,
                callback: () => {
                  void this._commands.execute(CommandIDs.fixGraphHolder, {
                    kernelId,
                    name
                  });
                }
              }
            ]
          : []),
        {
          label: this._trans.__('Open VRAM panel'),
          caption: this._trans.__(
            'See which variables keep autograd graphs and how much'
          ),
          callback: () => {
            void this._commands.execute(CommandIDs.openPanel);
          }
        },
        {
          label: this._trans.__("Don't warn again"),
          caption: this._trans.__(
            'Turn off autograd-graph warnings in the settings'
          ),
          displayType: 'link' as const,
          callback: () => {
            void this._monitor.setSetting('warnOnGraphHolders', false);
          }
        }
      ];
      const id = Notification.warning(describeGraphHolder(row, this._trans), {
        autoClose: false,
        actions
      });
      this._graphToasts.set(key, id);
    }
  }

  /** Dismiss the graph toasts of a kernel whose variable name matches. */
  private _dismissGraphs(
    kernelId: string,
    match: (name: string) => boolean
  ): void {
    const prefix = `${kernelId}\u0000`;
    for (const [key, id] of [...this._graphToasts]) {
      if (key.startsWith(prefix) && match(key.slice(prefix.length))) {
        Notification.dismiss(id);
        this._graphToasts.delete(key);
      }
    }
  }

  /**
   * One error toast per cell that failed with CUDA out of memory: the
   * figures and what held memory, with Clean GPU, Restart kernel and the
   * full diagnosis and advice in a dialog.
   */
  private _onOom(model: GpuKernelModel, oom: IOom): void {
    if (!this._monitor.settings.warnOnOutOfMemory) {
      return;
    }
    const kernelId = model.kernelId;
    const key = `${kernelId}\u0000${oom.executionCount ?? 'null'}`;
    if (this._oomToasts.has(key)) {
      return;
    }
    const trans = this._trans;
    const id = Notification.error(describeOom(oom, trans), {
      autoClose: false,
      actions: [
        {
          label: trans.__('Clean GPU'),
          caption: trans.__(
            'Insert and run a cell that frees stale references (output cache, last traceback)'
          ),
          displayType: 'accent' as const,
          callback: () => {
            void this._commands.execute(CommandIDs.clean, { kernelId });
          }
        },
        {
          label: trans.__('Restart kernel'),
          caption: trans.__(
            'Restart the kernel (frees everything, loses all variables)'
          ),
          callback: () => {
            void this._commands.execute(CommandIDs.restartKernel, { kernelId });
          }
        },
        {
          label: trans.__('What to try…'),
          caption: trans.__(
            'What held the GPU and what to try for the installed versions'
          ),
          displayType: 'link' as const,
          callback: () => {
            void showDialog({
              title: trans.__(
                'CUDA out of memory in cell %1',
                oom.executionCount === null ? '[*]' : `[${oom.executionCount}]`
              ),
              body: React.createElement(OomDetails, { oom, trans }),
              buttons: [Dialog.okButton({ label: trans.__('Close') })]
            });
          }
        }
      ]
    });
    this._oomToasts.set(key, id);
  }

  private _checkStacking(model: GpuKernelModel, inventory: IInventory): void {
    const groups = this._monitor.settings.warnOnStackedModels
      ? findStackedModels(inventory)
      : [];
    const signature = stackingSignature(groups);
    const toast = this._toasts.get(model.kernelId);
    if (!groups.length) {
      if (toast) {
        Notification.dismiss(toast.id);
        this._toasts.delete(model.kernelId);
      }
      return;
    }
    if (toast && toast.signature === signature) {
      return;
    }
    const group = groups[groups.length - 1];
    const message = describeStacking(group, this._trans, groups.length - 1);
    const kernelId = model.kernelId;
    const options = {
      autoClose: false as const,
      actions: [
        {
          label: this._trans.__('Clean GPU'),
          caption: this._trans.__(
            'Insert and run a cell that frees stale references (output cache, last traceback)'
          ),
          displayType: 'accent' as const,
          callback: () => {
            void this._commands.execute(CommandIDs.clean, { kernelId });
          }
        },
        {
          label: this._trans.__('Restart kernel'),
          caption: this._trans.__(
            'Restart the kernel (frees everything, loses all variables)'
          ),
          callback: () => {
            void this._commands.execute(CommandIDs.restartKernel, { kernelId });
          }
        },
        {
          label: this._trans.__("Don't warn again"),
          caption: this._trans.__(
            'Turn off stacked-model warnings in the settings'
          ),
          displayType: 'link' as const,
          callback: () => {
            void this._monitor.setSetting('warnOnStackedModels', false);
          }
        }
      ]
    };
    if (
      toast &&
      Notification.update({
        id: toast.id,
        message,
        type: 'warning',
        ...options
      })
    ) {
      toast.signature = signature;
      return;
    }
    const id = Notification.warning(message, options);
    this._toasts.set(kernelId, { id, signature });
  }

  private _onCleaned(model: GpuKernelModel, cleaned: ICleaned): void {
    // One toast per kernel: a second clean updates it rather than stacking.
    const message = describeCleaned(cleaned, this._trans);
    const options = { autoClose: 8000 };
    const id = this._cleanedToasts.get(model.kernelId);
    if (
      id &&
      Notification.update({ id, message, type: 'success', ...options })
    ) {
      return;
    }
    this._cleanedToasts.set(
      model.kernelId,
      Notification.success(message, options)
    );
  }

  private _monitor: IGpuMonitor;
  private _commands: CommandRegistry;
  private _trans: TranslationBundle;
  private _watched = new Set<GpuKernelModel>();
  private _toasts = new Map<string, { id: string; signature: string }>();
  private _cleanedToasts = new Map<string, string>();
  private _leakToasts = new Map<
    string,
    { id: string; message: string; closed: boolean }
  >();
  private _graphToasts = new Map<string, string>();
  private _graphWarned = new Set<string>();
  private _oomToasts = new Map<string, string>();
  private _leakChecked = new WeakMap<
    GpuKernelModel,
    { cells: number; seq: number }
  >();
  private _isDisposed = false;
}

/** GpuNotifier statics. */
export namespace GpuNotifier {
  /** Constructor options. */
  export interface IOptions {
    /** The monitor to follow. */
    monitor: IGpuMonitor;
    /** Commands run by the toast actions. */
    commands: CommandRegistry;
    /** Translations. */
    trans: TranslationBundle;
  }
}
