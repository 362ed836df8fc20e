/**
 * Probes shared by the hostile-condition Galata specs: what the extension
 * holds in the page (`GpuMonitor.debugCounts()`), what the agent holds in the
 * kernel (the expressions of test/agent/test_injection.py's COUNTS, read with
 * a silent execute's `user_expressions`, as another extension would), and
 * the console lines and page errors of the extension.
 */
import type { IJupyterLabPageFixture } from '@jupyterlab/galata';
import type { Page } from '@playwright/test';
import { setCellSource } from './notebook-file';

/** The agent's package in `sys.modules`, its comm target and sampler thread. */
export const MODULE = '_jupyterlab_gpu_hygiene_agent';
export const TARGET = 'jupyterlab_gpu_hygiene.v1';
export const THREAD = 'gpu-hygiene-sampler';

/** Callbacks defined in the agent: in its package or one of its submodules. */
const AGENT_HOOKS = (event: string) =>
  `len([c for c in get_ipython().events.callbacks['${event}']` +
  ` if str(getattr(getattr(c, '__func__', c), '__module__', None)).split('.')[0] == '${MODULE}'])`;

/** Python expressions (each an int) for the kernel side of the agent. */
export const KERNEL_COUNTS: Record<string, string> = {
  postRunCell: AGENT_HOOKS('post_run_cell'),
  preRunCell: AGENT_HOOKS('pre_run_cell'),
  threads: `len([t for t in __import__('threading').enumerate() if t.name == '${THREAD}'])`,
  target: `int('${TARGET}' in get_ipython().kernel.comm_manager.targets)`,
  agentComms: `len(__import__('sys').modules['${MODULE}']._agent.comms)`,
  kernelComms: `len([c for c in get_ipython().kernel.comm_manager.comms.values() if c.target_name == '${TARGET}'])`,
  // ipykernel >= 7: subshells (JupyterLab runs comms over them by default)
  subshells:
    "(lambda k: len(k.shell_channel_thread.manager.list_subshell()) if getattr(k, 'shell_channel_thread', None) else 0)(get_ipython().kernel)"
};

/** What `GpuMonitor.debugCounts()` returns (see src/monitor.ts). */
export interface IBrowserCounts {
  entries: number;
  models: number;
  sessionSlots: number;
  connections: number;
  comms: number;
  kernelSlots: number;
  ownKernels: number;
}

/** The extension's own counts of what it holds in the page. */
export async function browserCounts(page: Page): Promise<IBrowserCounts> {
  return page.evaluate(async () => {
    const app = (window as any).jupyterapp;
    const token = [...app.pluginRegistry._services.keys()].find(
      (t: any) => t.name === 'jupyterlab-gpu-hygiene:IGpuMonitor'
    );
    const monitor = await app.resolveRequiredService(token);
    return monitor.debugCounts();
  });
}

/** A few fields of the current notebook's kernel model, or null. */
export async function currentModel(page: Page): Promise<{
  kernelId: string;
  status: string;
  deadReason: string | null;
  pid: number | null;
  dropped: number;
  inventories: number;
  errors: string[];
} | null> {
  return page.evaluate(async () => {
    const app = (window as any).jupyterapp;
    const token = [...app.pluginRegistry._services.keys()].find(
      (t: any) => t.name === 'jupyterlab-gpu-hygiene:IGpuMonitor'
    );
    const monitor = await app.resolveRequiredService(token);
    const model = monitor.currentModel;
    return model
      ? {
          kernelId: model.kernelId,
          status: model.status,
          deadReason: model.deadReason,
          pid: model.hello?.pid ?? null,
          dropped: model.droppedMessages,
          inventories: model.cells.length,
          errors: model.agentErrors.map((e: any) => `${e.where}: ${e.message}`)
        }
      : null;
  });
}

/**
 * The agent's hooks, threads and comms in the current notebook's kernel,
 * read with one silent execute (no cell, no history, no post_run_cell), and
 * the open comms of our target as the kernel lists them (`comm_info`).
 */
export async function kernelCounts(
  page: Page
): Promise<Record<string, number>> {
  return page.evaluate(
    async ({ expressions, target }) => {
      const app = (window as any).jupyterapp;
      const kernel = app.shell.currentWidget.sessionContext.session.kernel;
      const future = kernel.requestExecute({
        code: '',
        silent: true,
        store_history: false,
        user_expressions: expressions
      });
      const reply = await future.done;
      const counts: Record<string, number> = {};
      for (const [name, value] of Object.entries<any>(
        reply.content.user_expressions
      )) {
        counts[name] =
          value.status === 'ok' ? Number(value.data['text/plain']) : NaN;
      }
      const info = await kernel.requestCommInfo({ target_name: target });
      counts.commInfo = Object.keys(info.content.comms ?? {}).length;
      return counts;
    },
    { expressions: KERNEL_COUNTS, target: TARGET }
  );
}

