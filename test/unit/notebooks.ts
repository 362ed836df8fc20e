/**
 * Real notebook models for the tests of the inserted cells: a JupyterLab
 * `NotebookModel` (its Yjs shared model, undo included) and just enough of
 * a `NotebookPanel` around it for `insertCleanCell` (insert only, no run).
 */
import { NotebookModel, type NotebookPanel } from '@jupyterlab/notebook';

/**
 * Silence the two warnings Yjs prints under jest whenever a cell is added
 * (the shared model reads a cell before it joins the document; the browser
 * build does not print them); every other warning still shows.
 */
export function quietYjs(): void {
  const warn = console.warn.bind(console);
  jest.spyOn(console, 'warn').mockImplementation((...args: unknown[]) => {
    if (!/^(Invalid access|\[yjs#509\])/.test(String(args[0]))) {
      warn(...args);
    }
  });
}

/** A notebook model with a code cell per source. */
export function notebookOf(sources: string[]): NotebookModel {
  const model = new NotebookModel();
  model.sharedModel.insertCells(
    0,
    sources.map(source => ({ cell_type: 'code', source }))
  );
  return model;
}

/** What the cells of `model` are: source and metadata. */
export function cellsOf(
  model: NotebookModel
): Array<{ source: string; metadata: Record<string, unknown> }> {
  return model.sharedModel.cells.map(c => ({
    source: c.getSource(),
    metadata: c.getMetadata() as Record<string, unknown>
  }));
}

/** A panel whose content is a notebook on `model` with cell `active` active. */
export function panelOf(
  model: NotebookModel,
  active: number
): NotebookPanel & {
  content: { activeCellIndex: number; mode: string };
} {
  return {
    content: {
      activeCellIndex: active,
      mode: 'edit',
      model,
      deselectAll: () => undefined
    },
    sessionContext: {}
  } as any;
}
