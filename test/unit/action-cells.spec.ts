/**
 * A second Clean GPU (or any action run again) replaces the earlier cell of
 * that action that the user has not edited, in one undoable step, on a real
 * JupyterLab NotebookModel; an edited, running or other action's cell stays.
 */
import { Notification } from '@jupyterlab/apputils';
import { nullTranslator } from '@jupyterlab/translation';
import {
  CELL_METADATA,
  CLEAN_ACTION,
  fingerprint,
  placeActionCell,
  replaceableCells
} from '../../src/action-cells';
import {
  generateCleanCell,
  planClean
} from '../../src/analysis/codegen/clean-cell';
import { insertCleanCell } from '../../src/commands';
import { c01Inventory } from './fixtures';
import { cellsOf, notebookOf, panelOf, quietYjs } from './notebooks';

const deps = {
  sessionDialogs: null,
  translator: nullTranslator,
  trans: nullTranslator.load('jupyterlab_gpu_hygiene')
};
const FIRST = generateCleanCell(planClean(c01Inventory()));
const SECOND = generateCleanCell(planClean(null));
const tags = (model: ReturnType<typeof notebookOf>) =>
  cellsOf(model).map(c => (c.metadata.tags as string[] | undefined) ?? []);

const subtle = globalThis.crypto.subtle;
/** As on a page served over plain HTTP from another host: no crypto.subtle. */
function withoutWebCrypto(): void {
  Object.defineProperty(globalThis.crypto, 'subtle', {
    configurable: true,
    value: undefined
  });
}

beforeEach(() => quietYjs());
afterEach(() => {
  Object.defineProperty(globalThis.crypto, 'subtle', {
    configurable: true,
    value: subtle
  });
  jest.restoreAllMocks();
  Notification.dismiss();
});

describe('fingerprint', () => {
  it('is the SHA-256 of the UTF-8 source, from WebCrypto', async () => {
    expect(await fingerprint('abc')).toBe(
      'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad'
    );
    expect(await fingerprint('\u00e9')).toBe(
      '4a99557e4033c3539de2eb65472017cad5f9557f7a0625a09f1c3f6e2ba69c4c'
    );
  });

  it('is null where the page has no crypto.subtle (plain HTTP)', async () => {
    withoutWebCrypto();
    expect(await fingerprint('abc')).toBeNull();
  });
});

describe('a second Clean GPU replaces the first clean cell', () => {
  it('in place when the clean cell is the active cell (right after the first Clean)', async () => {
    const model = notebookOf(['import torch', 'model = YOLO()', 'x = 1']);
    const panel = panelOf(model, 1);
    expect(await insertCleanCell(panel, FIRST, false, deps)).toBe(2);
    expect(panel.content.activeCellIndex).toBe(2);
    expect(cellsOf(model)[2]).toEqual({
      source: FIRST,
      metadata: {
        tags: ['gpu-hygiene-clean'],
        [CELL_METADATA]: { action: 'clean', sha256: await fingerprint(FIRST) }
      }
    });

    expect(await insertCleanCell(panel, SECOND, false, deps)).toBe(2);
    expect(cellsOf(model).map(c => c.source)).toEqual([
      'import torch',
      'model = YOLO()',
      SECOND,
      'x = 1'
    ]);
    expect(panel.content.activeCellIndex).toBe(2);
    // in place: nothing moved, no toast
    expect(Notification.manager.notifications).toEqual([]);
  });

  it('below the active cell when the earlier one is elsewhere, with a toast; one Undo restores it', async () => {
    const model = notebookOf(['a', 'b', 'c', 'd']);
    const panel = panelOf(model, 0);
    await insertCleanCell(panel, FIRST, false, deps); // at 1
    // as if it ran: its output (not an undoable change)
    (model.cells.get(1) as any).outputs.add({
      output_type: 'stream',
      name: 'stdout',
      text: 'first run\n'
    });
    (model.sharedModel as any).undoManager.stopCapturing();
    panel.content.activeCellIndex = 3; // on 'c'
    expect(await insertCleanCell(panel, SECOND, false, deps)).toBe(3);
    expect(cellsOf(model).map(c => c.source)).toEqual([
      'a',
      'b',
      'c',
      SECOND,
      'd'
    ]);
    expect(tags(model).filter(t => t.includes('gpu-hygiene-clean'))).toEqual([
      ['gpu-hygiene-clean']
    ]);
    expect(Notification.manager.notifications.map(n => n.message)).toEqual([
      'Replaced the earlier, unedited cell of this action; Undo (Z) brings it back.'
    ]);

    // Undo (what notebook:undo-cell-action does): the earlier cell is back, the new one gone
    model.sharedModel.undo();
    expect(cellsOf(model).map(c => c.source)).toEqual([
      'a',
      FIRST,
      'b',
      'c',
      'd'
    ]);
    expect(cellsOf(model)[1].metadata[CELL_METADATA]).toEqual({
      action: 'clean',
      sha256: await fingerprint(FIRST)
    });
    expect((model.cells.get(1) as any).outputs.toJSON()).toEqual([
      { output_type: 'stream', name: 'stdout', text: 'first run\n' }
    ]);
  });

  it('leaves a clean cell the user edited', async () => {
    const model = notebookOf(['a']);
    const panel = panelOf(model, 0);
    await insertCleanCell(panel, FIRST, false, deps);
    model.sharedModel.cells[1].setSource(`${FIRST}print("mine")\n`);
    panel.content.activeCellIndex = 1;
    expect(await insertCleanCell(panel, SECOND, false, deps)).toBe(2);
    expect(cellsOf(model).map(c => c.source)).toEqual([
      'a',
      `${FIRST}print("mine")\n`,
      SECOND
    ]);
  });

  it('leaves a clean cell that is running or queued', async () => {
    const model = notebookOf(['a']);
    const panel = panelOf(model, 0);
    await insertCleanCell(panel, FIRST, false, deps);
    (model.sharedModel.cells[1] as any).executionState = 'running';
    expect(await insertCleanCell(panel, SECOND, false, deps)).toBe(2);
    expect(cellsOf(model).map(c => c.source)).toEqual(['a', FIRST, SECOND]);
  });

  it('leaves a clean cell of an older version (a tag, no fingerprint)', async () => {
    const model = notebookOf(['a']);
    model.sharedModel.insertCell(1, {
      cell_type: 'code',
      source: FIRST,
      metadata: { tags: ['gpu-hygiene-clean'] }
    });
    const panel = panelOf(model, 1);
    await insertCleanCell(panel, SECOND, false, deps);
    expect(cellsOf(model).map(c => c.source)).toEqual(['a', FIRST, SECOND]);
  });

  it('without WebCrypto records no fingerprint and replaces nothing (the old behaviour)', async () => {
    withoutWebCrypto();
    const model = notebookOf(['a']);
    const panel = panelOf(model, 0);
    await insertCleanCell(panel, FIRST, false, deps);
    await insertCleanCell(panel, SECOND, false, deps);
    expect(cellsOf(model).map(c => c.source)).toEqual(['a', FIRST, SECOND]);
    expect(cellsOf(model)[1].metadata).toEqual({ tags: ['gpu-hygiene-clean'] });
  });

  it('replaces every unedited copy (a pasted one too)', async () => {
    const model = notebookOf(['a', 'b']);
    const panel = panelOf(model, 0);
    await insertCleanCell(panel, FIRST, false, deps); // at 1
    const copy = model.sharedModel.cells[1].toJSON();
    model.sharedModel.insertCell(3, copy as any); // pasted after 'b'
    panel.content.activeCellIndex = 3;
    expect(await insertCleanCell(panel, SECOND, false, deps)).toBe(2);
    expect(cellsOf(model).map(c => c.source)).toEqual(['a', 'b', SECOND]);
  });
});

