/**
 * Toasts, as rules (the shape of jupyterlab-lsp's `notifications/`).
 *
 * ```
 * notifications/
 *   toast-loader.ts   NotifierLoader: loads this chunk when the first kernel model appears (start path)
 *   index.ts          GpuNotifier: follows the monitor's models, asks the rules, keeps the toasts
 *   rule.ts           IToastRule: per model event, the toasts that should exist (key, message, type, actions)
 *   toasts.ts         ToastBook: keyed raise / update in place / dismiss; remembers toasts the user closed
 *   actions.ts        ToastActions: one builder per button, captions taken from the commands
 *   text.ts           the toasts' texts (describeStacking, describeLeak, ...)
 *   stacked-toast.ts  model instances stack up          one per kernel, updated in place
 *   finding-toast.ts  other warnings of the findings    one per kernel and kind, updated in place
 *   leak-toast.ts     allocated memory climbs           one per kernel, quiet after close until the climb stops
 *   graph-toast.ts    a variable keeps autograd graphs  one per kernel and variable, ever
 *   oom-toast.ts      a cell ran out of CUDA memory     one per kernel and cell
 *   cleaned-toast.ts  what a clean cell freed           one per kernel, updated in place, hides after 8 s
 * ```
 *
 * Everything here but `toast-loader.ts` is one chunk that JupyterLab's start
 * does not load: `toast-loader.ts` loads it when the monitor's first kernel
 * model appears and hands the notifier what the models signalled meanwhile.
 *
 * Adding a toast = one rule file, one registry line ({@link TOAST_RULES}),
 * its setting (`IGpuSettings`, `DEFAULT_SETTINGS` and `schema/plugin.json`);
 * its text goes next to the others in `text.ts`, and a new kind of button
 * in `actions.ts`.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import type { CommandRegistry } from '@lumino/commands';
import type { IDisposable } from '@lumino/disposable';
import type { ISignal, Slot } from '@lumino/signaling';
import type { GpuKernelModel } from '../model';
import type { ICleaned, IInventory, IOom } from '../protocol';
import type { IGpuMonitor, IGpuSettings } from '../tokens';
import { ToastActions } from './actions';
import { cleanedRule } from './cleaned-toast';
import { findingsRule } from './finding-toast';
import { graphsRule } from './graph-toast';
import { leakRule } from './leak-toast';
import { oomRule } from './oom-toast';
import type { IToastRule, RuleResult, ToastRuleFactory } from './rule';
import { stackedRule } from './stacked-toast';
import { withNotebook } from './text';
import { ToastBook } from './toasts';

export { findLeak } from '../analysis/memory/leak';
export {
  describeCleaned,
  describeGraphHolder,
  describeLeak,
  describeStacking
} from './text';

/**
 * The toast rules, in the order they are asked. On an inventory the graph
 * holders come before the stacked models (the order the toasts were always
 * raised in).
 */
export const TOAST_RULES: ReadonlyArray<ToastRuleFactory> = [
  graphsRule,
  stackedRule,
  findingsRule,
  leakRule,
  oomRule,
  cleanedRule
];

/**
 * Raises, updates and dismisses the toasts of every kernel the monitor
 * watches: it hands each model event to the rules and keeps what they want
 * in one {@link ToastBook} per rule.
 */
export class GpuNotifier implements IDisposable {
  /** Builds the rules and follows the monitor's models, those there now and those to come. */
  constructor(options: GpuNotifier.IOptions) {
    this._monitor = options.monitor;
    this._trans = options.trans;
    const context = {
      trans: options.trans,
      actions: new ToastActions(options),
      monitor: options.monitor
    };
    this._rules = (options.rules ?? TOAST_RULES).map(create => {
      const rule = create(context);
      return { rule, book: new ToastBook(rule.policy) };
    });
    for (const [signal, slot] of this._monitorSlots()) {
      signal.connect(slot, this);
    }
    this._monitor.models.forEach(m => this._watch(this._monitor, m));
    for (const event of options.backlog ?? []) {
      this._replay(event);
    }
  }

  /** Whether the notifier was disposed. */
  get isDisposed(): boolean {
    return this._isDisposed;
  }

