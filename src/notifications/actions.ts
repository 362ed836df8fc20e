/**
 * The toast buttons, one builder per action. A button that runs a command
 * takes its caption (the tooltip) from that command, so the two cannot
 * drift; its label is the command's own where that is short (Clean GPU),
 * else one short label defined here (the palette's are longer: "Restart
 * Kernel to Free GPU…" is "Restart kernel" on a toast).
 */
import { Dialog, Notification, showDialog } from '@jupyterlab/apputils';
import type { TranslationBundle } from '@jupyterlab/translation';
import type { CommandRegistry } from '@lumino/commands';
import type { ReadonlyPartialJSONObject } from '@lumino/coreutils';
import React from 'react';
import { fixCommand, fixLabel, IFinding } from '../analysis/findings';
import type { IOomKernels } from '../analysis/processes/oom-idle-kernels';
import { OomDetails } from '../oom-details';
import type { IOom } from '../protocol';
import { CommandIDs, IGpuMonitor, IGpuSettings } from '../tokens';

/** A boolean setting that turns one kind of toast on or off. */
export type WarnSetting = {
  [K in keyof IGpuSettings]: IGpuSettings[K] extends boolean ? K : never;
}[keyof IGpuSettings];

/** Builds the buttons of the toasts. */
export class ToastActions {
  /** @param options - the commands, the monitor and translations. */
  constructor(options: ToastActions.IOptions) {
    this._commands = options.commands;
    this._monitor = options.monitor;
    this._trans = options.trans;
  }

  /**
   * Clean GPU for a kernel ({@link CommandIDs.clean}); accent. Its label is
   * the command's (short already); "Clean GPU" only while the command is
   * not registered (the commands plugin is off) or has no label.
   */
  cleanGpu(kernelId: string): Notification.IAction {
    const args = { kernelId };
    return this._command(
      CommandIDs.clean,
      args,
      this._commands.label(CommandIDs.clean, args) ||
        this._trans.__('Clean GPU'),
      'accent'
    );
  }

  /** Restart a kernel, with JupyterLab's confirmation ({@link CommandIDs.restartKernel}). */
  restartKernel(kernelId: string): Notification.IAction {
    return this._command(
      CommandIDs.restartKernel,
      { kernelId },
      this._trans.__('Restart kernel')
    );
  }

  /**
   * Interrupt a kernel's running cell ({@link CommandIDs.interruptKernel});
   * label "Interrupt kernel".
   *
   * @param displayType - `accent` where it is the toast's main button.
   */
  interruptKernel(
    kernelId: string,
    displayType?: Notification.ActionDisplayType
  ): Notification.IAction {
    return this._command(
      CommandIDs.interruptKernel,
      { kernelId },
      this._trans.__('Interrupt kernel'),
      displayType
    );
  }

  /**
   * Open the VRAM panel ({@link CommandIDs.openPanel}).
   *
   * @param displayType - `accent` where it is the toast's main button.
   */
  openPanel(
    displayType?: Notification.ActionDisplayType
  ): Notification.IAction {
    return this._command(
      CommandIDs.openPanel,
      {},
      this._trans.__('Open VRAM panel'),
      displayType
    );
  }

  /**
   * Fix a graph holder: the command asks, then inserts a cell that detaches
   * its tensors ({@link CommandIDs.fixGraphHolder}); accent.
   *
   * @param name - the user variable that keeps autograd graphs.
   */
  fixGraphHolder(kernelId: string, name: string): Notification.IAction {
    return this._command(
      CommandIDs.fixGraphHolder,
      { kernelId, name },
      this._trans.__('Fix…'),
      'accent'
    );
  }

  /**
   * Delete the variables that hold one model: the command asks first
   * ({@link CommandIDs.deleteModel}); label "Delete m…"; accent.
   *
   * @param names - the variables to delete (identifiers; the command checks again).
   */
  deleteModel(
    kernelId: string,
    modelId: string,
    names: ReadonlyArray<string>
  ): Notification.IAction {
    return this._command(
      CommandIDs.deleteModel,
      { kernelId, modelId, names: [...names] },
      this._trans.__('Delete %1…', names.join(', ')),
      'accent'
    );
  }

