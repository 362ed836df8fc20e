/**
 * Accessibility in a real JupyterLab (real ipykernel, torch on the CPU, the
 * built extension, Debian chromium): an axe-core scan of the extension's own
 * elements in the light and the dark theme (the gauge and its popup, the
 * stacked-model toast, the VRAM panel, the panel's Delete… confirmation
 * dialog), and a keyboard-only path from the notebook to Clean GPU.
 *
 * The scans include only our elements (`.jp-GpuHygiene-*`, the toast
 * container, the dialog): impact serious or critical fails the test. A scan
 * of the whole page is kept as an annotation (JupyterLab's own chrome), not
 * asserted.
 */
import AxeBuilder from '@axe-core/playwright';
import { expect, IJupyterLabPageFixture, test } from '@jupyterlab/galata';
import type { Page, TestInfo } from '@playwright/test';
import { openNotebookOn } from './notebook-file';
import {
  collectNoise,
  GAUGE,
  GAUGE_POPUP,
  openGaugePopup,
  openPanelFromGauge
} from './probes';

test.use({ autoGoto: true });

const PANEL = '#jp-GpuHygiene-panel';
const TOAST = '.Toastify__toast';
const TOASTS = '.jp-toastContainer';
const DIALOG = '.jp-Dialog';

/**
 * A small torch model whose cell ends with a bare `model`: Jupyter keeps the
 * first instance in Out[2] when the cell runs again, so a stacked-model toast
 * names it (no download, a few MiB on the CPU).
 */
const CELLS = [
  'import torch',
  'model = torch.nn.Sequential(\n    torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)\n)\nmodel'
];

/** One violation, as the report keeps it. */
interface IViolation {
  id: string;
  impact: string | null | undefined;
  nodes: number;
  targets: string[];
}

/** Serious or critical axe violations inside `include` (our elements). */
async function scan(
  page: Page,
  include: string[],
  testInfo: TestInfo,
  what: string
): Promise<IViolation[]> {
  let builder = new AxeBuilder({ page });
  for (const selector of include) {
    builder = builder.include(selector);
  }
  const result = await builder.analyze();
  const all = result.violations.map(v => ({
    id: v.id,
    impact: v.impact,
    nodes: v.nodes.length,
    targets: v.nodes.slice(0, 5).map(n => n.target.join(' '))
  }));
  // What axe checked and could not decide (e.g. color-contrast over an
  // overlapping element), for the record.
  const checked = `${result.passes.length} rules passed, incomplete: ${
    result.incomplete.map(v => `${v.id} (${v.nodes.length})`).join(', ') ||
    'none'
  }`;
  const description = all.length
    ? all
        .map(v => `${v.id} (${v.impact}, ${v.nodes}: ${v.targets.join(' | ')})`)
        .join('; ')
    : `no violations (${checked})`;
  testInfo.annotations.push({ type: `axe: ${what}`, description });
  console.log(`axe: ${what}: ${description}`);
  return all.filter(v => v.impact === 'serious' || v.impact === 'critical');
}

/** Everything axe says about the whole page: JupyterLab's chrome included (reported, not asserted). */
async function scanPage(page: Page, testInfo: TestInfo, theme: string) {
  const result = await new AxeBuilder({ page }).analyze();
  const description = result.violations
    .map(
      v =>
        `${v.id} (${v.impact}, ${v.nodes.length}: ${v.nodes
          .slice(0, 4)
          .map(n => n.target.join(' '))
          .join(' | ')})`
    )
    .join('; ');
  testInfo.annotations.push({
    type: `axe: whole page (${theme}), for the record`,
    description
  });
  console.log(`axe: whole page (${theme}): ${description}`);
}

/** A notebook on the real python3 kernel with the model cell run twice: the stacked toast is up. */
async function stackedNotebook(
  page: IJupyterLabPageFixture,
  tmpPath: string
): Promise<void> {
  await openNotebookOn(page, `${tmpPath}/a11y.ipynb`, 'python3', CELLS);
  await expect(page.locator(GAUGE)).toHaveAttribute('data-kind', 'no-gpu', {
    timeout: 120000
  });
  await page.notebook.runCell(0);
  await page.notebook.runCell(1);
  await expect(page.locator(GAUGE)).toContainText('1 model');
  await page.notebook.runCell(1);
  await expect(page.locator(GAUGE)).toContainText('2 models');
  await expect(
    page.locator(TOAST, { hasText: 'Stacked Sequential' })
  ).toBeVisible();
}

test('axe: no serious or critical violations in our elements, light and dark', async ({
  page,
  tmpPath
}, testInfo) => {
  test.setTimeout(300000);
  const noise = collectNoise(page);
  await stackedNotebook(page, tmpPath);

  for (const theme of ['JupyterLab Light', 'JupyterLab Dark']) {
    await page.evaluate(
      async name =>
        (window as any).jupyterapp.commands.execute('apputils:change-theme', {
          theme: name
        }),
      theme
    );
    await expect
      .poll(() =>
        page.evaluate(() => document.body.getAttribute('data-jp-theme-name'))
      )
      .toBe(theme);

    // The gauge and its popup.
    await openGaugePopup(page);
    expect(
      await scan(page, [GAUGE, GAUGE_POPUP], testInfo, `gauge popup (${theme})`)
    ).toEqual([]);
    await page.keyboard.press('Escape');
    await expect(page.locator(GAUGE_POPUP)).toHaveCount(0);

    // The stacked-model toast.
    await expect(
      page.locator(TOAST, { hasText: 'Stacked Sequential' })
    ).toBeVisible();
    expect(await scan(page, [TOASTS], testInfo, `toast (${theme})`)).toEqual(
      []
    );

    // The VRAM panel.
    await openPanelFromGauge(page);
    const panel = page.locator(PANEL);
    await expect(panel.locator('.jp-GpuHygiene-panelContent')).toBeVisible();
    await expect(panel.locator('.jp-GpuHygiene-holders tbody tr')).toHaveCount(
      2
    );
    expect(
      await scan(page, [PANEL], testInfo, `VRAM panel (${theme})`)
    ).toEqual([]);

    // The panel's confirmation dialog: Delete… of the named holder; Cancel.
    // From the keyboard: the stacked warning stays until closed, and in the
    // bottom-right corner it can cover the panel's last rows.
    await panel
      .locator(
        '.jp-GpuHygiene-holders tr[data-state="named"] [data-action="delete"]'
      )
      .focus();
    await page.keyboard.press('Enter');
    const dialog = page.locator(DIALOG);
    await expect(dialog).toBeVisible();
    expect(
      await scan(page, [DIALOG], testInfo, `Delete… dialog (${theme})`)
    ).toEqual([]);
    await scanPage(page, testInfo, theme);
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await expect(dialog).toHaveCount(0);
  }
  expect(noise).toEqual([]);
});

