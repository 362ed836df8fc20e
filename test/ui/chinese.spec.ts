/**
 * Browser test in 中文: a real JupyterLab server with the zh_CN language pack
 * from PyPI (jupyterlab-language-pack-zh-CN) and this package's own zh_CN
 * catalogue (served by jupyterlab_server through the `jupyterlab.locale`
 * entry point), a real ipykernel with torch on the CPU, Debian chromium.
 *
 * JupyterLab is switched to Chinese the way a user does it (Settings →
 * Language → 中文: the `locale` setting of
 * @jupyterlab/translation-extension:plugin, then a reload; Galata keeps the
 * settings in memory for this test only). A small torch model cell run twice
 * raises the stacked-model toast, read in Chinese; the VRAM panel's headings
 * and the settings editor's titles (translated by the schema's fetch
 * transform) are read in Chinese too. Light-theme screenshots of the toast
 * and the panel are kept as test artifacts.
 */
import { expect, test } from '@jupyterlab/galata';
import { collectNoise, openGaugePopup } from './probes';
import { notebookJson } from './notebook-file';
import type { Page } from '@playwright/test';

// Galata's kernels fixture intercepts POST .../restart; real kernels throughout.
test.use({ kernels: null, autoGoto: true });

const DOMAIN = 'jupyterlab_gpu_hygiene';
const gauge = '.jp-GpuHygiene-gauge';
const toast = '.Toastify__toast';
const panelId = '#jp-GpuHygiene-panel';

/** About 8 MiB of parameters: above the toast floor (toastMinMiB, 1 MiB). */
const MODEL_CELL = [
  'import torch',
  'model = torch.nn.Sequential(',
  '    torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024))',
  'model'
].join('\n');

/**
 * Run cell `index` of the current notebook and wait for its prompt to show
 * `count` (Galata's runCell waits for the English "Idle" in the status bar).
 */
async function runCell(page: Page, index: number, count: number) {
  await page.evaluate(at => {
    const app = (window as any).jupyterapp;
    app.shell.currentWidget.content.activeCellIndex = at;
    void app.commands.execute('notebook:run-cell');
  }, index);
  await expect(
    page.locator('.jp-Notebook .jp-Cell').nth(index).locator('.jp-InputPrompt')
  ).toHaveText(`[${count}]:`, { timeout: 120000 });
}