  /**
   * The button that fixes a finding: the command its fix maps to
   * (`fixCommand`), labelled by `fixLabel`, caption from the command;
   * accent. Null when no command can fix it (no button: never a Clean GPU
   * that frees nothing).
   */
  fix(kernelId: string, finding: IFinding): Notification.IAction | null {
    const command = fixCommand(finding.fix, kernelId);
    const label = fixLabel(finding.fix, this._trans);
    if (!command || label === null) {
      return null;
    }
    return this._command(command.id, command.args, label, 'accent');
  }

  /**
   * Shut down one of the user's other kernels: the command asks first
   * ({@link CommandIDs.shutdownKernel}); label "Shut down idle kernel…";
   * accent.
   *
   * @param kernelId - a kernel id of the server's answer (the command checks again).
   */
  shutDownKernel(kernelId: string): Notification.IAction {
    return this._command(
      CommandIDs.shutdownKernel,
      { kernelId },
      this._trans.__('Shut down idle kernel…'),
      'accent'
    );
  }

  /**
   * The full OOM diagnosis and what to try, in a dialog (no command); a link.
   *
   * @param kernels - the user's idle kernels on the device, asked when the
   *   dialog opens (the server's kernel list may have come in since the
   *   toast); their advice line offers Shut down kernel….
   */
  whatToTry(
    oom: IOom,
    kernels?: () => IOomKernels | null
  ): Notification.IAction {
    const trans = this._trans;
    return {
      label: trans.__('What to try…'),
      caption: trans.__(
        'What held the GPU and what to try for the installed versions'
      ),
      displayType: 'link',
      callback: () => {
        void showDialog({
          title: trans.__(
            'CUDA out of memory in cell %1',
            oom.executionCount === null ? '[*]' : `[${oom.executionCount}]`
          ),
          body: React.createElement(OomDetails, {
            oom,
            trans,
            kernels: kernels?.() ?? null,
            onShutDown: kernelId => {
              // The dialog closes first; the command asks with its own.
              for (const dialog of Dialog.tracker.filter(() => true)) {
                if (dialog.node.querySelector('.jp-GpuHygiene-oomDetails')) {
                  dialog.reject();
                }
              }
              void this._commands.execute(CommandIDs.shutdownKernel, {
                kernelId
              });
            }
          }),
          buttons: [Dialog.okButton({ label: trans.__('Close') })]
        });
      }
    };
  }

  /**
   * Don't warn again: turns `setting` off in the user settings, through the
   * monitor (which then dismisses the toasts of that kind); a link.
   *
   * @param caption - what is turned off, e.g. "Turn off leak-trend warnings
   *   in the settings" (the rule's own words).
   */
  dontWarnAgain(setting: WarnSetting, caption: string): Notification.IAction {
    return {
      label: this._trans.__("Don't warn again"),
      caption,
      displayType: 'link',
      callback: () => {
        void this._monitor.setSetting(setting, false);
      }
    };
  }

  /** A button that runs a command; its caption is the command's. */
  private _command(
    id: string,
    args: ReadonlyPartialJSONObject,
    label: string,
    displayType?: Notification.ActionDisplayType
  ): Notification.IAction {
    const caption = this._commands.caption(id, args);
    return {
      label,
      ...(caption ? { caption } : {}),
      ...(displayType ? { displayType } : {}),
      callback: () => {
        void this._commands.execute(id, args);
      }
    };
  }

  private _commands: CommandRegistry;
  private _monitor: IGpuMonitor;
  private _trans: TranslationBundle;
}

/** ToastActions statics. */
export namespace ToastActions {
  /** Constructor options. */
  export interface IOptions {
    /** Commands the buttons run, and whose captions they show. */
    commands: CommandRegistry;
    /** Writes the "Don't warn again" settings. */
    monitor: IGpuMonitor;
    /** Translations. */
    trans: TranslationBundle;
  }
}
