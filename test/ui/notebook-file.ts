/**
 * Notebook files for the Galata specs that must not depend on JupyterLab's
 * "Select Kernel" dialog: a notebook whose metadata names its kernelspec
 * opens on that kernel directly.
 */
import type { IJupyterLabPageFixture } from '@jupyterlab/galata';

/** Kernelspecs the test server offers (test/ui/jupyter_server_test_config.py). */
export const KERNELSPECS = {
  python3: {
    name: 'python3',
    display_name: 'Python 3 (ipykernel)',
    language: 'python'
  },
  echo: {
    name: 'echo',
    display_name: 'Test echo kernel (not Python)',
    language: 'echo'
  },
  replay: {
    name: 'gpu-hygiene-replay',
    display_name: 'GPU hygiene replay (tests)',
    language: 'python'
  }
};

/**
 * nbformat 4 JSON of a notebook of code cells (not run) on `kernel`.
 *
 * @param kernel - one of {@link KERNELSPECS}.
 * @param cells - source of each code cell; at least one (empty) cell.
 */
export function notebookJson(
  kernel: keyof typeof KERNELSPECS,
  cells: string[] = ['']
): string {
  const spec = KERNELSPECS[kernel];
  return JSON.stringify({
    cells: cells.map(source => ({
      cell_type: 'code',
      execution_count: null,
      metadata: {},
      outputs: [],
      source
    })),
    metadata: {
      kernelspec: spec,
      language_info: { name: spec.language }
    },
    nbformat: 4,
    nbformat_minor: 5
  });
}

/**
 * Write a notebook on `kernel` to `path` (under the test's tmpPath) and open
 * it; its kernel starts without a dialog.
 */
export async function openNotebookOn(
  page: IJupyterLabPageFixture,
  path: string,
  kernel: keyof typeof KERNELSPECS,
  cells?: string[]
): Promise<void> {
  await page.contents.uploadContent(notebookJson(kernel, cells), 'text', path);
  await page.notebook.openByPath(path);
  await page.notebook.activate(path.split('/').pop()!);
}

/**
 * Source of cell `index` of the active notebook, read from its model.
 * (Galata's `getCellTextInput` copies it through the clipboard: enter the
 * editor, select all, copy, read, leave; about 1.3 s a call.)
 *
 * @throws when the active widget has no cell `index`.
 */
export async function cellSource(
  page: IJupyterLabPageFixture,
  index: number
): Promise<string> {
  return page.evaluate(i => {
    const cells = (window as any).jupyterapp.shell.currentWidget?.content?.model
      ?.cells;
    const cell = cells && i < cells.length ? cells.get(i) : null;
    if (!cell) {
      throw new Error(`the active notebook has no cell ${i}`);
    }
    return cell.sharedModel.getSource() as string;
  }, index);
}

/**
 * Set the source of code cell `index` of the active notebook through its
 * model, and make it the active cell: what typing it ends in, without
 * Galata's `setCell`, which types it key by key (15 s for a clean cell).
 *
 * @throws when the active widget has no code cell `index`.
 */
export async function setCellSource(
  page: IJupyterLabPageFixture,
  index: number,
  source: string
): Promise<void> {
  await page.evaluate(
    ([i, text]) => {
      const notebook = (window as any).jupyterapp.shell.currentWidget?.content;
      const cells = notebook?.model?.cells;
      const cell = cells && i < cells.length ? cells.get(i) : null;
      if (!cell || cell.type !== 'code') {
        throw new Error(`the active notebook has no code cell ${i}`);
      }
      cell.sharedModel.setSource(text);
      notebook.activeCellIndex = i;
    },
    [index, source] as [number, string]
  );
}
