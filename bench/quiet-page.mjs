#!/usr/bin/env node
// The open page of bench/quiet.py (issue 40): Debian's chromium keeps a JupyterLab notebook open
// on a server bench/quiet.py started, runs one cell in it (the extension injects its agent and
// opens its comm), prints "ready <kernel id>" once the gauge shows the agent's figures, then
// keeps the page open, untouched, until it is killed or --seconds pass.
//   node bench/quiet-page.mjs --url http://127.0.0.1:PORT/lab/tree/quiet.ipynb?token=T --seconds N
import { chromium } from '@playwright/test';

const args = process.argv.slice(2);
const arg = name => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const url = arg('--url');
const seconds = Number(arg('--seconds') ?? 600);
if (!url) {
  console.error('usage: quiet-page.mjs --url URL [--seconds N]');
  process.exit(2);
}

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: [
    '--no-sandbox',
    '--headless',
    '--disable-gpu',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--no-first-run'
  ]
});
try {
  const page = await browser.newPage();
  await page.goto(url);
  // the notebook's kernel is idle and the extension's gauge shows the agent's figures
  const gauge = page.locator('.jp-GpuHygiene-gauge');
  await gauge.waitFor({ timeout: 120_000 });
  await page.waitForFunction(
    () => {
      const widget = window.jupyterapp?.shell?.currentWidget;
      return widget?.sessionContext?.session?.kernel?.status === 'idle';
    },
    null,
    { timeout: 120_000 }
  );
  // one cell, run as a user runs it (Shift+Enter in the first cell)
  await page.locator('.jp-Cell .cm-content').first().click();
  await page.keyboard.type('x = list(range(1000))');
  await page.keyboard.press('Shift+Enter');
  await page.waitForFunction(
    () => {
      const node = document.querySelector('.jp-GpuHygiene-gauge');
      return node && /No GPU|VRAM/.test(node.textContent ?? '');
    },
    null,
    { timeout: 120_000 }
  );
  const id = await page.evaluate(
    () => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.id
  );
  console.log(`ready ${id}`);
  await page.waitForTimeout(seconds * 1000);
} finally {
  await browser.close();
}