test('JupyterLab in 中文: the stacked-model toast, the VRAM panel and the settings in Chinese', async ({
  page,
  tmpPath
}, testInfo) => {
  const noise = collectNoise(page, /gpu.hygiene|gpu_hygiene|recharts/i);

  // The server serves this package's catalogue beside the language pack's.
  const response = await page.request.get('/lab/api/translations/zh_CN');
  expect(response.ok()).toBe(true);
  const { data } = await response.json();
  expect(Object.keys(data)).toContain('jupyterlab');
  expect(data[DOMAIN]['']).toMatchObject({
    domain: DOMAIN,
    language: 'zh-CN'
  });
  expect(data[DOMAIN]['VRAM Panel']).toEqual(['显存面板']);

  // Settings → Language → 中文 (the command of that menu item), then reload.
  // (Not awaited: the command resolves once its dialog is answered.)
  await page.evaluate(() => {
    void (window as any).jupyterapp.commands.execute(
      'jupyterlab-translation:zh_CN'
    );
  });
  const dialog = page.locator('.jp-Dialog');
  await expect(dialog).toBeVisible();
  await Promise.all([
    page.waitForEvent('load'),
    dialog.locator('.jp-mod-accept').click()
  ]);
  // Galata's reload: waits for the application and hooks its helpers up again
  // (not for its English "Launcher" tab).
  await page.reload({ waitForIsReady: false });
  await expect(page.locator('.jp-Launcher')).toBeVisible();
  await expect(page.locator('#jp-top-panel')).toBeVisible();
  expect(await page.locator('html').getAttribute('lang')).toMatch(/^zh/);
  // JupyterLab's own menus come from the language pack.
  await expect(page.locator('#jp-menu-panel')).toContainText('文件');

  // Galata's file-browser helpers read English labels: the notebook opens by
  // command (its kernelspec in the metadata: no kernel dialog).
  const nb = `${tmpPath}/zh.ipynb`;
  await page.contents.uploadContent(
    notebookJson('python3', [MODEL_CELL, '']),
    'text',
    nb
  );
  await page.evaluate(path => {
    void (window as any).jupyterapp.commands.execute('docmanager:open', {
      path
    });
  }, nb);
  await expect(page.locator('.jp-NotebookPanel')).toBeVisible();
  await page.notebook.activate('zh.ipynb');
  // The agent answered (no GPU here): the gauge in Chinese.
  await expect(page.locator(gauge)).toHaveAttribute('data-kind', 'no-gpu', {
    timeout: 120000
  });
  await expect(page.locator(gauge)).toHaveText(/^无 GPU/);

  await runCell(page, 0, 1);
  await expect(page.locator(gauge)).toContainText('1 个模型');
  await runCell(page, 0, 2); // the re-run: Out[1] keeps the first model
  await expect(page.locator(gauge)).toContainText('2 个模型');

  // The stacked-model toast, in Chinese, naming what holds the older model.
  const warning = page.locator(toast, { hasText: '模型堆叠 Sequential' });
  await expect(warning).toBeVisible();
  await expect(warning).toContainText('仅被 Out[1]');
  await expect(warning).toContainText('内存中 8.0 MiB');
  for (const name of ['清理 GPU', '重启内核', '不再警告']) {
    await expect(warning.getByRole('button', { name })).toBeVisible();
  }
  expect(await warning.textContent()).not.toMatch(
    /Stacked|held only by|in RAM/
  );
  testInfo.annotations.push({
    type: 'toast text',
    description: (await warning.textContent()) ?? ''
  });
  await warning.screenshot({
    path: testInfo.outputPath('zh-toast-light.png')
  });

  // The gauge's popup in Chinese, then the VRAM panel from its button.
  const popup = await openGaugePopup(page);
  await expect(popup).toContainText('此内核看不到 NVIDIA GPU');
  await expect(popup).not.toContainText('No NVIDIA GPU visible');
  await popup.screenshot({ path: testInfo.outputPath('zh-popup-light.png') });
  await popup.getByRole('button', { name: '打开显存面板' }).click();
  const panel = page.locator(panelId);
  await expect(panel.locator('.jp-GpuHygiene-panelContent')).toBeVisible();
  // no CUDA figures here: the memory is CPU RAM, and the heading says so
  await expect(panel.locator('h3', { hasText: '谁占用内存' })).toBeVisible();
  await expect(panel.locator('h3', { hasText: '单元格' })).toBeVisible();
  await expect(panel).toContainText('此内核看不到 GPU。');
  await expect(panel).toContainText('持有者');
  for (const english of [
    'Who holds memory',
    'No GPU visible to this kernel',
    'Holder'
  ]) {
    await expect(panel).not.toContainText(english);
  }
  // The toast sits over the panel's lower half: out of the panel's picture.
  const hideToasts = await page.addStyleTag({
    content: '.Toastify { visibility: hidden; }'
  });
  await panel.screenshot({ path: testInfo.outputPath('zh-panel-light.png') });
  await hideToasts.evaluate(node => node.remove());

  // The settings editor: the schema's titles through the fetch transform.
  await page.evaluate(() => {
    void (window as any).jupyterapp.commands.execute('settingeditor:open', {
      query: 'GPU Hygiene'
    });
  });
  const editor = page.locator('.jp-SettingsPanel');
  await expect(editor).toContainText('模型堆叠警告');
  await expect(editor).toContainText('采样间隔（毫秒）');
  await editor.screenshot({
    path: testInfo.outputPath('zh-settings-light.png')
  });

  expect(noise).toEqual([]);
});
