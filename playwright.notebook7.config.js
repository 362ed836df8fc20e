/**
 * Galata against Jupyter Notebook 7 (the `notebook` package, built on
 * JupyterLab 4): the same built extension, a `jupyter notebook` server, the
 * Notebook 7 pages (`/tree/...`, `/notebooks/...`) instead of `/lab`, as in
 * jupyter/notebook's own ui-tests (`appPath: ''`, the app is ready once
 * `#main-panel` is there).
 */
const base = require('./playwright.config');

// GPU_HYGIENE_NB7_PORT lets two runs share a machine (default 8889).
const PORT = Number(process.env.GPU_HYGIENE_NB7_PORT || 8889);

module.exports = {
  ...base,
  testMatch: ['notebook7.spec.ts'],
  testIgnore: [],
  // one project, one browser: not the main config's parallel/alone split
  projects: undefined,
  workers: 1,
  outputDir: 'test-results/notebook7',
  reporter: [['list']],
  use: { ...base.use, baseURL: `http://127.0.0.1:${PORT}`, appPath: '' },
  webServer: {
    ...base.webServer,
    command: `.venv/bin/jupyter notebook --config test/ui/notebook7_server_config.py --ServerApp.port=${PORT}`,
    url: `http://127.0.0.1:${PORT}/tree`
  }
};
