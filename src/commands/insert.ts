/**
 * Insert an action's cell (Clean GPU, a VRAM panel row's fix) below the
 * active cell, replacing the earlier unedited cells of the same action.
 */
import { ISessionContextDialogs, Notification } from '@jupyterlab/apputils';
import { NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import type { ITranslator, TranslationBundle } from '@jupyterlab/translation';
import {
  CLEAN_ACTION,
  fingerprint,
  placeActionCell,
  replaceableCells,
  type IActionCell
} from '../action-cells';

/** What {@link insertCleanCell} needs besides the notebook. */
export interface IInsertDeps {
  sessionDialogs: ISessionContextDialogs | null;
  translator: ITranslator;
  trans: TranslationBundle;
}

/**
 * Insert an action's cell below the active cell of `panel`, and run it when
 * asked. The earlier cells of the same action that the user has not edited
 * are replaced, in one undoable step (see `action-cells.ts`): a second Clean
 * GPU leaves one clean cell, with the second run's output. A toast says so
 * when one of them was elsewhere in the notebook.
 *
 * @param action - the cell's tag and action key (default Clean GPU's).
 * @returns the index of the inserted cell.
 * @throws Error when the notebook has no model.
 */
export async function insertCleanCell(
  panel: NotebookPanel,
  code: string,
  run: boolean,
  deps: IInsertDeps,
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
    const { trans } = deps;
    Notification.info(
      trans._n(
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