describe('the other actions', () => {
  it('replace only their own earlier cell: same action and target', async () => {
    const model = notebookOf(['a']);
    const panel = panelOf(model, 0);
    const move = (name: string) => ({
      tag: 'gpu-hygiene-move-to-cpu',
      key: `move-to-cpu:${name}`
    });
    await insertCleanCell(panel, 'move results', false, deps, move('results'));
    await insertCleanCell(panel, 'move acts', false, deps, move('acts'));
    await insertCleanCell(panel, FIRST, false, deps);
    panel.content.activeCellIndex = 0;
    await insertCleanCell(
      panel,
      'move results 2',
      false,
      deps,
      move('results')
    );
    expect(cellsOf(model).map(c => c.source)).toEqual([
      'a',
      'move results 2',
      'move acts',
      FIRST
    ]);
    expect(
      cellsOf(model).map(c => (c.metadata[CELL_METADATA] as any)?.action)
    ).toEqual([
      undefined,
      'move-to-cpu:results',
      'move-to-cpu:acts',
      CLEAN_ACTION.key
    ]);
  });
});

describe('placeActionCell', () => {
  it('keeps a cell edited while its fingerprint was computed', async () => {
    const model = notebookOf(['a', 'b']);
    const sha = await fingerprint('old');
    placeActionCell(model.sharedModel, 0, 'old', CLEAN_ACTION, sha);
    const replace = await replaceableCells(model.sharedModel, 'clean');
    expect(replace.map(r => r.source)).toEqual(['old']);
    model.sharedModel.cells[1].setSource('old, edited');
    const placed = placeActionCell(
      model.sharedModel,
      1,
      'new',
      CLEAN_ACTION,
      await fingerprint('new'),
      replace
    );
    expect(placed).toEqual({ index: 2, replaced: [] });
    expect(cellsOf(model).map(c => c.source)).toEqual([
      'a',
      'old, edited',
      'new',
      'b'
    ]);
  });

  it('inserts at the top without an active cell, at the end below the last', () => {
    const model = notebookOf(['a']);
    expect(
      placeActionCell(model.sharedModel, -1, 'x', CLEAN_ACTION, null).index
    ).toBe(0);
    expect(
      placeActionCell(model.sharedModel, 9, 'y', CLEAN_ACTION, null).index
    ).toBe(2);
    expect(cellsOf(model).map(c => c.source)).toEqual(['x', 'a', 'y']);
  });
});
