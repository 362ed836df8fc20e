/**
 * Where the extension's action cells go: Clean GPU's `clear_gpu` cell and
 * the cells of the VRAM panel's and the toasts' actions (Free, Delete…,
 * Move to CPU…, Drop trainer…, Drop workers…, Detach…).
 *
 * A second run of the same action does not pile up copies: every inserted
 * cell records, in its metadata under {@link CELL_METADATA}, the action it
 * was inserted for (its `key`: `clean`, `move-to-cpu:results`, …) and the
 * SHA-256 of the source it was inserted with (WebCrypto's
 * `crypto.subtle.digest`). When the same action inserts its cell again, the
 * earlier cells of that action whose source still has that fingerprint (the
 * user has not edited them) and that are not running are removed, in one
 * undoable step with the insertion: one Undo (Z in command mode) brings them
 * back and takes the new cell away. The new cell goes below the active cell
 * or, when the active cell is one of those it replaces, in its place. A cell
 * the user edited, a running one, one of another action or target, and any
 * cell where the browser offers no WebCrypto (a page served over plain HTTP
 * from another host: no fingerprint is recorded) are left alone.
 */
import type { INotebookModel } from '@jupyterlab/notebook';

/** The cell metadata key under which an inserted cell says what it is. */
export const CELL_METADATA = 'jupyterlab-gpu-hygiene';

/** The shared (Yjs) notebook and cell models of JupyterLab. */
type SharedNotebook = INotebookModel['sharedModel'];
type SharedCell = SharedNotebook['cells'][number];

/** What an inserted cell is for. */
export interface IActionCell {
  /** The cell's tag (`gpu-hygiene-clean`, `gpu-hygiene-move-to-cpu`, …). */
  tag: string;
  /**
   * The action and its target: cells with the same key replace each other
   * (`clean` for Clean GPU, `free:<model id>`, `move-to-cpu:<variable>`).
   */
  key: string;
}

/** What {@link CELL_METADATA} holds. */
export interface IInsertedCell {
  /** {@link IActionCell.key}. */
  action: string;
  /** SHA-256 (hex) of the source the cell was inserted with. */
  sha256: string;
}

/** Clean GPU's cell. */
export const CLEAN_ACTION: IActionCell = {
  tag: 'gpu-hygiene-clean',
  key: 'clean'
};

/**
 * The SHA-256 of `text` (UTF-8) as 64 hex digits, from WebCrypto; null
 * where the page has none (`crypto.subtle` exists in secure contexts only:
 * HTTPS or localhost).
 */
export async function fingerprint(text: string): Promise<string | null> {
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) {
    return null;
  }
  const digest = await subtle.digest('SHA-256', new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), b =>
    b.toString(16).padStart(2, '0')
  ).join('');
}

/** The {@link CELL_METADATA} of a cell, or null when it has none (or another shape). */
export function insertedAs(cell: SharedCell): IInsertedCell | null {
  const value = cell.getMetadata(CELL_METADATA) as Partial<IInsertedCell>;
  return value &&
    typeof value.action === 'string' &&
    typeof value.sha256 === 'string'
    ? { action: value.action, sha256: value.sha256 }
    : null;
}

/** An earlier cell to replace and the source it was checked with. */
export interface IReplaceable {
  cell: SharedCell;
  source: string;
}

/**
 * The cells of `notebook` inserted for `key` that nobody edited since
 * (their source still has the recorded SHA-256) and that are not running
 * or queued. Empty without WebCrypto.
 */
export async function replaceableCells(
  notebook: SharedNotebook,
  key: string
): Promise<IReplaceable[]> {
  const found: IReplaceable[] = [];
  for (const cell of notebook.cells) {
    const inserted = insertedAs(cell);
    if (inserted?.action !== key) {
      continue;
    }
    if ('executionState' in cell && cell.executionState === 'running') {
      continue;
    }
    const source = cell.getSource();
    if ((await fingerprint(source)) === inserted.sha256) {
      found.push({ cell, source });
    }
  }
  return found;
}

/** Where {@link placeActionCell} put the new cell. */
export interface IPlaced {
  /** Index of the new cell. */
  index: number;
  /** Indices (before the change) of the cells it replaced. */
  replaced: number[];
}

/**
 * Insert a code cell of `source` for `action` below the cell at `active`
 * (-1: none), removing the `replace` cells that are still in the notebook
 * with the source they were checked with, in one undoable transaction.
 * When the active cell is one of them the new cell takes its place.
 *
 * @param sha256 - the fingerprint of `source` (null: none is recorded, and
 *   the cell will never be replaced).
 */
export function placeActionCell(
  notebook: SharedNotebook,
  active: number,
  source: string,
  action: IActionCell,
  sha256: string | null,
  replace: ReadonlyArray<IReplaceable> = []
): IPlaced {
  const placed: IPlaced = { index: 0, replaced: [] };
  notebook.transact(() => {
    // a cell edited (or removed) while its fingerprint was computed stays
    const indices = replace
      .filter(r => r.cell.getSource() === r.source)
      .map(r => notebook.cells.indexOf(r.cell))
      .filter(i => i >= 0)
      .sort((a, b) => a - b);
    const at = Math.min(Math.max(active, -1), notebook.cells.length - 1);
    const before = indices.filter(i => i < at).length;
    const onActive = at >= 0 && indices.includes(at);
    for (const i of [...indices].reverse()) {
      notebook.deleteCell(i);
    }
    placed.index = Math.min(
      at + 1 - before - (onActive ? 1 : 0),
      notebook.cells.length
    );
    placed.replaced = indices;
    notebook.insertCell(placed.index, {
      cell_type: 'code',
      source,
      metadata: {
        tags: [action.tag],
        ...(sha256 === null
          ? {}
          : { [CELL_METADATA]: { action: action.key, sha256 } })
      }
    });
  });
  return placed;
}
