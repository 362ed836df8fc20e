/**
 * Keyed toasts: at most one JupyterLab notification per key (a kernel, a
 * kernel and a variable, a kernel and a cell), raised, updated in place
 * (`Notification.update`) or dismissed, and remembering the toasts the user
 * closed so that a rule can stay quiet.
 */
import { Notification } from '@jupyterlab/apputils';

/** One toast as a rule wants it to be. */
export interface IToast {
  /**
   * Which toast of its kernel this is: `''` for a rule's one toast per
   * kernel, else e.g. a variable name or a cell's execution count.
   */
  key: string;
  /** Notification type (`warning`, `error`, `success`, ...). */
  type: Notification.TypeOptions;
  /** The message; JupyterLab cuts it beyond `MAX_TOAST` characters. */
  message: string;
  /** Milliseconds before the toast hides itself, or false to keep it. */
  autoClose: number | false;
  /** Buttons, in order (see `actions.ts`); none when absent. */
  actions?: Notification.IAction[];
  /**
   * What the toast says, for de-duplication: a toast already shown with the
   * same signature is left as it is. Without one, every request updates it.
   */
  signature?: string;
}

/**
 * What a {@link ToastBook} does when asked for a toast whose key it holds:
 * - `update`: update it in place when its signature changed; if the user
 *   closed it, raise a new one;
 * - `quiet-after-close`: the same, but once the user closed it, stay quiet
 *   until the rule stops asking for it (it is then dismissed and forgotten);
 * - `once`: raise a toast once per key; while it is still on screen, update
 *   it in place when its signature changed (so that its figures stay true),
 *   but never raise it again once it was closed or dismissed (until the
 *   kernel is forgotten).
 */
export type ToastPolicy = 'update' | 'quiet-after-close' | 'once';

/**
 * The toasts of one rule, per kernel and key.
 *
 * "Closed by the user" means gone from `Notification.manager` (dismissed by
 * the user, or by a click on one of its buttons, which dismisses it): the
 * book learns it when `Notification.update` returns false and, under
 * `quiet-after-close`, remembers it.
 */
export class ToastBook {
  /**
   * @param policy - what to do with a key already shown ({@link ToastPolicy}).
   */
  constructor(readonly policy: ToastPolicy) {}

  /**
   * Raise or update one toast of a kernel, following the policy.
   *
   * @returns what happened: `raised`, `updated`, or `kept` (nothing to do:
   *   same signature, closed by the user, or already raised once).
   */
  show(kernelId: string, toast: IToast): 'raised' | 'updated' | 'kept' {
    const key = Private.keyOf(kernelId, toast.key);
    const shown = this._shown.get(key);
    if (this.policy === 'once' && this._raised.has(key)) {
      // raised once: only kept true while on screen, never raised again
      if (!shown || shown.closed) {
        return 'kept';
      }
      const result = this._update(shown, toast);
      if (result === 'gone') {
        shown.closed = true;
      }
      return result === 'updated' ? 'updated' : 'kept';
    }
    if (shown && !shown.closed) {
      const result = this._update(shown, toast);
      if (result !== 'gone') {
        return result === 'updated' ? 'updated' : 'kept';
      }
      if (this.policy === 'quiet-after-close') {
        shown.closed = true;
        return 'kept';
      }
    } else if (shown?.closed) {
      return 'kept';
    }
    this._raised.add(key);
    this._shown.set(key, Private.raise(toast));
    return 'raised';
  }

  /**
   * Update a toast on screen to `toast`: `same` when it already says that
   * (same signature), `updated`, or `gone` when it is no longer on screen
   * (closed by the user).
   */
  private _update(
    shown: Private.IShown,
    toast: IToast
  ): 'same' | 'updated' | 'gone' {
    if (toast.signature !== undefined && shown.signature === toast.signature) {
      return 'same';
    }
    const updated = Notification.update({
      id: shown.id,
      message: toast.message,
      type: toast.type,
      autoClose: toast.autoClose,
      actions: toast.actions
    });
    if (!updated) {
      return 'gone';
    }
    shown.signature = toast.signature;
    return 'updated';
  }

  /**
   * Make a kernel's toasts what a rule wants now: dismiss those whose key is
   * not in `toasts`, then {@link show} each of `toasts`, in order.
   */
  sync(kernelId: string, toasts: ReadonlyArray<IToast>): void {
    const wanted = new Set(toasts.map(t => Private.keyOf(kernelId, t.key)));
    this._dismissWhere(kernelId, key => !wanted.has(key));
    for (const toast of toasts) {
      this.show(kernelId, toast);
    }
  }

  /**
   * Dismiss a kernel's toast of `key`, or all its toasts when `key` is left
   * out. Under `once` the keys stay raised (they are not raised again).
   */
  dismiss(kernelId: string, key?: string): void {
    const only = key === undefined ? null : Private.keyOf(kernelId, key);
    this._dismissWhere(kernelId, k => only === null || k === only);
  }

  /**
   * Forget everything about a kernel without dismissing its toasts: they
   * stay on screen, and the next request for a key raises a new toast.
   */
  forget(kernelId: string): void {
    const prefix = Private.keyOf(kernelId, '');
    for (const key of [...this._shown.keys()]) {
      if (key.startsWith(prefix)) {
        this._shown.delete(key);
      }
    }
    for (const key of [...this._raised]) {
      if (key.startsWith(prefix)) {
        this._raised.delete(key);
      }
    }
  }

  /** The notification id of a kernel's toast, or null when none is held. */
  idOf(kernelId: string, key = ''): string | null {
    return this._shown.get(Private.keyOf(kernelId, key))?.id ?? null;
  }

  /** Whether the book learnt that the user closed this toast (`quiet-after-close`). */
  isClosed(kernelId: string, key = ''): boolean {
    return this._shown.get(Private.keyOf(kernelId, key))?.closed ?? false;
  }

  private _dismissWhere(
    kernelId: string,
    match: (key: string) => boolean
  ): void {
    const prefix = Private.keyOf(kernelId, '');
    for (const [key, shown] of [...this._shown]) {
      if (key.startsWith(prefix) && match(key)) {
        if (!shown.closed) {
          Notification.dismiss(shown.id);
        }
        this._shown.delete(key);
      }
    }
  }

  private _shown = new Map<string, Private.IShown>();
  private _raised = new Set<string>();
}

namespace Private {
  /** A toast the book raised. */
  export interface IShown {
    id: string;
    signature: string | undefined;
    /** The user closed it (`Notification.update` returned false). */
    closed: boolean;
  }

  /** The book's key of a kernel's toast; kernel ids contain no NUL. */
  export function keyOf(kernelId: string, key: string): string {
    return `${kernelId}\u0000${key}`;
  }

  /** Raise a new notification for `toast`. */
  export function raise(toast: IToast): IShown {
    const id = Notification.emit(toast.message, toast.type, {
      autoClose: toast.autoClose,
      ...(toast.actions ? { actions: toast.actions } : {})
    });
    return { id, signature: toast.signature, closed: false };
  }
}