/** Press Tab until `focused` holds (at most `max` presses); how many it took. */
async function tabUntil(
  page: Page,
  focused: () => Promise<boolean>,
  max: number,
  key = 'Tab'
): Promise<number> {
  for (let n = 1; n <= max; n++) {
    await page.keyboard.press(key);
    if (await focused()) {
      return n;
    }
  }
  throw new Error(`not reached with ${max} × ${key}`);
}

/** Whether the focused element matches `selector`. */
const focusIs = (page: Page, selector: string) => () =>
  page.evaluate(s => !!document.activeElement?.matches(s), selector);

test('keyboard only: from the notebook to the gauge, the VRAM panel and Clean GPU', async ({
  page,
  tmpPath
}, testInfo) => {
  test.setTimeout(300000);
  const noise = collectNoise(page);
  await stackedNotebook(page, tmpPath);
  // Close the toast so that its buttons are not in the way (its own keyboard
  // path is JupyterLab's); from here on, the keyboard only.
  await page
    .locator(TOAST, { hasText: 'Stacked Sequential' })
    .getByRole('button', { name: 'Hide notification' })
    .click();
  await page.notebook.selectCells(0);
  await page.keyboard.press('Escape'); // command mode

  // The gauge is in the tab order (role=button, tabindex=0, as core's status
  // bar items): Shift+Tab from the notebook goes backwards through the
  // status bar, which is last in the page.
  const presses = await tabUntil(page, focusIs(page, GAUGE), 120, 'Shift+Tab');
  testInfo.annotations.push({
    type: 'Shift+Tab presses from the notebook to the gauge',
    description: String(presses)
  });
  console.log(`Shift+Tab presses from the notebook to the gauge: ${presses}`);
  const gauge = page.locator(GAUGE);
  await expect(gauge).toHaveAttribute('aria-expanded', 'false');
  await page.keyboard.press('Enter');
  const popup = page.locator(GAUGE_POPUP);
  await expect(popup).toBeVisible();
  await expect(gauge).toHaveAttribute('aria-expanded', 'true');
  await expect(popup).toBeFocused();
  // Escape closes it and gives focus back to the gauge; Space opens it again.
  await page.keyboard.press('Escape');
  await expect(popup).toHaveCount(0);
  await expect(gauge).toBeFocused();
  await page.keyboard.press(' ');
  await expect(popup).toBeVisible();

  // Tab to "Open VRAM panel", Enter: the panel.
  await tabUntil(
    page,
    focusIs(page, `${GAUGE_POPUP} [data-action="open-panel"]`),
    5
  );
  await page.keyboard.press('Enter');
  await expect(
    page.locator(`${PANEL} .jp-GpuHygiene-panelContent`)
  ).toBeVisible();
  await expect(popup).toHaveCount(0);

  // The panel's Clean GPU (the stacked finding's fix): Tab forward when focus
  // went into the panel, else Shift+Tab back from the gauge (the right
  // sidebar comes just before the status bar).
  const inPanel = await page.evaluate(
    selector => !!document.activeElement?.closest(selector),
    PANEL
  );
  const cleanInPanel = () =>
    page.evaluate(selector => {
      const active = document.activeElement;
      return (
        !!active?.closest(selector) &&
        active.tagName === 'BUTTON' &&
        active.textContent?.trim() === 'Clean GPU'
      );
    }, PANEL);
  const toClean = await tabUntil(
    page,
    cleanInPanel,
    150,
    inPanel ? 'Tab' : 'Shift+Tab'
  );
  console.log(
    `${inPanel ? 'Tab' : 'Shift+Tab'} presses to the panel's Clean GPU: ${toClean}`
  );
  testInfo.annotations.push({
    type: "presses to the panel's Clean GPU",
    description: `${toClean} × ${inPanel ? 'Tab' : 'Shift+Tab'}`
  });
  const cellsBefore = await page.notebook.getCellCount();
  await page.keyboard.press('Enter');
  await expect.poll(() => page.notebook.getCellCount()).toBe(cellsBefore + 1);
  await expect(
    page.locator(TOAST, { hasText: 'Clean GPU freed' })
  ).toBeVisible();
  await expect(gauge).toContainText('No GPU · 1 model');
  const source = await page.evaluate(() =>
    [...document.querySelectorAll('.jp-Notebook .jp-Cell .jp-InputArea-editor')]
      .map(e => e.textContent ?? '')
      .find(t => t.includes('# gpu-hygiene: clear_gpu'))
  );
  expect(source).toBeTruthy();
  expect(noise).toEqual([]);
});
