/**
 * The browser test of the demo notebook again, with every kernel remote:
 * JupyterLab (port 8890) talks to a Jupyter Kernel Gateway (port 8891)
 * through `--GatewayClient.url`, as in JupyterHub / Enterprise Gateway
 * deployments where kernels run on GPU nodes. The extension is unchanged:
 * the agent travels as an execute request and a comm, like any notebook traffic.
 */
const base = require('./playwright.config');

// Read by stacked-yolo.spec.ts (the test workers inherit it).
process.env.GPU_HYGIENE_GATEWAY = '1';

const LAB_PORT = 8890;
const GATEWAY_PORT = 8891;

module.exports = {
  ...base,
  testMatch: ['gateway.spec.ts', 'stacked-yolo.spec.ts'],
  testIgnore: [],
  // one project, one browser: not the main config's parallel/alone split
  projects: undefined,
  workers: 1,
  outputDir: 'test-results/gateway',
  reporter: [['list']],
  use: { ...base.use, baseURL: `http://127.0.0.1:${LAB_PORT}` },
  webServer: [
    {
      command: [
        '.venv/bin/jupyter kernelgateway',
        '--KernelGatewayApp.ip=127.0.0.1',
        `--KernelGatewayApp.port=${GATEWAY_PORT}`,
        '--JupyterWebsocketPersonality.list_kernels=True',
        '--KernelGatewayApp.log_level=WARN'
      ].join(' '),
      url: `http://127.0.0.1:${GATEWAY_PORT}/api/kernelspecs`,
      timeout: 120000,
      reuseExistingServer: false,
      env: { ...process.env, YOLO_OFFLINE: 'true' }
    },
    {
      command: [
        '.venv/bin/jupyter lab --config test/ui/jupyter_server_test_config.py',
        `--ServerApp.port=${LAB_PORT}`,
        `--GatewayClient.url=http://127.0.0.1:${GATEWAY_PORT}`
      ].join(' '),
      url: `http://127.0.0.1:${LAB_PORT}/lab`,
      timeout: 180000,
      reuseExistingServer: false
    }
  ]
};
