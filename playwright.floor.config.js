/**
 * The page-side smoke test (test/floor/smoke.spec.ts) in the oldest and the
 * newest page the extension supports: JupyterLab 4.0.2 and Notebook 7.0.0
 * from .make/floor-venv (make test-floor sets it up), JupyterLab and
 * Notebook 7 from .venv. One project and one server each; the kernel is the
 * same everywhere (.venv's python, test/floor/jupyter_server_floor_config.py).
 *
 * Plain Playwright, not Galata's fixtures: Galata's page helpers talk to the
 * in-page galata extension of the JupyterLab it was released with, and the
 * one in JupyterLab 4.0.2 is older. The spec drives the page through the
 * DOM and `window.jupyterapp`, which every JupyterLab 4 exposes alike.
 */
const path = require('path');
const base = require('./playwright.config');

// GPU_HYGIENE_FLOOR_PORT: the first of four ports (default 8890 to 8893).
const FIRST = Number(process.env.GPU_HYGIENE_FLOOR_PORT || 8890);
const CONFIG = 'test/floor/jupyter_server_floor_config.py';

const pages = [
  {
    name: 'jupyterlab-4.0.2',
    venv: '.make/floor-venv',
    app: 'lab',
    pageVersion: /^4\.0\.2$/
  },
  {
    name: 'notebook-7.0.0',
    venv: '.make/floor-venv',
    app: 'notebook',
    pageVersion: /^7\.0\.0$/
  },
  { name: 'jupyterlab-newest', venv: '.venv', app: 'lab', pageVersion: /^4\./ },
  {
    name: 'notebook-newest',
    venv: '.venv',
    app: 'notebook',
    pageVersion: /^7\./
  }
].map((page, i) => ({ ...page, port: FIRST + i }));

module.exports = {
  testDir: './test/floor',
  testMatch: ['smoke.spec.ts'],
  outputDir: 'test-results/floor',
  reporter: [['list']],
  timeout: 240000,
  expect: { timeout: 60000 },
  workers: 1,
  retries: 0,
  use: {
    launchOptions: base.use.launchOptions,
    trace: base.use.trace,
    screenshot: base.use.screenshot,
    video: 'off'
  },
  projects: pages.map(page => ({
    name: page.name,
    use: {
      baseURL: `http://127.0.0.1:${page.port}`,
      app: page.app,
      pageVersion: page.pageVersion
    }
  })),
  webServer: pages.map(page => ({
    command: `${page.venv}/bin/jupyter ${page.app} --config ${CONFIG} --ServerApp.port=${page.port}`,
    url: `http://127.0.0.1:${page.port}/api/status`,
    timeout: 180000,
    reuseExistingServer: false,
    env: {
      ...process.env,
      YOLO_OFFLINE: 'true',
      GPU_HYGIENE_KERNEL_PYTHON: path.resolve('.venv/bin/python')
    }
  }))
};
