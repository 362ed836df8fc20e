/**
 * What every group of commands shares: the dependencies of
 * {@link addCommands}, the kernel model a command's arguments name, the
 * insertion of an action cell as the settings say, and the confirmation
 * dialog of the fixes.
 */
import { Dialog, showDialog } from '@jupyterlab/apputils';
import type { NotebookPanel } from '@jupyterlab/notebook';
import type { Kernel } from '@jupyterlab/services';
import type { CommandRegistry } from '@lumino/commands';
import type { IActionCell } from '../action-cells';
import type { GpuKernelModel } from '../model';
import type { IGpuMonitor } from '../tokens';
import * as React from 'react';
import { confirmBody, withCode } from './confirm';
import { insertCleanCell, type IInsertDeps } from './insert';

/** Dependencies of {@link addCommands}. */
export interface ICommandDeps extends IInsertDeps {
  commands: CommandRegistry;
  monitor: IGpuMonitor;
  /**
   * JupyterLab's kernel manager (`app.serviceManager.kernels`), for Shut
   * down kernel…; without it that command is disabled.
   */
  kernels?: Pick<Kernel.IManager, 'shutdown'>;
}

/** The dependencies and the helpers each group of commands registers with. */
export interface ICommandContext extends ICommandDeps {
  /** The model of the kernel `args.kernelId` names, else the current notebook's; null when none. */
  modelFor(args: { kernelId?: unknown }): GpuKernelModel | null;
  /**
   * Insert `code` below the active cell of `panel` ({@link insertCleanCell}),
   * and run it when the `cleanAction` setting is `insert-and-run`.
   *
   * @returns the index of the inserted cell.
   */
  insert(
    panel: NotebookPanel,
    code: string,
    action?: IActionCell
  ): Promise<number>;
  /**
   * Ask with Cancel and a warning button labelled `accept`. `title` and
   * `body` may mark values as code (`asCode` of ./confirm); `code` is the cell the
   * action inserts, shown below the body.
   *
   * @returns whether the user accepted.
   */
  confirm(
    title: string,
    body: string,
    accept: string,
    code?: string
  ): Promise<boolean>;
}

/** The context of `deps`. */
export function commandContext(deps: ICommandDeps): ICommandContext {
  const { monitor, trans } = deps;
  return {
    ...deps,
    modelFor: args =>
      typeof args.kernelId === 'string'
        ? (monitor.models.find(m => m.kernelId === args.kernelId) ?? null)
        : monitor.currentModel,
    insert: (panel, code, action) =>
      insertCleanCell(
        panel,
        code,
        monitor.settings.cleanAction === 'insert-and-run',
        deps,
        action
      ),
    confirm: async (title, body, accept, code) => {
      const result = await showDialog({
        title: <span>{withCode(title)}</span>,
        body: confirmBody(body, code, trans),
        buttons: [
          Dialog.cancelButton({ label: trans.__('Cancel') }),
          Dialog.warnButton({ label: accept })
        ]
      });
      return result.button.accept;
    }
  };
}
