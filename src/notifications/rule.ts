/**
 * The shape of a toast rule: which model events it looks at, and for each
 * the toasts that should exist. The notifier (`index.ts`) calls the hooks
 * and hands the result to the rule's `ToastBook` (`toasts.ts`).
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import type { GpuKernelModel } from '../model';
import type { ICleaned, IInventory, IOom } from '../protocol';
import type { IGpuMonitor, IGpuSettings } from '../tokens';
import type { ToastActions } from './actions';
import type { IToast, ToastPolicy } from './toasts';

/**
 * What a rule's hook returns: the toasts it wants, or null when the event
 * changes nothing for it (nothing is raised, updated or dismissed).
 *
 * For a `state` rule the array is every toast the kernel should have now
 * (an empty array dismisses them all); for an `event` rule it is the toasts
 * to raise or update for this event.
 */
export type RuleResult = ReadonlyArray<IToast> | null;

/**
 * How long a toast about the kernel's state (findings, graph holders, two
 * named stacked models) stays on screen, milliseconds (15 s). It would
 * otherwise cover the VRAM panel's lower rows for good; JupyterLab keeps it
 * in its notification center (the bell in the status bar), the panel lists
 * the same, and an update in place (the state got worse) shows it again. The
 * stale-model warning, the leak toast of a climbing cell and the OOM toast
 * stay until closed (or, the warning, until the stacking ends).
 */
export const STATE_TOAST_AUTO_CLOSE = 15_000;

/**
 * One kind of toast. A rule only decides (message, type, actions, key); it
 * never calls `Notification` itself.
 */
export interface IToastRule {
  /** Short id, e.g. `stacked` (tests, debugging). */
  readonly id: string;
  /** How its toasts are kept per key ({@link ToastPolicy}). */
  readonly policy: ToastPolicy;
  /**
   * `state`: the toasts describe the kernel as it is now (stacked models, a
   * leak, a graph holder); those no longer wanted are dismissed, and all go
   * when the kernel's model is disposed. `event`: they report something that
   * happened (an OOM, a clean); they stay on screen when the model goes.
   */
  readonly describes: 'state' | 'event';
  /** After each inventory (end of a cell, or on request). */
  onInventory?(
    model: GpuKernelModel,
    inventory: IInventory,
    settings: IGpuSettings
  ): RuleResult;
  /** After any change of the model (samples, status, inventory). */
  onChanged?(model: GpuKernelModel, settings: IGpuSettings): RuleResult;
  /** After a clean cell reported what it freed. */
  onCleaned?(
    model: GpuKernelModel,
    cleaned: ICleaned,
    settings: IGpuSettings
  ): RuleResult;
  /** After a cell failed with CUDA out of memory. */
  onOutOfMemory?(
    model: GpuKernelModel,
    oom: IOom,
    settings: IGpuSettings
  ): RuleResult;
  /** After the settings changed (a setting turned off dismisses its toasts at once). */
  onSettings?(model: GpuKernelModel, settings: IGpuSettings): RuleResult;
}

/** What a rule is built with (one rule instance per notifier). */
export interface IRuleContext {
  /** Translations of the extension. */
  readonly trans: TranslationBundle;
  /** The toast buttons. */
  readonly actions: ToastActions;
  /**
   * The monitor, for rules that join a kernel's facts with the other kernels
   * and the server's kernel list (the OOM rule: the user's idle kernels on
   * the device).
   */
  readonly monitor?: IGpuMonitor;
}

/** Builds a rule; it may keep per-kernel state of its own (the leak rule does). */
export type ToastRuleFactory = (context: IRuleContext) => IToastRule;
