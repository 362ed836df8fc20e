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
