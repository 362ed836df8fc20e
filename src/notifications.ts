/**
 * Toasts: a warning when model instances stack up in a kernel, a warning
 * when PyTorch's allocated memory climbs steadily (each one toast per kernel,
 * updated rather than stacked), and an info toast after a clean.
 */
import { Notification } from '@jupyterlab/apputils';
import type { TranslationBundle } from '@jupyterlab/translation';
import type { CommandRegistry } from '@lumino/commands';
import type { IDisposable } from '@lumino/disposable';
import { cellRows } from './analysis/cells';
import { formatBytes, formatPlacement, sumBytes } from './analysis/format';
import {
  findStackedModels,
  holderNames,
  IStackedGroup,
  stackingSignature
} from './analysis/stacking';
import { FLOOR_SIZE, ILeakTrend, leakTrend } from './analysis/trend';
import type { GpuKernelModel } from './model';
import type { ICleaned, IInventory, IModelInfo } from './protocol';
import { CommandIDs, IGpuMonitor, IGpuSettings } from './tokens';

/** Toast messages are cut by JupyterLab beyond this length. */
const MAX_TOAST = 140;

function listNames(names: string[], max: number): string {
  if (names.length <= max) {
    return names.join(', ');
  }
  return `${names.slice(0, max).join(', ')} +${names.length - max}`;
}

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

/**
 * The leak trend of a kernel: the first device whose allocated memory climbs
 * steadily, or null.
 */
export function findLeak(
  model: GpuKernelModel,
  settings: Pick<IGpuSettings, 'leakMinPoints' | 'leakMinR2'>
): ILeakTrend | null {
  const samples = model.samples;
  for (const device of model.latestSample?.devices ?? []) {
    if (device.allocated === null) {
      continue;
    }
    const rows = cellRows(samples, model.cells, device.index);
    const trend = leakTrend(rows, samples, device.index, settings);
    if (trend.verdict === 'rising') {
      return trend;
    }
  }
  return null;
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
    model.disposed.connect(this._forget, this);
  }

  private _forget(model: GpuKernelModel): void {
    this._watched.delete(model);
    model.inventoryChanged.disconnect(this._onInventory, this);
    model.cleaned.disconnect(this._onCleaned, this);
    model.changed.disconnect(this._onChanged, this);
    const toast = this._toasts.get(model.kernelId);
    if (toast) {
      Notification.dismiss(toast.id);
      this._toasts.delete(model.kernelId);
    }
    this._dismissLeak(model.kernelId);
    this._leakChecked.delete(model);
    this._cleanedToasts.delete(model.kernelId);
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