/**
 * Collect, as `type: text` strings, the console lines (not debug) that match
 * `pattern` (by default the extension's own) and every page error: a test
 * ends with `expect(noise).toEqual([])`.
 */
export function collectNoise(
  page: Page,
  pattern: RegExp = /gpu.hygiene|gpu_hygiene/i
): string[] {
  const noise: string[] = [];
  page.on('console', message => {
    const text = message.text();
    if (pattern.test(text) && message.type() !== 'debug') {
      noise.push(`${message.type()}: ${text}`);
    }
  });
  page.on('pageerror', error => noise.push(`pageerror: ${error.message}`));
  return noise;
}

/**
 * Collect the extension's console lines (not debug) and every page error,
 * and every `dialog` event (an `alert()` would be one).
 */
export function watchPage(page: Page): {
  console: string[];
  pageErrors: string[];
  dialogs: string[];
} {
  const seen = {
    console: [] as string[],
    pageErrors: [] as string[],
    dialogs: [] as string[]
  };
  page.on('console', message => {
    const text = message.text();
    if (/gpu.hygiene|gpu_hygiene/i.test(text) && message.type() !== 'debug') {
      seen.console.push(`${message.type()}: ${text}`);
    }
  });
  page.on('pageerror', error => seen.pageErrors.push(error.message));
  page.on('dialog', dialog => {
    seen.dialogs.push(`${dialog.type()}: ${dialog.message()}`);
    void dialog.dismiss();
  });
  return seen;
}

/** The status bar gauge, its popup (the breakdown) and the popup's rendered content. */
export const GAUGE = '.jp-GpuHygiene-gauge';
export const GAUGE_POPUP = '.jp-GpuHygiene-popup[role="dialog"]';
const POPUP_CONTENT = `${GAUGE_POPUP} .jp-GpuHygiene-popupContent`;

/** Open the gauge's popup (a click on the gauge) unless it is open; its locator. */
export async function openGaugePopup(page: Page) {
  const popup = page.locator(GAUGE_POPUP);
  if ((await popup.count()) === 0) {
    await page.locator(GAUGE).click();
  }
  await page.locator(POPUP_CONTENT).waitFor({ state: 'visible' });
  return popup;
}

/**
 * The gauge's breakdown as its popup shows it: opens the popup, returns its
 * text (`innerText`: one line per heading, list item and paragraph), and
 * closes it with Escape (focus is in the popup; it goes back to the gauge).
 */
export async function gaugeDetails(page: Page): Promise<string> {
  await openGaugePopup(page);
  const text = await page.locator(POPUP_CONTENT).innerText();
  await page.locator(GAUGE_POPUP).focus();
  await page.keyboard.press('Escape');
  await page.locator(GAUGE_POPUP).waitFor({ state: 'detached' });
  return text;
}

/** Open the VRAM panel from the gauge: its popup's "Open VRAM panel" button. */
export async function openPanelFromGauge(page: Page): Promise<void> {
  const popup = await openGaugePopup(page);
  await popup.getByRole('button', { name: 'Open VRAM panel' }).click();
  await popup.waitFor({ state: 'detached' });
}

/**
 * Click the notebook toolbar's Clean GPU button where JupyterLab put it: on
 * the toolbar, or, when the main area is too narrow for it (the VRAM panel
 * open beside a 1280 px window), in the toolbar's "More commands" menu, as a
 * user would.
 */
export async function clickToolbarClean(page: Page): Promise<void> {
  const selector = '[data-command="gpu-hygiene:clean"]';
  const onToolbar = page.locator(`.jp-NotebookPanel-toolbar ${selector}`);
  if (await onToolbar.isVisible()) {
    await onToolbar.click();
    return;
  }
  await page
    .locator('.jp-NotebookPanel-toolbar')
    .getByRole('button', { name: 'More commands' })
    .click();
  await page.locator(`.jp-Toolbar-responsive-popup ${selector}`).click();
}

/**
 * Set the source of code cell `index` of the current notebook and run it.
 * The source goes through the model (`setCellSource`): typed into the
 * editor, its auto-indent would change the code.
 */
export async function runInCell(
  page: IJupyterLabPageFixture,
  index: number,
  code: string
): Promise<void> {
  await setCellSource(page, index, code);
  await page.notebook.runCell(index);
}

/** Run `code` in the last cell (an empty one: running a cell adds one below). */
export async function runNew(
  page: IJupyterLabPageFixture,
  code: string
): Promise<void> {
  await runInCell(page, (await page.notebook.getCellCount()) - 1, code);
}