  /**
   * Disconnect from the monitor and every model. The toasts on screen stay
   * (the user may still read them); no new one follows.
   */
  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    for (const [signal, slot] of this._monitorSlots()) {
      signal.disconnect(slot, this);
    }
    for (const model of this._watched) {
      this._unwatch(model);
    }
    this._watched.clear();
  }

  /** The monitor's signals the notifier follows: connected and disconnected from this one list. */
  private _monitorSlots(): Array<
    [ISignal<IGpuMonitor, any>, Slot<IGpuMonitor, any>]
  > {
    return [
      [this._monitor.modelAdded, this._watch],
      [this._monitor.settingsChanged, this._onSettings]
    ];
  }

  /** A model's signals the notifier follows: connected and disconnected from this one list. */
  private _modelSlots(
    model: GpuKernelModel
  ): Array<[ISignal<GpuKernelModel, any>, Slot<GpuKernelModel, any>]> {
    return [
      [model.inventoryChanged, this._onInventory],
      [model.changed, this._onChanged],
      [model.cleaned, this._onCleaned],
      [model.outOfMemory, this._onOutOfMemory],
      [model.disposed, this._onDisposed]
    ];
  }

  private _watch(_: IGpuMonitor, model: GpuKernelModel): void {
    if (this._watched.has(model)) {
      return;
    }
    this._watched.add(model);
    for (const [signal, slot] of this._modelSlots(model)) {
      signal.connect(slot, this);
    }
  }

  private _unwatch(model: GpuKernelModel): void {
    for (const [signal, slot] of this._modelSlots(model)) {
      signal.disconnect(slot, this);
    }
  }

  private _onInventory(model: GpuKernelModel, inventory: IInventory): void {
    this._ask(model, (rule, settings) =>
      rule.onInventory?.(model, inventory, settings)
    );
  }

  private _onChanged(model: GpuKernelModel): void {
    this._ask(model, (rule, settings) => rule.onChanged?.(model, settings));
  }

  private _onCleaned(model: GpuKernelModel, cleaned: ICleaned): void {
    this._ask(model, (rule, settings) =>
      rule.onCleaned?.(model, cleaned, settings)
    );
  }

  private _onOutOfMemory(model: GpuKernelModel, oom: IOom): void {
    this._ask(model, (rule, settings) =>
      rule.onOutOfMemory?.(model, oom, settings)
    );
  }

  private _onSettings(): void {
    for (const model of this._watched) {
      this._ask(model, (rule, settings) => rule.onSettings?.(model, settings));
    }
  }

  /**
   * The model is gone: stop following it; its state toasts are dismissed,
   * its event toasts stay on screen and are forgotten.
   */
  private _onDisposed(model: GpuKernelModel): void {
    this._unwatch(model);
    this._watched.delete(model);
    for (const { rule, book } of this._rules) {
      if (rule.describes === 'state') {
        book.dismiss(model.kernelId);
      } else {
        book.forget(model.kernelId);
      }
    }
  }

  /** Hand one event signalled before the notifier existed to the rules. */
  private _replay(event: GpuNotifier.IEvent): void {
    switch (event.kind) {
      case 'inventory':
        this._onInventory(event.model, event.inventory);
        break;
      case 'changed':
        this._onChanged(event.model);
        break;
      case 'cleaned':
        this._onCleaned(event.model, event.cleaned);
        break;
      case 'outOfMemory':
        this._onOutOfMemory(event.model, event.oom);
        break;
      case 'disposed':
        this._onDisposed(event.model);
        break;
      case 'settings':
        this._onSettings();
        break;
    }
  }

  /** Ask every rule, in order, and keep the toasts each one wants. */
  private _ask(
    model: GpuKernelModel,
    hook: (rule: IToastRule, settings: IGpuSettings) => RuleResult | undefined
  ): void {
    const settings = this._monitor.settings;
    // every toast names its notebook: its notification-centre entry outlives it
    const notebook = this._monitor.panelFor(model)?.title.label || null;
    for (const { rule, book } of this._rules) {
      const asked = hook(rule, settings);
      if (!asked) {
        continue;
      }
      const toasts = asked.map(toast => ({
        ...toast,
        message: withNotebook(notebook, toast.message, this._trans)
      }));
      if (rule.describes === 'state') {
        book.sync(model.kernelId, toasts);
      } else {
        toasts.forEach(toast => book.show(model.kernelId, toast));
      }
    }
  }

  private _monitor: IGpuMonitor;
  private _trans: TranslationBundle;
  private _rules: ReadonlyArray<{ rule: IToastRule; book: ToastBook }>;
  private _watched = new Set<GpuKernelModel>();
  private _isDisposed = false;
}

/** GpuNotifier statics. */
export namespace GpuNotifier {
  /** Constructor options. */
  export interface IOptions {
    /** The monitor to follow; it also writes the "Don't warn again" settings. */
    monitor: IGpuMonitor;
    /** Commands run by the toast buttons, and whose captions they show. */
    commands: CommandRegistry;
    /** Translations. */
    trans: TranslationBundle;
    /** The rules (default {@link TOAST_RULES}). */
    rules?: ReadonlyArray<ToastRuleFactory>;
    /**
     * What the monitor and its models signalled before the notifier was
     * created (`NotifierLoader`, while this chunk was loading), in order;
     * handed to the rules right away, against the models' current state.
     */
    backlog?: ReadonlyArray<IEvent>;
  }

  /** A signal the notifier follows, as `NotifierLoader` records it. */
  export type IEvent =
    | { kind: 'inventory'; model: GpuKernelModel; inventory: IInventory }
    | { kind: 'changed'; model: GpuKernelModel }
    | { kind: 'cleaned'; model: GpuKernelModel; cleaned: ICleaned }
    | { kind: 'outOfMemory'; model: GpuKernelModel; oom: IOom }
    | { kind: 'disposed'; model: GpuKernelModel }
    | { kind: 'settings' };
}
